"""Vector ranking through the engine: the half-precision index, its breadth, the exact fallback."""

from __future__ import annotations

from typing import Any

from app.contract.meta import Filter
from app.contract.requests import FetchRequest
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.options import EngineOptions, HNSWOptions
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.vector import search_breadth, vector_sql
from tests.engine.postgres.support import ONE_CONNECTION, learning
from tests.support.engines import truncate


async def test_selective_filter_in_vector_mode_still_fills_the_page(
    pg_engine: PostgresEngine, database_url: str, embedder: Any
) -> None:
    # An agent filter: no statistics bound it, so it is searched through the index (a tag would
    # be ranked by sketches once the statistics say how few hold it).
    items = [learning(f"common note {n}", agent_id="common") for n in range(2_000)]
    rare = [learning(f"rare note {n}", agent_id="rare") for n in range(15)]
    for start in range(0, len(items), 100):
        await pg_engine.store_many(items[start : start + 100])
    await pg_engine.store_many(rare)
    # Make the planner walk the HNSW index, and the index stop after ef_search candidates
    # (as a scan stops at hnsw.max_scan_tuples on a far larger table): only the exact
    # fallback can then fill the page.
    async with pg_engine.connection() as connection:
        await connection.execute("ALTER DATABASE postgres SET enable_sort = off")
    short_sighted = await PostgresEngine.connect(
        database_url,
        embedder,
        options=EngineOptions(hnsw=HNSWOptions(ef_search=40, ef_search_filtered=40, iterative_scan="off")),
    )
    try:
        for mode in ("vector", "hybrid"):
            page = await short_sighted.fetch(
                FetchRequest(query="note", mode=mode, filter=Filter(agent_id="rare"), limit=10)  # type: ignore[arg-type]
            )
            assert len(page.hits) == 10, mode
            assert all(h.meta.agent_id == "rare" for h in page.hits)
    finally:
        await short_sighted.close()
        async with pg_engine.connection() as connection:
            await connection.execute("ALTER DATABASE postgres RESET enable_sort")


def index_buffers(plan: str) -> int:
    """Shared buffers the HNSW index scan of an EXPLAIN (ANALYZE, BUFFERS) read: how far it walked."""
    lines = plan.splitlines()
    (at,) = [n for n, line in enumerate(lines) if "Index Scan using engram_embeddings_hnsw" in line]
    buffers = next(line for line in lines[at + 1 :] if "Buffers:" in line)
    return sum(int(part.split("=")[1]) for part in buffers.split() if "=" in part)


async def test_a_filtered_search_walks_the_index_wider_for_its_statement_alone(
    database_url: str, embedder: Any
) -> None:
    """The breadth travels inside the statement: the walk follows it, and the connection keeps its own."""
    from app.engine.postgres.vectors import query_vector

    engine = await PostgresEngine.connect(
        database_url,
        embedder,
        options=EngineOptions(pool=ONE_CONNECTION, hnsw=HNSWOptions(ef_search=123, ef_search_filtered=456)),
    )
    try:
        assert (
            search_breadth(
                filter_predicate(Filter(tags_any=["x"])), exact=False, filtered=engine.options.hnsw.ef_search_filtered
            )
            == 456
        )
        assert (
            search_breadth(
                filter_predicate(Filter(kinds=["learning"])),
                exact=False,
                filtered=engine.options.hnsw.ef_search_filtered,
            )
            == 456
        )
        assert (
            search_breadth(filter_predicate(Filter()), exact=False, filtered=engine.options.hnsw.ef_search_filtered)
            is None
        )
        assert (
            search_breadth(
                filter_predicate(Filter(tags_any=["x"])), exact=True, filtered=engine.options.hnsw.ef_search_filtered
            )
            is None
        )
        await truncate(engine)
        for batch in range(3):
            await engine.store_many([learning(f"breadth probe {batch} {n}") for n in range(100)])
        await engine.finish_indexing()
        (vector,) = await embedder.embed(["breadth probe"])
        params = {"vec": query_vector(vector), "model": embedder.name, "depth": 5, "offset": 0}
        walked = {}
        async with engine.connection() as connection, connection.transaction():
            # On a table this small only a planner told to avoid the alternatives picks an index.
            for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                await connection.execute(f"SET LOCAL {setting} = off")
            for breadth in (5, 400):  # the connection's own is 123, between them
                sql = vector_sql("TRUE", exact=False, dimension=embedder.dimension, breadth=breadth)
                explain = Statement.bind("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
                rows = await connection.fetch(explain.sql, *explain.args)
                walked[breadth] = index_buffers("\n".join(row[0] for row in rows))
        assert walked[400] > 2 * walked[5], walked
        # One pooled connection: what one statement set must not reach the next.
        breadth = "SELECT current_setting('hnsw.ef_search') AS ef"
        widened = vector_sql("TRUE", exact=False, dimension=embedder.dimension, breadth=456)
        assert len(await engine.run(Statement.bind(widened, params))) == 5
        assert (await engine.run(Statement.bind(breadth, {})))[0]["ef"] == "123"
    finally:
        await engine.close()


async def test_vector_search_walks_the_half_precision_index(pg_engine: PostgresEngine, embedder: Any) -> None:
    """The statement's distance must be the index's expression, cast and dimension included, or no index serves it."""
    from app.engine.postgres.vectors import query_vector

    await pg_engine.store_many([learning(f"index probe {n}") for n in range(20)])
    (vector,) = await embedder.embed(["index probe"])
    params = {"vec": query_vector(vector), "model": embedder.name, "depth": 5, "offset": 0}
    async with pg_engine.connection() as connection, connection.transaction():
        # On a table this small only a planner told to avoid the alternatives picks an index.
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            await connection.execute(f"SET LOCAL {setting} = off")
        for exact, uses_index in ((False, True), (True, False)):
            sql = vector_sql("TRUE", exact=exact, dimension=embedder.dimension)
            explain = Statement.bind("EXPLAIN " + sql, params)
            plan = "\n".join(row[0] for row in await connection.fetch(explain.sql, *explain.args))
            assert ("engram_embeddings_hnsw" in plan) is uses_index, plan
