"""Retention over the wire (/v1/retention and ``engram retention``): admins only, each within its reach;
a bad ttl is a typed 400 that changes nothing; an expired item leaves every answer, an export included."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.http.test_keys import bearer, learning, make_key
from tests.support.engines import ClientFactory
from tests.support.scratch import run_engram

LONG_AGO = (datetime.now(UTC) - timedelta(days=40)).isoformat()
ALICE = "team:acme/user:alice"


def old(text: str, namespace: str) -> dict[str, Any]:
    item = learning(text, namespace)
    item["meta"]["observed_at"] = LONG_AGO
    return item


async def test_set_list_hold_release_and_clear(client: httpx.AsyncClient) -> None:
    stored = await client.post("/v1/store_many", json={"items": [old("an old note", ALICE), learning("new", ALICE)]})
    old_id, new_id = (r["id"] for r in stored.json()["receipts"])
    preview = await client.post("/v1/retention", json={"namespace": "team:acme", "ttl": "P30D", "dry_run": True})
    assert preview.status_code == 200 and preview.json()["would_expire"] == 1
    assert (await client.get("/v1/retention")).json() == {"policies": []}
    made = await client.post("/v1/retention", json={"namespace": " team:acme ", "ttl": "p30d"})
    assert made.status_code == 200
    body = made.json()
    assert body["expired"] == 1 and "would_expire" not in body
    assert body["policy"]["namespace"] == "team:acme" and body["policy"]["ttl"] == "P30D" and not body["policy"]["hold"]
    assert body["policy"]["updated_at"].endswith("Z")
    listed = (await client.post("/v1/list", json={"limit": 10})).json()["items"]
    assert [hit["id"] for hit in listed] == [new_id]
    exported = (await client.post("/v1/export", json={})).text
    assert old_id not in exported and new_id in exported
    held = (await client.post("/v1/retention/hold", json={"namespace": ALICE})).json()
    assert held["expired"] == 0 and held["policy"] == {**held["policy"], "namespace": ALICE, "hold": True}
    assert len((await client.post("/v1/get", json={"ids": [old_id, new_id]})).json()["hits"]) == 2
    policies = (await client.get("/v1/retention")).json()["policies"]
    assert [(p["namespace"], p.get("ttl"), p["hold"]) for p in policies] == [
        ("team:acme", "P30D", False),
        (ALICE, None, True),
    ]
    released = (await client.post("/v1/retention/release", json={"namespace": ALICE})).json()
    assert released == {"expired": 1}
    cleared = (await client.post("/v1/retention/clear", json={"namespace": "team:acme"})).json()
    assert cleared == {"expired": 0}
    assert len((await client.post("/v1/get", json={"ids": [old_id, new_id]})).json()["hits"]) == 2
    for route in ("clear", "release"):
        missing = await client.post(f"/v1/retention/{route}", json={"namespace": "team:acme"})
        assert missing.status_code == 404 and missing.json()["code"] == "not_found"


async def test_a_bad_ttl_is_a_typed_error_and_changes_nothing(client: httpx.AsyncClient) -> None:
    await client.post("/v1/retention", json={"namespace": "team:acme", "ttl": "P1Y"})
    before = (await client.get("/v1/retention")).json()
    refused = await client.post("/v1/retention", json={"namespace": "team:acme", "ttl": "thirty days"})
    assert refused.status_code == 400
    envelope = refused.json()
    assert envelope["code"] == "invalid_request" and not envelope["retryable"]
    assert envelope["message"] == (
        "invalid request: ttl 'thirty days' is not an iso-8601 duration such as 'P30D', 'PT12H' or 'P1Y6M'"
    )
    shape = await client.post("/v1/retention", json={"namespace": "team:acme", "ttl": 30})
    assert shape.status_code == 422 and shape.json()["details"][0]["field"] == "ttl"
    namespace = await client.post("/v1/retention/hold", json={"namespace": "acme"})
    assert namespace.status_code == 400 and "namespace segment" in namespace.json()["message"]
    assert (await client.get("/v1/retention")).json() == before


async def test_only_an_admin_manages_retention_and_only_within_its_reach(make_client: ClientFactory) -> None:
    async with make_client(api_keys="boot") as client:
        admin = bearer("boot")
        _, reader = await make_key(client, admin, "read", "team:acme", descendants=True)
        _, writer = await make_key(client, admin, "write", "team:acme", descendants=True)
        _, scoped = await make_key(client, admin, "admin", "team:acme", descendants=True)
        _, narrow = await make_key(client, admin, "admin", ALICE)  # its own namespace, not its subtree
        body = {"namespace": ALICE, "ttl": "P30D"}
        for key in (reader, writer):
            refused = await client.post("/v1/retention", json=body, headers=key)
            assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
            assert (await client.get("/v1/retention", headers=key)).status_code == 403
        assert (await client.post("/v1/retention", json=body, headers=scoped)).status_code == 200
        assert (await client.post("/v1/retention", json=body, headers=narrow)).status_code == 403
        for route, json_body in (
            ("", {"namespace": "team:other", "ttl": "P1D"}),
            ("", {"namespace": "root", "ttl": "P1D"}),
            ("/hold", {"namespace": "team:other"}),
            ("/release", {"namespace": "root"}),
        ):
            outside = await client.post(f"/v1/retention{route}", json=json_body, headers=scoped)
            assert outside.status_code == 403, route
            assert outside.json()["message"].startswith("forbidden: namespace")
        assert (
            await client.post("/v1/retention/hold", json={"namespace": "team:other"}, headers=admin)
        ).status_code == 200
        seen = (await client.get("/v1/retention", headers=scoped)).json()["policies"]
        assert [p["namespace"] for p in seen] == [ALICE], "not the hold outside its reach"
        everything = (await client.get("/v1/retention", headers=admin)).json()["policies"]
        assert [p["namespace"] for p in everything] == [ALICE, "team:other"]


async def test_the_cli_sets_lists_holds_releases_and_clears(make_client: ClientFactory, database_url: str) -> None:
    settings = {"database_url": database_url, "embedder": "wordllama", "embedding_dim": "256"}
    async with make_client() as client:
        await client.post("/v1/store", json=old("an old note", ALICE))
        made = await asyncio.to_thread(run_engram, "retention", "set", "team:acme", "P30D", **settings)
        assert made.returncode == 0, made.stderr
        assert made.stdout.startswith("team:acme  ttl P30D  since ") and "1 items expired at once" in made.stderr
        assert (await client.post("/v1/list", json={"limit": 10})).json()["items"] == []
        held = await asyncio.to_thread(run_engram, "retention", "hold", ALICE, "--json", **settings)
        assert json.loads(held.stdout)["policy"]["hold"] is True
        assert len((await client.post("/v1/list", json={"limit": 10})).json()["items"]) == 1
        listed = await asyncio.to_thread(run_engram, "retention", "list", "--json", **settings)
        assert [p["namespace"] for p in json.loads(listed.stdout)["policies"]] == ["team:acme", ALICE]
        dry = await asyncio.to_thread(run_engram, "retention", "release", ALICE, "--dry-run", **settings)
        assert dry.returncode == 0 and "dry run: 1 items would expire at once" in dry.stderr
        released = await asyncio.to_thread(run_engram, "retention", "release", ALICE, **settings)
        assert released.returncode == 0 and released.stdout == ""
        cleared = await asyncio.to_thread(run_engram, "retention", "clear", "team:acme", **settings)
        assert cleared.returncode == 0
        again = await asyncio.to_thread(run_engram, "retention", "clear", "team:acme", **settings)
        assert again.returncode == 2 and again.stderr.startswith("engram: not found: no ttl is set at namespace")
        bad = await asyncio.to_thread(run_engram, "retention", "set", "team:acme", "30d", **settings)
        assert bad.returncode == 2 and "is not an iso-8601 duration" in bad.stderr and "Traceback" not in bad.stderr
        assert (await asyncio.to_thread(run_engram, "retention", "list", **settings)).stdout == ""
