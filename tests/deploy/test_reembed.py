"""Switching the embedder of a database that holds items: refused at start, done by `engram reembed`."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator

import asyncpg
import numpy as np
import pytest

from app.contract.errors import ConfigError
from app.contract.items import ITEM_ADAPTER, StoredItem
from app.contract.requests import FetchRequest, ListRequest
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.postgres import schema
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.reembed import _reembed, reembed
from app.main import create_app
from app.settings import Settings
from tests.support.processes import free_port
from tests.support.scratch import SKETCHES_OFF, ScratchServer, learnings, run_engram, scratch_server

REFUSED_128 = (
    "configuration error: the database holds vectors of wordllama-l2-supercat-256 but the configured embedder "
    "is wordllama-l2-supercat-128: run `engram reembed` to switch"
)


@pytest.fixture(scope="module")
def scratch() -> Iterator[ScratchServer]:
    with scratch_server() as server:
        yield server


@pytest.fixture(scope="module")
def embedder_128() -> WordLlamaEmbedder:
    return WordLlamaEmbedder(128)


async def _database_with(scratch: ScratchServer, items: list[StoredItem], embedder: WordLlamaEmbedder) -> str:
    """A migrated database (256 dimensions) holding ``items``, claimed by ``embedder``."""
    url = scratch.new_database()
    await asyncio.to_thread(schema.upgrade, url, embedding_dim=256, text_search_config="english")
    engine = await PostgresEngine.connect(url, embedder)
    try:
        if items:
            await engine.store_many(items)
    finally:
        await engine.close()
    return url


WITH_A_VECTOR = (
    "SELECT count(*) FROM engram_items i WHERE EXISTS (SELECT 1 FROM engram_embeddings e WHERE e.item_id = i.id) "
    "OR EXISTS (SELECT 1 FROM engram_vector_backlog b WHERE b.item_id = i.id)"
)


async def _query(url: str, sql: str) -> list[tuple[object, ...]]:
    connection = await asyncpg.connect(schema.driver_url(url))
    try:
        return [tuple(row) for row in await connection.fetch(sql)]
    finally:
        await connection.close()


async def _vector_layout(url: str) -> tuple[object, object, object]:
    """(column type, the index's half-precision cast, settings) of the embeddings table."""
    [(column,)] = await _query(
        url,
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'engram_embeddings'::regclass AND attname = 'embedding'",
    )
    [(index,)] = await _query(url, "SELECT indexdef FROM pg_indexes WHERE indexname = 'engram_embeddings_hnsw'")
    settings = dict(await _query(url, "SELECT key, value FROM engram_settings WHERE key <> 'cursor_secret'"))
    cast = re.search(r"USING hnsw \(\(\(embedding\)::(halfvec\(\d+\))\) halfvec_cosine_ops\)", str(index))
    return column, cast and cast.group(1), settings


async def _nearest(engine: PostgresEngine, item: StoredItem) -> str:
    page = await engine.fetch(FetchRequest(query=item.render_text(), mode="vector", limit=1))
    return page.hits[0].id


async def test_changing_the_embedder_is_refused_at_start(scratch: ScratchServer, embedder: WordLlamaEmbedder) -> None:
    url = await _database_with(scratch, learnings(3), embedder)
    app = create_app(Settings(database_url=url, embedder="wordllama", embedding_dim=128))
    with pytest.raises(ConfigError) as caught:
        async with app.router.lifespan_context(app):
            pass
    assert caught.value.message == REFUSED_128

    served = run_engram(
        "serve", "--port", str(free_port()), database_url=url, embedder="wordllama", embedding_dim="128", timeout=120
    )
    assert served.returncode == 2
    assert served.stderr.strip().splitlines()[-1] == f"engram: {REFUSED_128}"
    assert "Traceback" not in served.stderr + served.stdout


async def test_a_refused_start_leaves_the_database_as_it_was(
    scratch: ScratchServer, embedder: WordLlamaEmbedder, embedder_128: WordLlamaEmbedder
) -> None:
    """A database migrated but never served is not claimed by an embedder that was refused."""
    url = scratch.new_database()
    await asyncio.to_thread(schema.upgrade, url, embedding_dim=256, text_search_config="english")
    with pytest.raises(ConfigError, match="256-dimensional vectors but the embedder gives 128"):
        await PostgresEngine.connect(url, embedder_128)
    engine = await PostgresEngine.connect(url, embedder)
    await engine.close()


async def test_reembed_switches_the_dimension_end_to_end(
    scratch: ScratchServer, embedder: WordLlamaEmbedder, embedder_128: WordLlamaEmbedder
) -> None:
    items = learnings(30, tags=["moved"])  # each sketch filed once, under its tag
    ids = [item.fingerprint() for item in items]
    url = await _database_with(scratch, items, embedder)
    assert await _vector_layout(url) == (
        "vector(256)",
        "halfvec(256)",
        {"embedder": "wordllama-l2-supercat-256", "embedding_dim": "256", "text_search_config": "english"},
    )

    result = run_engram("reembed", "--batch-size", "7", database_url=url, embedder="wordllama", embedding_dim="128")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "engram: re-embedded 30 items with wordllama-l2-supercat-128 (128 dimensions)"
    assert "re-embedding" in result.stderr and "30/30" in result.stderr  # the progress bar, on stderr
    assert await _vector_layout(url) == (
        "vector(128)",
        "halfvec(128)",
        {"embedder": "wordllama-l2-supercat-128", "embedding_dim": "128", "text_search_config": "english"},
    )
    assert await _query(url, "SELECT model, count(*) FROM engram_embeddings GROUP BY model") == [
        ("wordllama-l2-supercat-128", 30)
    ]
    # Each item's sketch follows its new vector, at the new dimension.
    assert await _query(url, SKETCHES_OFF) == [(0,)]
    assert await _query(url, "SELECT count(*), length(sketch) FROM engram_sketch_postings GROUP BY 2") == [(30, 128)]

    # The service now starts with the new embedder, and finds every item by its meaning.
    engine = await PostgresEngine.connect(url, embedder_128)
    try:
        assert [hit.id for hit in (await engine.list(ListRequest(limit=100))).items] == ids
        for item in items[:: len(items) // 6]:
            assert await _nearest(engine, item) == item.fingerprint()
        [fresh] = learnings(1, topic="after the switch")
        await engine.store(fresh)
        assert await _nearest(engine, fresh) == fresh.fingerprint()
    finally:
        await engine.close()
    with pytest.raises(ConfigError, match="run `engram reembed`"):
        await PostgresEngine.connect(url, embedder)

    # And back again, in process, in batches smaller than the data.
    assert await reembed(Settings(database_url=url, embedder="wordllama", embedding_dim=256), batch_size=4) == 0
    assert await _query(url, SKETCHES_OFF) == [(0,)]
    engine = await PostgresEngine.connect(url, embedder)
    try:
        assert len((await engine.list(ListRequest(limit=100))).items) == 31
        assert await _nearest(engine, items[3]) == ids[3]
    finally:
        await engine.close()


class _FailsOnSecondBatch:
    """A real embedder that breaks half way, as a crash or a full disk would."""

    def __init__(self, inner: WordLlamaEmbedder) -> None:
        self._inner, self._calls = inner, 0
        self.name, self.dimension = inner.name, inner.dimension

    async def embed(self, texts: list[str]) -> np.ndarray:
        self._calls += 1
        if self._calls == 2:
            raise RuntimeError("embedder broke")
        return await self._inner.embed(texts)


async def test_a_failed_reembed_leaves_the_old_vectors_in_place(
    scratch: ScratchServer, embedder: WordLlamaEmbedder, embedder_128: WordLlamaEmbedder
) -> None:
    items = learnings(12)
    url = await _database_with(scratch, items, embedder)
    before = await _vector_layout(url)
    connection = await asyncpg.connect(schema.driver_url(url))
    try:
        with pytest.raises(RuntimeError, match="embedder broke"):
            await _reembed(connection, _FailsOnSecondBatch(embedder_128), batch_size=5)
    finally:
        await connection.close()
    assert await _vector_layout(url) == before
    engine = await PostgresEngine.connect(url, embedder)
    try:
        assert await _nearest(engine, items[7]) == items[7].fingerprint()
    finally:
        await engine.close()


async def test_reembed_of_an_empty_database(scratch: ScratchServer) -> None:
    url = await _database_with(scratch, [], WordLlamaEmbedder(256))
    assert await reembed(Settings(database_url=url, embedder="wordllama", embedding_dim=64), batch_size=10) == 0
    column, indexed, settings = await _vector_layout(url)
    assert (column, indexed, settings["embedding_dim"]) == ("vector(64)", "halfvec(64)", "64")
    engine = await PostgresEngine.connect(url, WordLlamaEmbedder(64))
    await engine.close()


async def test_reembed_refuses_a_schema_that_is_behind(scratch: ScratchServer) -> None:
    url = scratch.new_database()
    with pytest.raises(ConfigError, match="run `engram migrate`"):
        await reembed(Settings(database_url=url), batch_size=10)


def test_reembed_refuses_a_batch_size_below_one(scratch: ScratchServer) -> None:
    result = run_engram("reembed", "--batch-size", "0", database_url=scratch.new_database(), timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == "engram: configuration error: batch size must be at least 1"


async def test_reembed_with_another_model_waits_for_the_service_to_stop(
    scratch: ScratchServer, embedder: WordLlamaEmbedder
) -> None:
    """Under a running service another model left it searching and storing with the old one:
    vector fetches found nothing and stores failed, while health said ok."""
    items = learnings(5)
    url = await _database_with(scratch, items, embedder)
    engine = await PostgresEngine.connect(url, embedder)
    try:
        await engine.list(ListRequest(limit=1))  # a pooled session is open, as in a service that served
        with pytest.raises(ConfigError, match="stop it before re-embedding"):
            await reembed(Settings(database_url=url, embedder="wordllama", embedding_dim=128), batch_size=10)
        # Nothing changed: every item keeps its vector, indexed or still in the backlog the service's
        # indexer empties beside this test.
        assert await _query(url, WITH_A_VECTOR) == [(5,)]
        # The same model rebuilds its vectors beside the service.
        assert await reembed(Settings(database_url=url, embedder="wordllama", embedding_dim=256), batch_size=10) == 0
    finally:
        await engine.close()
    assert await reembed(Settings(database_url=url, embedder="wordllama", embedding_dim=128), batch_size=10) == 0


async def test_reembed_embeds_a_thread_as_its_writes_did(scratch: ScratchServer, embedder: WordLlamaEmbedder) -> None:
    """Items of a thread are embedded after the items before them; re-embedding, in batches that cut
    the threads anywhere, gives each the vector its write gave it."""

    def turn(n: int, thread: str) -> StoredItem:
        body = {"type": "conversation", "turns": [{"role": "user", "text": f"{thread} turn {n} about topic {n % 3}"}]}
        meta = {"thread_id": thread, "namespace": "user:ana"}
        return ITEM_ADAPTER.validate_python({**body, "meta": meta})

    items = [turn(n, thread) for n in range(7) for thread in ("t1", "t2")]
    url = await _database_with(scratch, items, embedder)
    vectors = "SELECT i.id, e.embedding::text FROM engram_items i JOIN engram_embeddings e ON e.item_id = i.id"
    engine = await PostgresEngine.connect(url, embedder)
    try:
        await engine.finish_indexing()
    finally:
        await engine.close()
    written = dict(await _query(url, vectors))
    assert len(written) == len(items)
    assert await reembed(Settings(database_url=url, embedder="wordllama", embedding_dim=256), batch_size=3) == 0
    again = dict(await _query(url, vectors))
    assert again.keys() == written.keys()
    for item_id, vector in written.items():
        assert np.allclose(json.loads(str(again[item_id])), json.loads(str(vector)), atol=1e-6), item_id
