"""Keys held by the service (/v1/keys): made by an admin, bound to a reach and a role, enforced on every route."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import httpx
import pytest

from app.engine.keys import FRESH_S
from tests.support.engines import ClientFactory
from tests.support.processes import ENGRAM, engram_env, free_port, wait_until_answering
from tests.support.scratch import run_engram

ALICE = "team:acme/user:alice"
BOB = "team:acme/user:bob"


def learning(text: str, namespace: str, tags: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": namespace}
    if tags:
        meta["tags"] = tags
    return {"type": "learning", "text": text, "kind": "fact", "confidence": 0.9, "meta": meta}


def bearer(secret: str) -> dict[str, str]:
    return {"authorization": f"Bearer {secret}"}


async def make_key(
    client: httpx.AsyncClient, admin: dict[str, str], role: str, at: str, **reach: Any
) -> tuple[str, dict[str, str]]:
    response = await client.post(
        "/v1/keys",
        json={"name": f"{role} at {at}", "role": role, "reach": {"at": at, "inherit": False, **reach}},
        headers=admin,
    )
    assert response.status_code == 201, response.text
    made = response.json()
    return made["key"]["id"], bearer(made["secret"])


@pytest.fixture
async def world(make_client: ClientFactory) -> Any:
    """A service with one bootstrap key, items of alice and bob, and an alice writer key."""
    async with make_client(api_keys="boot") as client:
        admin = bearer("boot")
        stored = {}
        for text, namespace in [
            ("alice prefers green tea", ALICE),
            ("alice drafts on mondays", f"{ALICE}/agent:writer"),
            ("bob prefers green coffee", BOB),
            ("the team ships on fridays", "team:acme"),
        ]:
            response = await client.post("/v1/store", json=learning(text, namespace, ["shared"]), headers=admin)
            stored[text] = response.json()["id"]
        _, alice = await make_key(client, admin, "write", ALICE, descendants=True)
        yield client, admin, alice, stored


async def test_the_secret_is_shown_once_and_only_its_digest_is_kept(make_client: ClientFactory) -> None:
    async with make_client(api_keys="boot") as client:
        made = (
            await client.post(
                "/v1/keys", json={"name": "ci", "role": "read", "reach": {"at": ALICE}}, headers=bearer("boot")
            )
        ).json()
        assert made["secret"].startswith("egk_") and len(made["secret"]) > 40
        listed = (await client.get("/v1/keys", headers=bearer("boot"))).text
        assert made["secret"] not in listed and made["key"]["id"] in listed
        assert made["key"]["reach"] == {"at": ALICE, "inherit": True, "descendants": False}


async def test_a_scoped_key_reads_only_its_reach(world: Any) -> None:
    client, _, alice, stored = world
    mine = {stored["alice prefers green tea"], stored["alice drafts on mondays"]}
    listed = (await client.post("/v1/list", json={"limit": 100}, headers=alice)).json()
    assert {hit["id"] for hit in listed["items"]} == mine
    for mode in ("keyword", "vector", "hybrid"):
        for body_filter in ({}, {"tags_any": ["shared"]}):
            fetched = await client.post(
                "/v1/fetch",
                json={"query": "green prefers", "mode": mode, "limit": 50, "filter": body_filter},
                headers=alice,
            )
            assert {hit["id"] for hit in fetched.json()["hits"]} <= mine, (mode, body_filter)
    got = (await client.post("/v1/get", json={"ids": list(stored.values())}, headers=alice)).json()
    assert {hit["id"] for hit in got["hits"]} == mine, "an outside id answers as an unknown one"
    explored = (await client.post("/v1/explore", json={"facet": "namespace", "limit": 10}, headers=alice)).json()
    assert {b["value"] for b in explored["buckets"]} == {ALICE, f"{ALICE}/agent:writer"} and explored["total"] == 2
    recalled = await client.post("/v1/recall", json={"question": "who prefers green?", "limit": 5}, headers=alice)
    assert {c["id"] for c in recalled.json()["citations"]} <= mine


async def test_a_request_reach_is_intersected_not_widened(world: Any) -> None:
    client, _, alice, stored = world
    below = {"at": f"{ALICE}/agent:writer", "inherit": True, "descendants": False}
    listed = (await client.post("/v1/list", json={"limit": 100, "filter": {"reach": below}}, headers=alice)).json()
    # The writer agent and alice herself (an ancestor within the key's reach), never team:acme or the root.
    assert {hit["id"] for hit in listed["items"]} == {
        stored["alice prefers green tea"],
        stored["alice drafts on mondays"],
    }


@pytest.mark.parametrize("route", ["/v1/list", "/v1/explore", "/v1/fetch", "/v1/recall"])
async def test_naming_a_namespace_outside_the_reach_is_forbidden(world: Any, route: str) -> None:
    client, _, alice, _ = world
    body: dict[str, Any] = {"limit": 5, "filter": {"reach": {"at": BOB}}}
    body |= {"/v1/explore": {"facet": "tag"}, "/v1/fetch": {"query": "tea", "mode": "keyword"}}.get(route, {})
    body |= {"question": "tea?"} if route == "/v1/recall" else {}
    response = await client.post(route, json=body, headers=alice)
    assert response.status_code == 403 and response.json()["code"] == "forbidden", response.text
    assert "user:bob" in response.json()["message"]


async def test_writes_land_only_within_the_reach(world: Any) -> None:
    client, admin, alice, _ = world
    inside = await client.post("/v1/store", json=learning("alice likes rain", f"{ALICE}/agent:x"), headers=alice)
    assert inside.status_code == 201
    for namespace in (BOB, "team:acme", None):
        item = learning("not hers", namespace) if namespace else {**learning("root", ALICE), "meta": {}}
        refused = await client.post("/v1/store", json=item, headers=alice)
        assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    batch = {"items": [learning("one", ALICE), learning("two", BOB)]}
    assert (await client.post("/v1/store_many", json=batch, headers=alice)).status_code == 403
    listed = (await client.post("/v1/list", json={"limit": 100}, headers=admin)).json()
    assert "one" not in {hit["text"] for hit in listed["items"]}, "a refused batch writes nothing"


async def test_roles(world: Any) -> None:
    client, admin, alice_writer, stored = world
    _, reader = await make_key(client, admin, "read", ALICE, descendants=True)
    _, alice_admin = await make_key(client, admin, "admin", ALICE, descendants=True)
    refused = await client.post("/v1/store", json=learning("x", ALICE), headers=reader)
    assert refused.status_code == 403 and "read key" in refused.json()["message"]
    for key in (reader, alice_writer):
        forget = await client.post("/v1/forget", json={"ids": [stored["alice prefers green tea"]]}, headers=key)
        assert forget.status_code == 403
    # An admin of alice forgets alice's items only, by ids or by filter.
    outside = [stored["bob prefers green coffee"], stored["the team ships on fridays"]]
    by_ids = await client.post("/v1/forget", json={"ids": outside}, headers=alice_admin)
    assert by_ids.json()["forgotten"] == 0
    by_filter = await client.post("/v1/forget", json={"filter": {"tags_any": ["shared"]}}, headers=alice_admin)
    assert by_filter.json()["forgotten"] == 2
    left = (await client.post("/v1/list", json={"limit": 100}, headers=admin)).json()
    assert {hit["id"] for hit in left["items"]} == set(outside)
    # Keys are managed by admins only.
    for key in (reader, alice_writer):
        assert (await client.get("/v1/keys", headers=key)).status_code == 403


async def test_a_scoped_admin_manages_the_keys_within_its_reach(world: Any) -> None:
    client, admin, _, _ = world
    bob_id, _ = await make_key(client, admin, "read", BOB)
    _, alice_admin = await make_key(client, admin, "admin", ALICE, descendants=True)
    made = await client.post(
        "/v1/keys",
        json={"name": "agent", "role": "write", "reach": {"at": f"{ALICE}/agent:x", "inherit": False}},
        headers=alice_admin,
    )
    assert made.status_code == 201
    for beyond in (
        {"at": BOB, "inherit": False},
        {"at": ALICE, "inherit": True},  # alice's admin does not read the team above her
        {"at": "team:acme", "inherit": False, "descendants": True},
    ):
        refused = await client.post(
            "/v1/keys", json={"name": "more", "role": "read", "reach": beyond}, headers=alice_admin
        )
        assert refused.status_code == 403 and refused.json()["code"] == "forbidden", beyond
    listed = {key["reach"]["at"] for key in (await client.get("/v1/keys", headers=alice_admin)).json()["keys"]}
    assert listed == {ALICE, f"{ALICE}/agent:x"}, "only the keys within its reach"
    hidden = await client.post("/v1/keys/revoke", json={"id": bob_id}, headers=alice_admin)
    assert hidden.status_code == 404, "a key outside its reach is one that does not exist"
    mine = await client.post("/v1/keys/revoke", json={"id": made.json()["key"]["id"]}, headers=alice_admin)
    assert mine.status_code == 200 and mine.json()["revoked_at"]


async def test_revoked_and_expired_keys_are_refused(world: Any) -> None:
    client, admin, _, _ = world
    key_id, key = await make_key(client, admin, "read", ALICE)
    assert (await client.post("/v1/list", json={"limit": 1}, headers=key)).status_code == 200
    revoked = await client.post("/v1/keys/revoke", json={"id": key_id}, headers=admin)
    assert revoked.status_code == 200 and "revoked_at" in revoked.json()
    refused = await client.post("/v1/list", json={"limit": 1}, headers=key)
    assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"
    unknown = await client.post("/v1/keys/revoke", json={"id": "key_nope"}, headers=admin)
    assert unknown.status_code == 404
    past = await client.post(
        "/v1/keys",
        json={"name": "old", "role": "read", "reach": {"at": ALICE}, "expires_at": "2020-01-01T00:00:00Z"},
        headers=admin,
    )
    assert past.status_code == 400 and "expires_at" in past.json()["message"]


async def test_a_cursor_belongs_to_its_key(world: Any) -> None:
    client, admin, alice, _ = world
    _, other = await make_key(client, admin, "write", ALICE, descendants=True)
    page = (await client.post("/v1/list", json={"limit": 1}, headers=alice)).json()
    again = await client.post("/v1/list", json={"limit": 1, "cursor": page["next_cursor"]}, headers=other)
    assert again.status_code == 400 and again.json()["code"] == "invalid_request"


async def test_the_first_key_made_on_an_open_service_closes_it(make_client: ClientFactory) -> None:
    async with make_client() as client:
        assert (await client.post("/v1/list", json={"limit": 1})).status_code == 200
        made = await client.post("/v1/keys", json={"name": "first", "role": "admin", "reach": {"descendants": True}})
        assert made.status_code == 201
        assert (await client.post("/v1/list", json={"limit": 1})).status_code == 401
        key = bearer(made.json()["secret"])
        assert (await client.post("/v1/list", json={"limit": 1}, headers=key)).status_code == 200


async def test_the_cli_makes_lists_and_revokes_keys(make_client: ClientFactory, database_url: str) -> None:
    """``engram keys``: a key made on the command line works over HTTP at once, and stops when revoked."""
    settings = {"database_url": database_url, "embedder": "wordllama", "embedding_dim": "256"}
    async with make_client(api_keys="boot") as client:
        made = await asyncio.to_thread(
            run_engram, "keys", "create", "--name", "alice's agent", "--role", "write", "--at", ALICE, **settings
        )
        assert made.returncode == 0, made.stderr
        [listed_line, secret_line] = made.stdout.splitlines()
        assert "the secret is shown this once" in made.stderr
        key_id, secret = listed_line.split()[0], secret_line.removeprefix("secret: ")
        assert f"{ALICE} +ancestors" in listed_line and "'alice's agent'" in listed_line.replace('"', "'")
        stored = await client.post("/v1/store", json=learning("via the cli", ALICE), headers=bearer(secret))
        assert stored.status_code == 201
        held = await asyncio.to_thread(run_engram, "keys", "list", "--json", **settings)
        assert secret not in held.stdout and json.loads(held.stdout)["keys"][0]["id"] == key_id
        revoked = await asyncio.to_thread(run_engram, "keys", "revoke", key_id, **settings)
        assert revoked.returncode == 0 and "revoked" in revoked.stdout
        await asyncio.sleep(FRESH_S)  # another process revoked it: this one reads the key again within FRESH_S
        refused = await client.post("/v1/list", json={"limit": 1}, headers=bearer(secret))
        assert refused.status_code == 401
        bad = await asyncio.to_thread(run_engram, "keys", "create", "--name", " ", "--role", "read", **settings)
        assert bad.returncode == 2 and bad.stderr.startswith("engram: invalid request: name must not be blank")


async def test_serve_beyond_loopback_starts_once_a_key_is_held(pg_engine: Any, database_url: str) -> None:
    """No key configured or held: refused on 0.0.0.0; a key made with ``engram keys create``: served, key required."""
    settings = {"database_url": database_url, "embedder": "wordllama", "embedding_dim": "256"}
    port = str(free_port())
    refused = await asyncio.to_thread(run_engram, "serve", "--host", "0.0.0.0", "--port", port, **settings)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "engram: configuration error: 0.0.0.0 is reachable beyond this machine" in refused.stderr
    made = await asyncio.to_thread(run_engram, "keys", "create", "--name", "ops", "--role", "admin", **settings)
    assert made.returncode == 0, made.stderr
    server = await asyncio.to_thread(
        subprocess.Popen,
        [ENGRAM, "serve", "--host", "0.0.0.0", "--port", port],
        env=engram_env(**settings),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        await asyncio.to_thread(
            wait_until_answering,
            f"{url}/v1/health",
            server,
            what="engram serve",
            timeout_s=120,
            output=lambda: str(server.communicate()),
        )
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.post("/v1/list", json={"limit": 1})).status_code == 401
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=60)
    assert "engram: API keys keys held in the database (engram keys list)" in out
