"""The engine's pools: a read is one statement, generic plans only where values change no estimate,
connections the server closed are replaced."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import asyncpg

from app.contract.meta import Filter
from app.contract.requests import FetchRequest, ListRequest
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.options import EngineOptions
from app.engine.postgres.queries.backlog import INDEXER_LOCK_ORDER
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.schema import driver_url
from tests.engine.postgres.support import ONE_CONNECTION, learning
from tests.support.engines import truncate


async def test_rankings_without_a_filter_reuse_one_plan_and_filtered_ones_are_planned_for_their_values(
    database_url: str, embedder: Any
) -> None:
    """A generic plan saves the planning where the values change no estimate, and only there."""
    engine = await PostgresEngine.connect(database_url, embedder, options=EngineOptions(pool=ONE_CONNECTION))
    plans = (
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
        "WHERE statement LIKE '%' || :marker || '%' AND statement NOT LIKE '%' || :other || '%'"
    )
    try:
        await truncate(engine)
        await engine.store_many([learning(f"plan note {i}", tags=["planned"]) for i in range(5)])
        await engine.finish_indexing()
        for _ in range(3):
            for mode in ("keyword", "vector"):
                await engine.fetch(FetchRequest(query="plan note", mode=mode, limit=3))  # type: ignore[arg-type]
                await engine.fetch(
                    FetchRequest(query="plan note", mode=mode, filter=Filter(kinds=["learning"]), limit=3)  # type: ignore[arg-type]
                )
        # Only the unfiltered ranking gathers pairs of rare words; only the filtered one reads kinds
        # (a filter the statistics do not bound: its vector ranking walks the index, never sketches).
        # Each pool keeps its own prepared statements: the unfiltered ones are all on the second.
        for marker, generic in (("pairs AS", True), ("halfvec", True)):
            (unfiltered,) = await engine.run(
                Statement.bind(plans, {"marker": marker, "other": "no such text"}, generic_plan=generic)
            )
            assert (unfiltered["generic_plans"], unfiltered["custom_plans"]) == (3, 0), marker
        for marker, other in (("i.kind = ANY", "halfvec"), ("'hnsw.ef_search'", "tsv")):
            (filtered,) = await engine.run(Statement.bind(plans, {"marker": marker, "other": other}))
            assert (filtered["generic_plans"], filtered["custom_plans"]) == (0, 3), marker
            assert not await engine.run(Statement.bind(plans, {"marker": marker, "other": other}, generic_plan=True)), (
                marker
            )
        setting = "SELECT current_setting('plan_cache_mode') AS m"
        assert (await engine.run(Statement.bind(setting, {})))[0]["m"] == "force_custom_plan"
        assert (await engine.run(Statement.bind(setting, {}, generic_plan=True)))[0]["m"] == "force_generic_plan"
    finally:
        await engine.close()


async def _pooled_backend_pid(engine: PostgresEngine) -> int:
    async with engine.connection() as connection:
        return int(connection.get_server_pid())


async def test_a_read_costs_one_statement_and_no_ping(database_url: str, embedder: Any) -> None:
    """One round trip a read: no pre-ping (the pool checks for closed connections without asking
    the server), and a statement's own settings (a generic plan, a wider walk) cost none."""
    # One connection a pool, so every statement is seen: the vector indexer's own go aside.
    engine = await PostgresEngine.connect(database_url, embedder, options=EngineOptions(pool=ONE_CONNECTION))
    try:
        # Enough for a page from the index alone: fewer and the vector search also scans exactly.
        await engine.store_many([learning(f"one statement per read {n}", tags=["seen"]) for n in range(6)])
        await engine.finish_indexing()

        async def read() -> None:
            await engine.fetch(FetchRequest(query="statement", mode="keyword", limit=3))
            tagged = Filter(tags_any=["seen"])
            await engine.fetch(FetchRequest(query="statement", mode="vector", filter=tagged, limit=3))
            await engine.list(ListRequest(limit=3))

        await read()  # the word statistics read, the vector types introspected: once a connection
        statements: dict[str, list[str]] = {"custom": [], "generic": []}
        for name, generic_plan in (("custom", False), ("generic", True)):
            async with engine.connection(generic_plan=generic_plan) as connection:
                connection.add_query_logger(lambda record, seen=statements[name]: seen.append(record.query))
        await read()
    finally:
        await engine.close()
    # The indexer's workers poll on the first pool's connection.
    indexer = (INDEXER_LOCK_ORDER, "FOR KEY SHARE", "BEGIN", "COMMIT")
    reads = {name: [s for s in seen if not any(word in s for word in indexer)] for name, seen in statements.items()}
    assert [len(reads["custom"]), len(reads["generic"])] == [2, 1], statements
    assert not [s for seen in statements.values() for s in seen if s.lstrip().upper().startswith("SET")]
    assert not [s for s in statements["generic"] if s.lstrip().upper().startswith(("BEGIN", "COMMIT"))]


