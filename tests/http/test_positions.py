"""``Engram-Position`` over the wire: writes answer it, reads honour it, a bad one is refused.

The replica cases run the app on a primary and its real streaming replica (tests/support/replica.py),
the replica's replay paused so that it lags: a read without the header does not see the write, a
read with it does.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from app.api import positions
from app.embeddings.wordllama import WordLlamaEmbedder
from app.settings import Settings
from tests.support.engines import ClientFactory, app_client, truncate
from tests.support.replica import Primary, Replica, catch_up, connect_reading_replica

POSITION = re.compile(r"^[0-9A-F]{1,8}/[0-9A-F]{1,8}$")


def learning(text: str, **meta: Any) -> dict[str, Any]:
    return {"type": "learning", "text": text, "kind": "fact", "confidence": 0.5, "meta": meta}


@pytest.mark.parametrize("value", ["nonsense", "0/ZZ", "1/2/3", "123456789/0", "-1/0", "0/1, later"])
async def test_a_position_that_is_not_one_is_refused_and_changes_nothing(client: httpx.AsyncClient, value: str) -> None:
    for path, body in (("/v1/store", learning("never stored")), ("/v1/list", {"limit": 10})):
        response = await client.post(path, json=body, headers={positions.HEADER: value})
        assert response.status_code == 400, response.text
        envelope = response.json()
        assert envelope["code"] == "invalid_request" and "Engram-Position" in envelope["message"]
        assert envelope["request_id"] == response.headers["x-request-id"]
    assert (await client.post("/v1/list", json={"limit": 10})).json()["items"] == []
    health = await client.get("/v1/health", headers={positions.HEADER: value})
    assert health.status_code == 200 and health.json() == {"state": "ok"}, "a probe never answers an envelope"


async def test_without_a_replica_a_position_is_accepted_and_none_is_answered(client: httpx.AsyncClient) -> None:
    stored = await client.post("/v1/store", json=learning("one server sees it all"))
    assert stored.status_code == 201 and positions.HEADER not in stored.headers
    got = await client.post("/v1/get", json={"ids": [stored.json()["id"]]}, headers={positions.HEADER: "0/1, 0/2"})
    assert [hit["id"] for hit in got.json()["hits"]] == [stored.json()["id"]]


async def test_the_document_says_which_operations_answer_and_which_honour_it(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    operations = {op["operationId"]: op for ops in document["paths"].values() for op in ops.values()}
    parameter = {"$ref": "#/components/parameters/EngramPosition"}
    header = {"$ref": "#/components/headers/EngramPosition"}
    honouring = {name for name, op in operations.items() if parameter in op.get("parameters", [])}
    answering = {
        name
        for name, op in operations.items()
        if any(header == r.get("headers", {}).get(positions.HEADER) for s, r in op["responses"].items() if s[0] == "2")
    }
    assert honouring == {"fetch", "recall", "list", "get", "explore", "export_items"}
    assert answering == {"store", "store_many", "forget", "forget_within", "restore", "import_items"} | {
        f"{change}_retention" for change in ("set", "clear", "hold", "release")
    }
    assert document["components"]["parameters"]["EngramPosition"]["in"] == "header"


@pytest.fixture
def replicated_client(primary: Primary, replica: Replica, embedder: WordLlamaEmbedder) -> ClientFactory:
    """``async with replicated_client() as client``: the app reading from the replica (a short wait)."""

    @asynccontextmanager
    async def factory(**overrides: Any) -> AsyncIterator[httpx.AsyncClient]:
        engine = await connect_reading_replica(primary, replica, embedder, wait_ms=200)
        await truncate(engine)
        catch_up(primary, replica)
        async with app_client(engine, Settings(**overrides)) as client:
            yield client

    return factory


async def test_a_write_answers_its_position_and_a_read_that_presents_it_sees_the_write(
    replicated_client: ClientFactory, replica: Replica
) -> None:
    async with replicated_client() as client:
        with replica.paused():
            stored = await client.post("/v1/store", json=learning("the orchard blooms in april", tags=["spring"]))
            assert stored.status_code == 201
            position = stored.headers[positions.HEADER]
            assert POSITION.match(position), position
            ids = [stored.json()["id"]]
            bodies = {
                "/v1/get": {"ids": ids},
                "/v1/list": {"limit": 10},
                "/v1/fetch": {"query": "orchard april", "mode": "keyword", "limit": 10},
            }
            for path, body in bodies.items():
                stale = (await client.post(path, json=body)).json()
                fresh = (await client.post(path, json=body, headers={positions.HEADER: position})).json()
                key = "items" if path == "/v1/list" else "hits"
                assert [h["id"] for h in stale[key]] == [], f"{path}: the lagging replica answered as it is"
                assert [h["id"] for h in fresh[key]] == ids, f"{path}: the position was honoured"
            explored = {"facet": "tag", "limit": 10}
            fresh = await client.post("/v1/explore", json=explored, headers={positions.HEADER: position})
            assert fresh.json()["total"] == 1


async def test_every_write_route_answers_a_position(replicated_client: ClientFactory) -> None:
    async with replicated_client() as client:
        answered: dict[str, str] = {}

        async def post(path: str, **request: Any) -> httpx.Response:
            response = await client.post(path, **request)
            assert response.status_code in (200, 201), response.text
            answered[path] = response.headers.get(positions.HEADER, "")
            return response

        first = (await post("/v1/store", json=learning("first"))).json()["id"]
        many = [
            r["id"]
            for r in (await post("/v1/store_many", json={"items": [learning("a"), learning("b")]})).json()["receipts"]
        ]
        receipt = (await post("/v1/forget", json={"ids": [first]})).json()["receipt"]
        await post("/v1/restore", json={"receipt": receipt})
        await post("/v1/forget_within", json={"ids": many[:1], "reach": {"at": "root"}})
        exported = (await client.post("/v1/export", json={})).content
        imported = await post("/v1/import", content=exported, headers={"content-type": "application/x-ndjson"})
        assert imported.json()["replayed"] == 2  # a replay writes nothing, yet is a write to see
        for change, body in (
            ("", {"namespace": "team:x", "ttl": "P1D"}),
            ("/hold", {"namespace": "team:x"}),
            ("/release", {"namespace": "team:x"}),
            ("/clear", {"namespace": "team:x"}),
        ):
            await post(f"/v1/retention{change}", json=body)
        assert set(answered) == {
            f"/v1/{name}" for name in ("store", "store_many", "forget", "restore", "forget_within", "import")
        } | {f"/v1/retention{change}" for change in ("", "/hold", "/release", "/clear")}
        assert {p: v for p, v in answered.items() if not POSITION.match(v)} == {}


async def test_a_policy_change_reaches_a_lagging_replica_with_its_position(
    replicated_client: ClientFactory, primary: Primary, replica: Replica
) -> None:
    async with replicated_client() as client:
        old = learning("the ferry timetable of last spring", namespace="team:x", observed_at="2020-04-01T08:00:00Z")
        stored = await client.post("/v1/store", json=old)
        catch_up(primary, replica)
        ids = [stored.json()["id"]]
        with replica.paused():
            changed = await client.post("/v1/retention", json={"namespace": "team:x", "ttl": "P30D"})
            assert changed.json()["expired"] == 1
            position = changed.headers[positions.HEADER]
            stale = (await client.post("/v1/get", json={"ids": ids})).json()["hits"]
            fresh = (await client.post("/v1/get", json={"ids": ids}, headers={positions.HEADER: position})).json()
            assert [h["id"] for h in stale] == ids, "the lagging replica has not replayed the change"
            assert fresh["hits"] == [], "the position was honoured: expired"


async def test_browsers_may_send_and_read_the_position(replicated_client: ClientFactory) -> None:
    origin = "https://app.example"
    async with replicated_client(cors_origins=origin) as client:
        preflight = await client.options(
            "/v1/get",
            headers={
                "origin": origin,
                "access-control-request-method": "POST",
                "access-control-request-headers": "engram-position",
            },
        )
        assert preflight.status_code == 200
        assert "engram-position" in preflight.headers["access-control-allow-headers"].lower()
        stored = await client.post("/v1/store", json=learning("from a browser"), headers={"origin": origin})
        assert positions.HEADER.lower() in stored.headers["access-control-expose-headers"].lower()
        assert POSITION.match(stored.headers[positions.HEADER])
