"""The raw-SQL baseline: the engine's own statements sent straight to PostgreSQL with asyncpg.

The statements are the engine's, planned by its own query modules
(``app/engine/postgres/queries``) and chosen by its own rankings
(``app/engine/postgres/ranking.py``): the SQL is the same by construction. Each
statement is prepared once and then executed, which is the floor the HTTP
service is measured against.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import numpy as np

from app.contract.meta import Filter
from app.embeddings.protocol import Embedder
from app.engine.keywords import KeywordQuery
from app.engine.postgres.filters import Predicate, filter_predicate
from app.engine.postgres.indexer import VectorIndexer, backlog_size
from app.engine.postgres.pool import connection_settings
from app.engine.postgres.queries.facets import plan_explore
from app.engine.postgres.queries.listing import plan_get, plan_list
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.statistics import TermStatistics
from app.engine.postgres.queries.writes import ItemRow, plan_write
from app.engine.postgres.ranking import Rankings, Run
from app.engine.postgres.vectors import register_vector_types
from app.settings import Settings
from bench.corpus import CorpusItem

# The engine's options as the service's defaults make them: the floor must search the index as the
# service does, or its figures are not the same query.
# (The settings' defaults, not the environment's: model_construct reads no variable.)
ENGINE_OPTIONS = Settings.model_construct().engine_options
# The settings the engine gives its first pool's connections (its second pool's plan generic).
ENGINE_SESSION = connection_settings(ENGINE_OPTIONS.pool, ENGINE_OPTIONS.hnsw, generic_plan=False)
# An unfiltered search's breadth, every connection's own.
EF_SEARCH = ENGINE_OPTIONS.hnsw.ef_search
# A filtered search's breadth, which the engine's statement sets for itself (queries.vector.vector_sql).
EF_SEARCH_FILTERED = ENGINE_OPTIONS.hnsw.ef_search_filtered
# How many vectors may wait for the index before a write indexes some itself, as in the engine.
BACKLOG_LIMIT = ENGINE_OPTIONS.indexer.backlog_limit
# How many background workers index, as in the engine.
INDEXERS = ENGINE_OPTIONS.indexer.workers


async def connect(url: str, *, generic_plan: bool = False) -> asyncpg.Connection:
    """One connection set up as the engine sets up its pools' (``generic_plan``: its second pool's),
    without the jsonb codec: the floor reads meta as the server sends it."""
    settings = connection_settings(ENGINE_OPTIONS.pool, ENGINE_OPTIONS.hnsw, generic_plan=generic_plan)
    connection = await asyncpg.connect(url, server_settings=settings)
    await register_vector_types(connection)
    return connection


async def indexing_pool(url: str) -> asyncpg.Pool:
    """Connections for the vector indexer: one per background worker, one for a write that catches up."""
    return await asyncpg.create_pool(
        url,
        min_size=INDEXERS + 1,
        max_size=INDEXERS + 1,
        server_settings=ENGINE_SESSION,
        init=register_vector_types,
    )


async def wait_for_empty_backlog(connection: asyncpg.Connection, poll_s: float = 0.02) -> None:
    """Until no vector waits for the HNSW index in ``connection``'s database."""
    while True:
        if not await backlog_size(connection):
            return
        await asyncio.sleep(poll_s)


async def wait_for_token_vectors(connection: asyncpg.Connection, poll_s: float = 0.05) -> None:
    """Until every item in ``connection``'s database has late-interaction token vectors (the service's
    background writer makes them after the acknowledgement, app/engine/postgres/tokens.py)."""
    lacking = """
        SELECT EXISTS (SELECT 1 FROM engram_items i
                       WHERE NOT EXISTS (SELECT 1 FROM engram_token_vectors t WHERE t.item_id = i.id))
    """
    while True:
        if not await connection.fetchval(lacking):
            return
        await asyncio.sleep(poll_s)


