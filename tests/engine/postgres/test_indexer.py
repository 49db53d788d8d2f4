"""Vectors are indexed after their write is acknowledged, and nothing waits to be found meanwhile.

A write queues its vectors in ``engram_vector_backlog``; the indexer moves them into
``engram_embeddings`` and its HNSW index (app/engine/postgres/indexer.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest

from app.contract.meta import Filter
from app.contract.requests import FetchRequest, ForgetByIds
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.indexer import Share, VectorIndexer, index_backlog, rebuild_index
from app.engine.postgres.options import EngineOptions, HNSWOptions, IndexerOptions
from tests.engine.postgres.support import count_rows, failing_insert, learning
from tests.support.engines import truncate


async def quiet_engine(
    database_url: str, embedder: Any, backlog_limit: int, *, indexer: IndexerOptions | None = None
) -> AsyncIterator[PostgresEngine]:
    """An engine without a background indexer, on an empty store, and no other engine's indexer about
    (not the ``pg_engine`` fixture's): what is queued stays queued until a test or a write moves it."""
    indexer = indexer or IndexerOptions(backlog_limit=backlog_limit, background=False)
    engine = await PostgresEngine.connect(database_url, embedder, options=EngineOptions(indexer=indexer))
    await truncate(engine)
    yield engine
    await engine.close()


@pytest.fixture
async def unindexed(database_url: str, embedder: Any) -> AsyncIterator[PostgresEngine]:
    """Writes stay queued: no background indexer, no backlog limit within reach."""
    async for engine in quiet_engine(database_url, embedder, 10_000):
        yield engine


@pytest.fixture
async def limited(database_url: str, embedder: Any) -> AsyncIterator[PostgresEngine]:
    """No background indexer; a write leaving more than 150 queued indexes until it does not."""
    async for engine in quiet_engine(database_url, embedder, 150):
        yield engine


async def indexed_count(engine: PostgresEngine) -> int:
    async with engine.connection() as connection:
        return int(await connection.fetchval("SELECT count(*) FROM engram_embeddings") or 0)


async def where_vectors_are(engine: PostgresEngine) -> tuple[set[str], int]:
    """The ids still queued and how many are indexed, read in one snapshot."""
    async with engine.connection() as connection:
        row = await connection.fetchrow(
            "SELECT (SELECT array_agg(item_id) FROM engram_vector_backlog), (SELECT count(*) FROM engram_embeddings)"
        )
    return set(row[0] or []), int(row[1])


async def until_indexed(engine: PostgresEngine, within_s: float = 20.0) -> None:
    """Wait for the background indexer to empty the backlog."""
    for _ in range(int(within_s / 0.05)):
        if not await engine.vector_backlog():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the backlog did not empty within {within_s} s")


async def pages(engine: PostgresEngine, queries: list[str], **request: Any) -> list[list[str]]:
    return [[h.id for h in (await engine.fetch(FetchRequest(query=q, **request))).hits] for q in queries]


async def test_a_vector_waiting_for_the_index_is_found_and_ranked_as_once_indexed(unindexed: PostgresEngine) -> None:
    items = [learning(f"queued note {n} about {topic}", tags=[topic]) for n, topic in enumerate(["tea", "rust"] * 15)]
    await unindexed.store_many(items[:20])
    await unindexed.finish_indexing()
    await unindexed.store_many(items[20:])  # these ten wait; the first twenty are in the index
    assert await unindexed.vector_backlog() == 10
    queries = [item.render_text() for item in items]
    waiting = {mode: await pages(unindexed, queries, mode=mode, limit=5) for mode in ("vector", "hybrid", "keyword")}
    tagged = await pages(unindexed, queries, mode="vector", limit=5, filter=Filter(tags_any=["rust"]))
    for item, page in zip(items, waiting["vector"], strict=True):
        assert page[0] == item.fingerprint()

    await unindexed.finish_indexing()
    assert await unindexed.vector_backlog() == 0
    assert await indexed_count(unindexed) == 30
    for mode, before in waiting.items():
        assert await pages(unindexed, queries, mode=mode, limit=5) == before, mode
    assert await pages(unindexed, queries, mode="vector", limit=5, filter=Filter(tags_any=["rust"])) == tagged


async def test_a_write_past_the_backlog_limit_indexes_until_it_is_within(limited: PostgresEngine) -> None:
    backlog = []
    for batch in range(4):
        await limited.store_many([learning(f"batch {batch} note {n}") for n in range(100)])
        backlog.append(await limited.vector_backlog())
    # 100 waiting is within the limit; 200 is not, and the write moves the oldest 100.
    assert backlog == [100, 100, 100, 100]
    assert await indexed_count(limited) == 300
    assert await count_rows(limited) == (400, 400)


async def test_a_write_past_the_limit_indexes_beside_an_indexer_holding_the_oldest(limited: PostgresEngine) -> None:
    """Another indexer mid-step holds the oldest queued rows: the write takes the next ones, not none."""
    first = [learning(f"held note {n}") for n in range(100)]
    second = [learning(f"later note {n}") for n in range(100)]
    await limited.store_many(first)
    async with limited.connection() as holder, holder.transaction():
        await holder.execute("SELECT 1 FROM engram_vector_backlog ORDER BY queued FOR UPDATE")
        await limited.store_many(second)
        assert await limited.vector_backlog() == 100
    async with limited.connection() as connection:
        indexed = {row["item_id"] for row in await connection.fetch("SELECT item_id FROM engram_embeddings")}
    assert indexed == {item.fingerprint() for item in second}


async def test_a_move_commits_without_waiting_for_its_flush_and_leaves_its_connection_as_it_was(
    unindexed: PostgresEngine,
) -> None:
    """A step of the indexer is not made durable as it commits (a crash undoes it whole and its vectors
    are moved again), and only that step: the connection goes back to the pool, to writers, as it came."""
    await unindexed.store_many([learning(f"flushed later {n}") for n in range(30)])
    async with unindexed.connection() as raw:
        before = await raw.fetchval("SHOW synchronous_commit")
        async with raw.transaction():  # the step's transaction is a savepoint of this one, its settings kept
            assert await index_backlog(raw) == 30
            assert await raw.fetchval("SHOW synchronous_commit") == "off"
        assert before == "on"
        assert await raw.fetchval("SHOW synchronous_commit") == before
    assert await unindexed.vector_backlog() == 0
    assert await indexed_count(unindexed) == 30


async def test_the_indexer_takes_up_what_an_earlier_process_left_queued(
    unindexed: PostgresEngine, database_url: str, embedder: Any
) -> None:
    await unindexed.store_many([learning(f"left over {n}") for n in range(30)])
    assert await unindexed.vector_backlog() == 30
    engine = await PostgresEngine.connect(database_url, embedder)
    try:
        await until_indexed(engine)
        assert await indexed_count(engine) == 30
    finally:
        await engine.close()


async def test_a_write_wakes_the_background_indexer(pg_engine: PostgresEngine) -> None:
    await pg_engine.store_many([learning(f"indexed soon {n}") for n in range(50)])
    await until_indexed(pg_engine)
    assert await indexed_count(pg_engine) == 50


class ObservedConnection:
    """A pooled connection that shows ``observe`` each ``fetch`` and ``fetchval`` statement with its answer."""

    def __init__(self, connection: Any, observe: Callable[[str, Any], None]) -> None:
        self._connection = connection
        self._observe = observe

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    async def fetch(self, sql: str, *args: Any) -> Any:
        rows = await self._connection.fetch(sql, *args)
        self._observe(sql, rows)
        return rows

    async def fetchval(self, sql: str, *args: Any) -> Any:
        value = await self._connection.fetchval(sql, *args)
        self._observe(sql, value)
        return value


def observed(engine: PostgresEngine, observe: Callable[[str, Any], None]) -> Callable[[], Any]:
    """``engine``'s pool as the indexer takes it, each connection an ``ObservedConnection``."""

    @asynccontextmanager
    async def connection() -> AsyncIterator[Any]:
        async with engine.connection() as pooled:
            yield ObservedConnection(pooled, observe)

    return connection


async def test_several_workers_index_every_vector_once_and_share_the_work(unindexed: PostgresEngine) -> None:
    """Workers claim rows no other holds: each vector is moved once, and every worker moves some."""
    for start in range(0, 300, 100):
        await unindexed.store_many([learning(f"shared out {n}") for n in range(start, start + 100)])
    moved: dict[str, int] = {}

    def count_moved(sql: str, value: Any) -> None:
        if "INSERT INTO engram_embeddings" in sql:  # a move: per worker task, the vectors it indexed
            worker = asyncio.current_task().get_name()  # type: ignore[union-attr]
            moved[worker] = moved.get(worker, 0) + int(value)

    indexer = VectorIndexer(observed(unindexed, count_moved), workers=3, step=5)
    indexer.start()
    try:
        await until_indexed(unindexed)
    finally:
        await indexer.stop()
    assert await indexed_count(unindexed) == 300
    assert sum(moved.values()) == 300
    assert sorted(moved) == [f"engram-vector-indexer-{n}" for n in range(3)]
    assert all(count > 0 for count in moved.values()), moved


async def test_forgets_racing_the_indexer_neither_deadlock_nor_leave_vectors(unindexed: PostgresEngine) -> None:
    """A forget takes an item and then its queued vectors; the indexer claims the item first too."""
    for round_ in range(3):
        items = [learning(f"race {round_} item {n}") for n in range(400)]
        for start in range(0, 400, 100):
            await unindexed.store_many(items[start : start + 100])
        ids = [item.fingerprint() for item in items]
        doomed = ids[::2]
        chunks = [doomed[i : i + 10] for i in range(0, len(doomed), 10)]
        forgets = asyncio.gather(*(unindexed.forget(ForgetByIds(ids=chunk)) for chunk in chunks))
        _, reports = await asyncio.gather(unindexed.finish_indexing(), forgets)
        assert sum(r.forgotten for r in reports) == 200
        await unindexed.finish_indexing()
        assert await unindexed.vector_backlog() == 0
        assert await count_rows(unindexed) == (200 * (round_ + 1), 200 * (round_ + 1))
        async with unindexed.connection() as connection:
            orphans = await connection.fetchval(
                "SELECT count(*) FROM engram_embeddings e WHERE e.item_id = ANY($1)", doomed
            )
        assert orphans == 0


async def test_an_indexer_failure_loses_nothing_and_leaks_nothing(
    unindexed: PostgresEngine, database_url: str, embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    items = [learning(f"kept through failure {n}") for n in range(12)]
    await unindexed.store_many(items)
    engine = None
    try:
        with caplog.at_level(logging.WARNING, logger="engram"):
            async with failing_insert(unindexed, "engram_embeddings", "item_id", items[5].fingerprint()):
                engine = await PostgresEngine.connect(database_url, embedder)
                await asyncio.sleep(1.5)  # the indexer tries, fails, and tries again
                # Two workers may split the rows (each claims what the other has not locked yet),
                # so a step without the doomed row can land: the doomed row, and its step, stay queued.
                still_queued, indexed = await where_vectors_are(engine)
                assert items[5].fingerprint() in still_queued
                assert len(still_queued) + indexed == 12
                for item in items:
                    page = await engine.fetch(FetchRequest(query=item.render_text(), mode="vector", limit=1))
                    assert [h.id for h in page.hits] == [item.fingerprint()]
            await until_indexed(engine)
        assert await indexed_count(engine) == 12
        failures = [r.getMessage() for r in caplog.records if r.name == "engram" and "vector indexer" in r.getMessage()]
        assert failures
        assert not any("INSERT" in m or "injected" in m or "engram_" in m for m in failures), failures
    finally:
        if engine is not None:
            await engine.close()


async def test_a_reembed_beside_a_running_indexer_never_deadlocks(unindexed: PostgresEngine, embedder: Any) -> None:
    """Whole-table locks (reembed, TRUNCATE) and the indexer take the tables in one order (items, backlog,
    embeddings): the first full test run found TRUNCATE and the indexer deadlocked the other way round."""
    from app.engine.postgres.reembed import _reembed

    async def reembed_then_roll_back() -> None:
        async with unindexed.connection() as connection:
            transaction = connection.transaction()
            await transaction.start()
            await _reembed(connection, embedder, 64)
            await transaction.rollback()

    for round_ in range(8):
        for half in range(2):
            await unindexed.store_many([learning(f"round {round_} note {half} {n}") for n in range(100)])
        await asyncio.gather(unindexed.finish_indexing(), reembed_then_roll_back())
    assert await count_rows(unindexed) == (1600, 1600)


async def test_a_short_answer_from_the_index_falls_back_to_exact_whatever_the_backlog_adds(
    unindexed: PostgresEngine, database_url: str, embedder: Any
) -> None:
    """The index gives up on a selective filter; rows still queued must not make its short answer look full."""
    from app.engine.postgres.queries.statement import Statement
    from app.engine.postgres.queries.vector import vector_sql
    from app.engine.postgres.vectors import query_vector

    common = [learning(f"common note {n}", tags=["common"]) for n in range(2_000)]
    for start in range(0, len(common), 100):
        await unindexed.store_many(common[start : start + 100])
    await unindexed.store_many([learning(f"rare note {n}", tags=["rare"]) for n in range(15)])
    await unindexed.finish_indexing()
    await unindexed.store_many([learning(f"rare queued note {n}", tags=["rare"]) for n in range(12)])
    # More queued than a page asks for (limit + 1): alone they would make the index's short answer look full.
    assert await unindexed.vector_backlog() == 12
    rare = Filter(tags_any=["rare"])
    async with unindexed.connection() as connection:
        # Make the planner walk the HNSW index and the index stop after ef_search candidates
        # (as a scan stops at hnsw.max_scan_tuples on a far larger table).
        await connection.execute("ALTER DATABASE postgres SET enable_sort = off")
    short_sighted = await PostgresEngine.connect(
        database_url,
        embedder,
        options=EngineOptions(
            hnsw=HNSWOptions(ef_search=40, ef_search_filtered=40, iterative_scan="off"),
            indexer=IndexerOptions(background=False),
        ),
    )
    try:
        page = await short_sighted.fetch(FetchRequest(query="note", mode="vector", filter=rare, limit=10))
    finally:
        await short_sighted.close()
        async with unindexed.connection() as connection:
            await connection.execute("ALTER DATABASE postgres RESET enable_sort")
    (vector,) = await embedder.embed(["note"])
    from app.engine.postgres.filters import filter_predicate

    pred = filter_predicate(rare)
    exact = await unindexed.run(
        Statement.bind(
            vector_sql(pred.sql(), exact=True, dimension=embedder.dimension),
            {"vec": query_vector(vector), "model": embedder.name, "depth": 10, "offset": 0, **pred.params},
        )
    )
    expected = [row["id"] for row in exact]
    assert [h.id for h in page.hits] == expected


async def test_workers_share_the_last_vectors_of_a_burst(unindexed: PostgresEngine) -> None:
    """A background worker claims its share of what its indexer's workers do not hold (at least ten):
    the end of a burst is split among them, not left to one while the others idle."""
    await unindexed.store_many([learning(f"shared {n}") for n in range(30)])
    share = Share(workers=2)
    async with unindexed.connection() as raw:
        with share.holding(20):  # another worker holds 20 of the 30: half of the other 10, but ten at least
            assert await index_backlog(raw, share=share) == 10
        assert share.held == 0
        assert await index_backlog(raw, share=share) == 10  # half of 20
        assert await index_backlog(raw, share=share) == 10  # half of 10 is five: ten at least, all that is left
        assert await index_backlog(raw, share=share) == 0
        await unindexed.store_many([learning(f"unshared {n}") for n in range(30)])
        assert await index_backlog(raw, step=25) == 25  # a writer catching up takes whole steps
    assert await unindexed.vector_backlog() == 5


async def backlog_pages(engine: PostgresEngine) -> int:
    async with engine.connection() as connection:
        return int(await connection.fetchval("SELECT pg_relation_size('engram_vector_backlog') / 8192") or 0)


async def test_the_worker_that_empties_the_backlog_vacuums_it(unindexed: PostgresEngine, database_url: str) -> None:
    """A queue table keeps the pages of every vector moved until a vacuum: the indexer vacuums it once it
    has emptied it, after ``vacuum_after`` moves, so claims and searches do not read them."""
    pool = await asyncpg.create_pool(database_url, min_size=2, max_size=2)
    indexer = VectorIndexer(pool.acquire, workers=2, vacuum_after=100)
    await pool.execute("ALTER TABLE engram_vector_backlog SET (autovacuum_enabled = false)")  # only the indexer's
    try:
        await unindexed.store_many([learning(f"moved and vacuumed {n}") for n in range(60)])
        indexer.start()
        for _ in range(250):
            if not await unindexed.vector_backlog():
                break
            await asyncio.sleep(0.02)
        assert await unindexed.vector_backlog() == 0
        assert await backlog_pages(unindexed) > 0  # 60 moves: not yet
        await unindexed.store_many([learning(f"moved and vacuumed {n}") for n in range(60, 120)])
        indexer.wake()
        for _ in range(250):
            if not await backlog_pages(unindexed):
                break
            await asyncio.sleep(0.02)
        assert await backlog_pages(unindexed) == 0  # vacuumed: its emptied pages are gone
        assert await indexed_count(unindexed) == 120
    finally:
        await indexer.stop()
        await pool.execute("ALTER TABLE engram_vector_backlog RESET (autovacuum_enabled)")
        await pool.close()


@pytest.fixture
async def bulk(database_url: str, embedder: Any) -> AsyncIterator[PostgresEngine]:
    """Vectors stay queued (as ``engram import`` leaves them), however far past the backlog limit; a
    backlog of any length that would at least double the index is moved by building the index afresh."""
    async for engine in quiet_engine(
        database_url, embedder, 5, indexer=IndexerOptions(rebuild_least=1, backlog_limit=5).deferred()
    ):
        yield engine


async def the_index(engine: PostgresEngine) -> tuple[int, str]:
    """The HNSW index's object id (a rebuild makes a new one) and its definition."""
    async with engine.connection() as connection:
        row = await connection.fetchrow(
            "SELECT indexrelid::bigint, pg_get_indexdef(indexrelid) FROM pg_index "
            "WHERE indexrelid = 'engram_embeddings_hnsw'::regclass"
        )
    return int(row[0]), str(row[1])


async def sketches(engine: PostgresEngine) -> list[tuple[str, str]]:
    async with engine.connection() as connection:
        rows = await connection.fetch("SELECT key, item_id FROM engram_sketch_postings ORDER BY key, item_id")
    return [(row["key"], row["item_id"]) for row in rows]


async def test_a_backlog_that_doubles_the_index_is_indexed_by_building_it_afresh(
    bulk: PostgresEngine, unindexed: PostgresEngine
) -> None:
    """The same items indexed in bulk and one by one: the same index, the same answers."""
    items = [learning(f"bulk note {n} about {topic}", tags=[topic]) for n, topic in enumerate(["tea", "rust"] * 20)]
    queries = [item.render_text() for item in items]
    await unindexed.store_many(items)
    await unindexed.finish_indexing()  # below rebuild_least: vector by vector
    one_by_one = await pages(unindexed, queries, mode="vector", limit=5)
    kept_sketches = await sketches(unindexed)
    await truncate(unindexed)

    before = await the_index(bulk)
    for start in range(0, len(items), 10):
        await bulk.store_many(items[start : start + 10])
    assert await bulk.vector_backlog() == len(items)  # deferred: no write indexed any
    await bulk.finish_indexing()
    assert await bulk.vector_backlog() == 0
    assert await indexed_count(bulk) == len(items)
    oid, definition = await the_index(bulk)
    assert oid != before[0] and definition == before[1]
    assert await sketches(bulk) == kept_sketches
    assert await pages(bulk, queries, mode="vector", limit=5) == one_by_one
    tagged = await pages(bulk, queries[:4], mode="vector", limit=5, filter=Filter(tags_any=["rust"]))
    assert all(page and len(page) == 5 for page in tagged)


async def test_a_backlog_shorter_than_the_index_is_inserted_into_it(bulk: PostgresEngine) -> None:
    await bulk.store_many([learning(f"first note {n}") for n in range(30)])
    await bulk.finish_indexing()  # 30 queued, none indexed: built afresh
    async with bulk.connection() as connection:
        await connection.execute("ANALYZE engram_embeddings")
    built = await the_index(bulk)
    await bulk.store_many([learning(f"later note {n}") for n in range(20)])
    await bulk.finish_indexing()  # 20 queued beside 30 indexed: inserted
    assert await the_index(bulk) == built
    assert await indexed_count(bulk) == 50 and await bulk.vector_backlog() == 0


async def test_a_rebuild_leaves_rows_another_indexer_holds_and_they_are_moved_after(bulk: PostgresEngine) -> None:
    """An indexer mid-step holds the oldest queued rows: the rebuild moves the rest, never waits for
    them, and they are indexed once their holder lets go."""
    await bulk.store_many([learning(f"held note {n}") for n in range(10)])
    await bulk.store_many([learning(f"free note {n}") for n in range(30)])
    async with bulk.connection() as holder:
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute("SELECT 1 FROM engram_vector_backlog ORDER BY queued LIMIT 10 FOR UPDATE")
        async with bulk.connection() as connection:
            moved = await rebuild_index(connection, memory_mb=64)
        assert moved == 30
        await transaction.rollback()
    assert await bulk.vector_backlog() == 10
    await bulk.finish_indexing()
    assert await bulk.vector_backlog() == 0 and await indexed_count(bulk) == 40


async def test_a_rebuild_outlasts_the_pooled_connections_timeouts(bulk: PostgresEngine, database_url: str) -> None:
    """Building the graph of a large backlog takes longer than a pooled statement may (15 s): the rebuild
    sets its own bounds. Here a connection whose statements may take 100 ms server side, 200 ms client
    side; moving and indexing 6,000 vectors takes longer."""
    for start in range(0, 6_000, 100):
        await bulk.store_many([learning(f"timed note {n}") for n in range(start, start + 100)])
    connection = await asyncpg.connect(database_url, command_timeout=0.2, server_settings={"statement_timeout": "100"})
    try:
        with pytest.raises((asyncpg.QueryCanceledError, TimeoutError)):
            await connection.execute("SELECT count(*) FROM engram_vector_backlog a, engram_vector_backlog b")
        assert await rebuild_index(connection, memory_mb=64) == 6_000
    finally:
        await connection.close()
    assert await bulk.vector_backlog() == 0 and await indexed_count(bulk) == 6_000


async def test_a_rebuild_that_fails_is_undone_and_the_backlog_indexed_vector_by_vector(
    database_url: str, embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A build PostgreSQL refuses (here a build memory it does not take; in a container, too little
    shared memory for a parallel build): the old index stays, and every vector is still indexed."""
    indexer = IndexerOptions(rebuild_least=1, build_memory_mb=0).deferred()
    async for engine in quiet_engine(database_url, embedder, 500, indexer=indexer):
        before = await the_index(engine)
        await engine.store_many([learning(f"refused build note {n}") for n in range(30)])
        with caplog.at_level(logging.WARNING, logger="engram"):
            await engine.finish_indexing()
        assert await the_index(engine) == before
        assert await engine.vector_backlog() == 0 and await indexed_count(engine) == 30
        (warning,) = [r.getMessage() for r in caplog.records if "building it afresh failed" in r.getMessage()]
        assert "SQLSTATE 22023" in warning and "maintenance_work_mem" not in warning


async def test_a_trickle_of_one_item_writes_costs_one_claim_each(unindexed: PostgresEngine) -> None:
    """A write wakes one worker, which moves what it finds and then waits: no empty claims by the
    other workers, none after each move (they were two of every three claims)."""
    claims: list[int] = []

    def count_claims(sql: str, rows: Any) -> None:
        if "FOR UPDATE SKIP LOCKED" in sql:  # a claim: a transaction reading the backlog
            claims.append(len(rows))

    indexer = VectorIndexer(observed(unindexed, count_claims), workers=2, poll_s=3600)
    indexer.start()
    try:
        for _ in range(2000):  # each worker looks once as it starts, and finds nothing
            if len(claims) == 2:
                break
            await asyncio.sleep(0.01)
        assert claims == [0, 0]
        claims.clear()
        for n in range(10):
            await unindexed.store(learning(f"one at a time {n}"))
            indexer.wake()  # as the engine's own indexer is woken by its writes
            await until_indexed(unindexed)
    finally:
        await indexer.stop()
    assert claims == [1] * 10
    assert await indexed_count(unindexed) == 10