async def test_connections_the_server_closed_are_replaced_not_used(
    pg_engine: PostgresEngine, database_url: str
) -> None:
    """A restart or a terminated backend leaves dead connections in the pool: the next requests still succeed."""
    await pg_engine.store(learning("before the backend went away"))
    pid = await _pooled_backend_pid(pg_engine)
    other = await asyncpg.connect(driver_url(database_url))
    try:
        assert await other.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await other.close()
    # asyncpg learns of the closed socket from the event loop.
    for _ in range(100):
        await asyncio.sleep(0.01)
        if await _pooled_backend_pid(pg_engine) != pid:
            break
    page = await pg_engine.fetch(FetchRequest(query="backend", mode="keyword", limit=3))
    assert [hit.text for hit in page.hits] == ["before the backend went away"]
    receipt = await pg_engine.store(learning("after the backend went away"))
    assert not receipt.replayed


async def test_pooled_connections_plan_no_parallel_workers(pg_engine: PostgresEngine, database_url: str) -> None:
    """Both pools' statements run on one core each: parallel workers fought the other half of a
    hybrid, and other requests, for the cores (docs/tuning.md#parallel-workers)."""
    await pg_engine.store_many([learning(f"parallel note {n}") for n in range(20)])
    # A planner told that workers cost nothing plans them wherever they are allowed.
    free = ("SET LOCAL parallel_setup_cost = 0", "SET LOCAL parallel_tuple_cost = 0")
    free += ("SET LOCAL min_parallel_table_scan_size = 0", "SET LOCAL min_parallel_index_scan_size = 0")
    query = "EXPLAIN SELECT count(*) FROM engram_items WHERE text LIKE '%note%'"

    async def plan(connection: asyncpg.Connection) -> str:
        async with connection.transaction():
            for setting in free:
                await connection.execute(setting)
            return "\n".join(row[0] for row in await connection.fetch(query))

    for generic_plan in (False, True):
        async with pg_engine.connection(generic_plan=generic_plan) as connection:
            assert "Gather" not in await plan(connection)
    # The server's own default would: the statement can be planned parallel.
    plain = await asyncpg.connect(driver_url(database_url))
    try:
        assert "Gather" in await plan(plain)
    finally:
        await plain.close()


async def test_only_the_pool_that_plans_per_value_reads_without_read_ahead(
    pg_engine: PostgresEngine, database_url: str, embedder: Any
) -> None:
    """Filtered statements read their scattered pages themselves; unfiltered rankings keep the
    server's read-ahead (docs/tuning.md#read-ahead-under-a-filter)."""
    setting = "SELECT current_setting('effective_io_concurrency') AS value"
    plain = await asyncpg.connect(driver_url(database_url))
    try:
        server_default = await plain.fetchval(setting)
    finally:
        await plain.close()
    assert server_default != "0"
    custom = await pg_engine.run(Statement.bind(setting, {}))
    generic = await pg_engine.run(Statement.bind(setting, {}, generic_plan=True))
    assert (custom[0]["value"], generic[0]["value"]) == ("0", server_default)
    # ENGRAM_CUSTOM_PLAN_IO_CONCURRENCY gives read-ahead back to that pool, for storage that needs it.
    options = EngineOptions(pool=replace(ONE_CONNECTION, custom_plan_io_concurrency=7))
    engine = await PostgresEngine.connect(database_url, embedder, options=options)
    try:
        assert (await engine.run(Statement.bind(setting, {})))[0]["value"] == "7"
    finally:
        await engine.close()