class RawSql:
    """asyncpg connections as the engine's pools have them, a cache of prepared statements, and the
    engine's query logic.

    ``custom`` and ``generic`` are two connections each, planning for the values and reusing one
    generic plan (Statement.generic_plan): the engine runs a hybrid fetch's two rankings at once on
    two connections, and so does this baseline. Everything else runs on the first custom one.
    """

    def __init__(
        self,
        custom: tuple[asyncpg.Connection, asyncpg.Connection],
        generic: tuple[asyncpg.Connection, asyncpg.Connection],
        embedder: Embedder,
        ts_config: str = "english",
        *,
        indexing: asyncpg.Pool | None = None,
    ):
        self._connections = {False: custom, True: generic}
        self._db = custom[0]
        # The engine's vector indexer (the same class and statements) on connections of its own.
        self.indexer = VectorIndexer(indexing.acquire, workers=INDEXERS) if indexing is not None else None
        self._embedder = embedder
        self._rankings = Rankings(
            model=embedder.name, dimension=embedder.dimension, ts_config=ts_config, options=ENGINE_OPTIONS
        )
        self._prepared: dict[tuple[int, str], asyncpg.prepared_stmt.PreparedStatement] = {}
        self._busy: dict[int, asyncio.Lock] = {}
        self.phases: dict[str, list[float]] = {
            "embed": [],
            "write": [],
            "catch_up": [],
        }

    async def run(self, statement: Statement, *, second: bool = False) -> list[asyncpg.Record]:
        """The statement on the connection the engine would give it (``second``: a hybrid fetch's
        vector ranking's), prepared once a connection."""
        connection = self._connections[statement.generic_plan][int(second)]
        # The sketch copies are read in the background (mirror.py) on the connection a search ran on,
        # which the next search may be using: one statement at a time on each.
        async with self._busy.setdefault(id(connection), asyncio.Lock()):
            prepared = self._prepared.get((id(connection), statement.sql))
            if prepared is None:
                prepared = await connection.prepare(statement.sql)
                self._prepared[(id(connection), statement.sql)] = prepared
            return list(await prepared.fetch(*statement.args))

    async def copies_read(self) -> None:
        """Until the sketch copies its searches asked for are read (mirror.py), as the service's are."""
        await self._rankings.copies_read()

    def _runner(self, *, second: bool = False) -> Run:
        async def run(statement: Statement) -> list[asyncpg.Record]:
            return await self.run(statement, second=second)

        return run

    async def explain(self, statement: Statement) -> str:
        sql = "EXPLAIN (ANALYZE, BUFFERS) " + statement.sql
        rows = await self._connections[statement.generic_plan][0].fetch(sql, *statement.args)
        return "\n".join(row[0] for row in rows)

    # Writes: the engine's write statement (items and vectors at once), embedding included, then its indexer.

    async def store_batch(self, batch: list[CorpusItem]) -> int:
        if self.indexer is None:
            raise RuntimeError("this RawSql was made without connections for its vector indexer")
        start = time.perf_counter()
        vectors = await self._embedder.embed([item.text for item in batch])
        embedded = time.perf_counter()
        rows = [
            ItemRow(
                id=i.id,
                kind=i.row["kind"],
                namespace=i.row["namespace"],
                text=i.row["text"],
                meta=i.row["meta"],
                item=i.row["item"],
                confidence=i.row["confidence"],
                observed_at=i.row["observed_at"],
                source_kind=i.row["source_kind"],
            )
            for i in batch
        ]
        vectors_by_id = {i.id: v for i, v in zip(batch, vectors, strict=True)}
        (row,) = await self.run(plan_write(rows, self._embedder.name, vectors_by_id, count_backlog=True))
        inserted = set(row["inserted_ids"])
        written = time.perf_counter()
        self.indexer.start()
        self.indexer.wake()
        if row["backlog"] > BACKLOG_LIMIT:
            await self.indexer.catch_up(to=BACKLOG_LIMIT)
        done = time.perf_counter()
        # Where a batch's time goes: embedding, the write (the items insert with its GIN and btree
        # upkeep, the vectors queued, the commit: one statement), and the HNSW upkeep the write took
        # on because the indexer was behind.
        self.phases["embed"].append((embedded - start) * 1000)
        self.phases["write"].append((written - embedded) * 1000)
        self.phases["catch_up"].append((done - written) * 1000)
        return len(inserted)

    async def until_indexed(self) -> None:
        """Wait for the indexer to empty the backlog, then stop it."""
        assert self.indexer is not None
        await wait_for_empty_backlog(self._db)
        await self.indexer.stop()

    # Reads, as the engine runs them (including its exact-scan fallback).

    async def term_statistics(self, *, second: bool = False) -> TermStatistics:
        """The planner's statistics, cached as the engine caches them; read on the ``second``
        connection by a hybrid fetch's vector ranking, while its keyword ranking has the first."""
        return await self._rankings.statistics(self._runner(second=second))

    async def ranks_by_sketch(
        self, request_filter: Filter, pred: Predicate | None = None, *, second: bool = False
    ) -> bool:
        """Whether the engine ranks a vector search under ``request_filter`` (as ``pred``, when the
        caller has it) by sketches (queries.vector.sketch_sql)."""
        pred = pred or filter_predicate(request_filter)
        return await self._rankings.admits_few(self._runner(second=second), request_filter, pred)

    async def fetch_statement(
        self, query: str, mode: str, request_filter: Filter, vector: np.ndarray | None, *, count: int = 11
    ) -> Statement:
        """The keyword or vector statement of a first page, as the engine sends it first: ``count``
        rows (limit 10 and the one that says whether there is a next page)."""
        pred = filter_predicate(request_filter)
        if mode == "keyword":
            return await self._rankings.keyword_statement(
                self._runner(), KeywordQuery.parse(query), request_filter, pred, 0, count
            )
        if vector is None:
            raise ValueError(f"a {mode} statement needs the query's vector")
        statement, _ = await self._rankings.vector_statement(self._runner(), vector, request_filter, pred, 0, count)
        return statement

    async def vector_page(
        self, vector: np.ndarray, request_filter: Filter, limit: int = 10, *, sketches: bool = True
    ) -> list[str]:
        """The engine's vector ranking of an embedded query (without ``sketches``, a filter walks the
        index whatever it admits): its first page's ids."""
        pred = filter_predicate(request_filter)
        rows = await self._rankings.vector(
            self._runner(), vector, request_filter, pred, 0, limit + 1, sketches=sketches
        )
        return [r["id"] for r in rows][:limit]

    async def fetch(self, query: str, mode: str, request_filter: Filter, limit: int = 10) -> list[str]:
        pred = filter_predicate(request_filter)
        keywords = KeywordQuery.parse(query)
        if mode == "keyword":
            rows = await self._rankings.keyword(self._runner(), keywords, request_filter, pred, 0, limit + 1)
            return [r["id"] for r in rows][:limit]
        (vector,) = await self._embedder.embed_queries([query])
        if mode == "vector":
            return await self.vector_page(vector, request_filter, limit)
        runs = (self._runner(), self._runner(second=True))
        fused = await self._rankings.hybrid(runs, keywords, vector, request_filter, pred, 0, limit + 1)
        return [row["id"] for row, _ in fused][:limit]

    async def list_page(self, after: int, limit: int = 100) -> tuple[list[str], int | None]:
        rows = await self.run(plan_list(filter_predicate(Filter()), after=after, ceiling=None, count=limit + 1))
        page = rows[:limit]
        return [r["id"] for r in page], (page[-1]["seq"] if len(rows) > limit else None)

    async def get(self, ids: list[str]) -> list[str]:
        found = {r["id"] for r in await self.run(plan_get(filter_predicate(Filter()), list(dict.fromkeys(ids))))}
        return [i for i in ids if i in found]

    async def explore_tags(self, limit: int = 20) -> dict[str, Any]:
        (row,) = await self.run(plan_explore("tag", filter_predicate(Filter()), limit))
        return dict(row)
