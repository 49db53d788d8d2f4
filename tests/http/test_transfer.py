"""``/v1/export`` and ``/v1/import``: a store out as NDJSON and back, line for line."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
import pytest

from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.postgres.engine import PostgresEngine
from app.engine.reference import ReferenceEngine
from tests.support.engines import ClientFactory, app_client, truncate
from tests.support.scratch import run_engram

NDJSON = {"content-type": "application/x-ndjson"}

ITEMS: list[dict[str, Any]] = [
    {"type": "document", "title": "Rust", "body": {"text": "Ownership moves values."}, "meta": {"folder": "/notes"}},
    {
        "type": "conversation",
        "turns": [{"role": "user", "text": "which editor?"}, {"role": "assistant", "text": "vim, always"}],
        "meta": {"namespace": "team:acme/user:alice", "thread_id": "t1", "observed_at": "2024-05-01T10:00:00+02:00"},
    },
    {
        "type": "conversation",
        "turns": [{"role": "user", "text": "and the font?"}],
        "meta": {"namespace": "team:acme/user:alice", "thread_id": "t1"},
    },
    {
        "type": "learning",
        "text": "prefers tabs over spaces",
        "kind": "preference",
        "confidence": 0.8,
        "meta": {"namespace": "team:acme/user:bob", "tags": ["style", "editor"]},
    },
]


def lines(body: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in body.splitlines()]


async def export(client: httpx.AsyncClient, **body: Any) -> bytes:
    response = await client.post("/v1/export", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/x-ndjson"
    return response.content


async def fill(client: httpx.AsyncClient) -> list[str]:
    answer = (await client.post("/v1/store_many", json={"items": ITEMS})).json()
    return [receipt["id"] for receipt in answer["receipts"]]


async def test_an_export_is_every_item_in_the_order_stored_then_its_trailer(make_client: ClientFactory) -> None:
    async with make_client() as client:
        ids = await fill(client)
        dump = await export(client)
        *items, trailer = lines(dump)
        assert [line["id"] for line in items] == ids
        assert items[3]["item"] == {**ITEMS[3], "meta": {**ITEMS[3]["meta"], "source": {"kind": "agent"}}}
        assert items[1]["item"]["meta"]["observed_at"] == "2024-05-01T08:00:00Z"
        assert "vector" not in items[0]
        body_lines = dump.splitlines(keepends=True)[:-1]
        assert trailer == {"trailer": {"count": 4, "sha256": hashlib.sha256(b"".join(body_lines)).hexdigest()}}
        below = {"reach": {"at": "team:acme", "inherit": False, "descendants": True}}
        filtered = lines(await export(client, filter=below))
        assert [line["id"] for line in filtered[:-1]] == ids[1:]


async def test_a_round_trip_keeps_ids_texts_vectors_and_answers(
    make_client: ClientFactory, pg_engine: PostgresEngine
) -> None:
    question = {"query": "which editor and font", "mode": "hybrid", "limit": 10}
    async with make_client() as client:
        ids = await fill(client)
        dump = await export(client, include_vectors=True)
        before = (await client.post("/v1/fetch", json=question)).json()
        got_before = (await client.post("/v1/get", json={"ids": ids})).json()
        assert all(len(line["vector"]) == 256 for line in lines(dump)[:-1])
        await truncate(pg_engine)
        importing = datetime.now(UTC)
        report = (await client.post("/v1/import", content=dump, headers=NDJSON)).json()
        assert report == {"stored": 4, "replayed": 0, "rejected": [], "trailer": "verified"}
        got_after = (await client.post("/v1/get", json={"ids": ids})).json()
        # The same items; an import stores them anew, so each answers the import's time as its stored_at.
        assert all(datetime.fromisoformat(hit.pop("stored_at")) >= importing for hit in got_after["hits"])
        assert got_after == {"hits": [{k: v for k, v in hit.items() if k != "stored_at"} for hit in got_before["hits"]]}
        after = (await client.post("/v1/fetch", json=question)).json()
        assert [(h["id"], round(h["score"], 5)) for h in after["hits"]] == [
            (h["id"], round(h["score"], 5)) for h in before["hits"]
        ]
        # Again: every line a replay, nothing written twice.
        again = (await client.post("/v1/import", content=dump, headers=NDJSON)).json()
        assert again == {"stored": 0, "replayed": 4, "rejected": [], "trailer": "verified"}
        assert lines(await export(client, include_vectors=True)) == lines(dump)


async def test_into_another_engine(make_client: ClientFactory, embedder: WordLlamaEmbedder) -> None:
    """Export from PostgreSQL, import into the reference engine: the same ids and items."""
    async with make_client() as client:
        ids = await fill(client)
        dump = await export(client)

    async with app_client(ReferenceEngine(embedder)) as other:
        report = (await other.post("/v1/import", content=dump, headers=NDJSON)).json()
        assert report["stored"] == 4 and report["trailer"] == "verified"
        assert lines(await export(other))[:-1] == lines(dump)[:-1], "the same items, in the same order"
        assert [h["id"] for h in (await other.post("/v1/get", json={"ids": ids})).json()["hits"]] == ids


async def test_a_given_vector_of_this_embedder_is_kept_and_another_models_is_remade(
    make_client: ClientFactory, pg_engine: PostgresEngine, embedder: WordLlamaEmbedder
) -> None:
    async with make_client() as client:
        await fill(client)
        dump_before = await export(client, include_vectors=True)
        items = lines(dump_before)[:-1]
        await truncate(pg_engine)
        mine = [1.0] + [0.0] * 255  # not what the embedder would make of the text
        items[0]["vector"] = mine
        items[1]["embedder"] = "another-model"
        items[1]["vector"] = [0.0] * 255 + [1.0]
        dump = b"".join(orjson.dumps(line) + b"\n" for line in items)
        report = (await client.post("/v1/import", content=dump, headers=NDJSON)).json()
        assert report["stored"] == 4 and report["trailer"] == "missing"
        exported = lines(await export(client, include_vectors=True))[:-1]
        assert exported[0]["vector"] == mine
        assert exported[1]["vector"] != items[1]["vector"], "another model's vector is made again"
        assert exported[1]["vector"] == lines(dump_before)[1]["vector"], "as the embedder made it the first time"


async def test_bad_lines_are_reported_by_number_and_the_rest_imported(
    make_client: ClientFactory, pg_engine: PostgresEngine
) -> None:
    async with make_client() as client:
        await fill(client)
        dump = (await export(client)).splitlines(keepends=True)
        await truncate(pg_engine)
        changed = orjson.loads(dump[1])
        changed["item"]["turns"][0]["text"] = "which editor, really?"  # the id no longer fits
        blank = {"item": {"type": "learning", "text": " \u200b", "kind": "fact", "confidence": 0.5}}
        body = b"".join(
            [
                dump[0],
                b"{not json\n",
                orjson.dumps(changed) + b"\n",
                orjson.dumps(blank) + b"\n",
                b"\n",
                orjson.dumps({"item": {"type": "learning", "text": "x", "kind": "fact", "confidence": 2}}) + b"\n",
                dump[2],
                dump[3],
                dump[4],  # the trailer: it counted four lines, two of them are not these
            ]
        )
        report = (await client.post("/v1/import", content=body, headers=NDJSON)).json()
        assert report["stored"] == 3 and report["trailer"] == "mismatch"
        rejected = {r["line"]: r["message"] for r in report["rejected"]}
        assert list(rejected) == [2, 3, 4, 6]
        assert rejected[2] == "invalid request: the line is not valid json"
        assert rejected[3] == "invalid request: id is not the item's fingerprint: the line was changed"
        assert "blank" in rejected[4] and "confidence" in rejected[6]
        assert all(r["code"] == "invalid_request" for r in report["rejected"])


async def test_a_cut_dump_has_no_trailer(make_client: ClientFactory, pg_engine: PostgresEngine) -> None:
    async with make_client() as client:
        await fill(client)
        dump = (await export(client)).splitlines(keepends=True)
        await truncate(pg_engine)
        report = (await client.post("/v1/import", content=b"".join(dump[:2]), headers=NDJSON)).json()
        assert report["trailer"] == "missing" and report["stored"] == 2


@pytest.mark.parametrize("body", [b"", b"  \n"])
async def test_an_empty_import_is_refused(make_client: ClientFactory, body: bytes) -> None:
    async with make_client() as client:
        response = await client.post("/v1/import", content=body, headers=NDJSON)
        assert response.status_code in (400, 422) and response.json()["code"] == "invalid_request"


async def test_keys_export_and_import_within_their_reach(make_client: ClientFactory) -> None:
    admin = {"authorization": "Bearer boot"}
    async with make_client(api_keys="boot") as client:
        client.headers.update(admin)
        ids = await fill(client)
        dump = await export(client)
        made = await client.post(
            "/v1/keys",
            json={"name": "alice", "role": "write", "reach": {"at": "team:acme/user:alice", "inherit": False}},
        )
        alice = {"authorization": f"Bearer {made.json()['secret']}"}
        hers = lines((await client.post("/v1/export", json={}, headers=alice)).content)
        assert [line["id"] for line in hers[:-1]] == ids[1:3]
        report = (await client.post("/v1/import", content=dump, headers={**NDJSON, **alice})).json()
        assert report["replayed"] == 2 and [(r["line"], r["code"]) for r in report["rejected"]] == [
            (1, "forbidden"),
            (4, "forbidden"),
        ]


async def test_the_cli_exports_and_imports(
    make_client: ClientFactory, pg_engine: PostgresEngine, database_url: str, tmp_path: Any
) -> None:
    """``engram export`` then ``engram import`` into the emptied database: the same items; a bad line is named."""
    settings = {"database_url": database_url, "embedder": "wordllama", "embedding_dim": "256"}
    async with make_client() as client:
        ids = await fill(client)
        dump = tmp_path / "dump.ndjson"
        exported = await asyncio.to_thread(run_engram, "export", "--include-vectors", "--out", str(dump), **settings)
        assert exported.returncode == 0, exported.stderr
        assert "engram: exported 4 items" in exported.stderr
        assert lines(dump.read_bytes())[:-1] == lines(await export(client, include_vectors=True))[:-1]
        await truncate(pg_engine)
        imported = await asyncio.to_thread(run_engram, "import", str(dump), **settings)
        assert imported.returncode == 0, imported.stderr
        assert "engram: 4 items stored, 0 already held, 0 lines refused; trailer verified" in imported.stderr
        assert [h["id"] for h in (await client.post("/v1/get", json={"ids": ids})).json()["hits"]] == ids
        dump.write_bytes(dump.read_bytes().replace(b'"confidence":0.8', b'"confidence":8', 1))
        again = await asyncio.to_thread(run_engram, "import", str(dump), **settings)
        assert again.returncode == 1
        assert "engram: line 4: invalid request: item: confidence must be a number in 0..1" in again.stderr
        assert "trailer mismatch" in again.stderr
        bad = await asyncio.to_thread(run_engram, "export", "--filter", "{nope", **settings)
        assert bad.returncode == 2 and "engram: invalid request: --filter is not valid json" in bad.stderr
