"""``engram import --from langgraph``: the rows of a real LangGraph PostgresStore, filled by the
``langgraph`` package on the embedded PostgreSQL, become documents (app/importers/langgraph.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.store.postgres.aio import AsyncPostgresStore

from app.importers.langgraph import document
from tests.support.engines import ClientFactory
from tests.support.scratch import run_engram

ROWS = [
    (("users", "alice", "memories"), "m1", {"content": "alice drinks green tea"}),
    (("users", "alice", "memories"), "m2", {"text": "alice writes in vim"}),
    (("users", "bob"), "profile", {"name": "Bob", "langs": ["rust", "go"]}),
]


def test_a_row_becomes_a_document() -> None:
    made = document("users.bob", "profile", {"name": "Bob", "langs": ["go"]}, None, "team:acme")
    assert made == {
        "type": "document",
        "title": "profile",
        "body": {"text": '{"langs":["go"],"name":"Bob"}'},
        "mime": "application/json",
        "meta": {
            "folder": "/users/bob",
            "source": {"kind": "import", "id": "langgraph:users.bob/profile"},
            "namespace": "team:acme",
        },
    }


async def test_a_langgraph_store_imports_and_a_rerun_replays(make_client: ClientFactory, database_url: str) -> None:
    async with AsyncPostgresStore.from_conn_string(database_url) as store:
        await store.setup()
        for namespace, key, value in ROWS:
            await store.aput(namespace, key, value)
    settings = {"database_url": database_url, "embedder": "wordllama", "embedding_dim": "256"}
    args = ("import", "--from", "langgraph", "--dsn", database_url, "--namespace", "team:acme")
    async with make_client() as client:
        first = await asyncio.to_thread(run_engram, *args, **settings)
        assert first.returncode == 0, first.stderr
        assert "engram: 3 items stored, 0 already held, 0 lines refused" in first.stderr
        items = (await client.post("/v1/list", json={"limit": 10, "filter": {"folder": "/users/alice"}})).json()[
            "items"
        ]
        texts = sorted(hit["text"] for hit in items)
        assert texts == ["# m1\n\nalice drinks green tea", "# m2\n\nalice writes in vim"]
        assert all(hit["meta"]["namespace"] == "team:acme" and hit["meta"]["observed_at"] for hit in items)
        found: Any = (await client.post("/v1/fetch", json={"query": "rust", "mode": "keyword", "limit": 5})).json()[
            "hits"
        ]
        assert [hit["meta"]["source"]["id"] for hit in found] == ["langgraph:users.bob/profile"]
        again = await asyncio.to_thread(run_engram, *args, **settings)
        assert "engram: 0 items stored, 3 already held, 0 lines refused" in again.stderr
        wrong = await asyncio.to_thread(run_engram, "import", "--from", "langgraph", "some.ndjson", **settings)
        assert wrong.returncode == 2 and "--from langgraph reads the store at --dsn URL" in wrong.stderr
