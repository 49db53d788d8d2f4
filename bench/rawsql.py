"""Baseline (a): the engine's own statements sent straight to PostgreSQL with asyncpg.

The statements are the engine's (``app/engine/postgres/statements.py``) and so are
the filters (``filter_predicate``): the SQL is the same by construction. Each
statement is prepared once and then executed, which is the floor the HTTP
service is measured against.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, NamedTuple

import asyncpg
import numpy as np

from app.contract.meta import Filter
from app.embeddings.protocol import Embedder
from app.engine.fusion import fuse, fusion_depth
from app.engine.keywords import KeywordQuery
from app.engine.postgres.engine import (
    StatisticsCache,
    index_was_enough,
    search_breadth,
)
from app.engine.postgres.filters import Predicate, filter_predicate, sketch_keys
from app.engine.postgres.indexer import VectorIndexer, backlog_size
from app.engine.postgres.selectivity import ranks_by_sketch
from app.engine.postgres.statements import (
    INSERT_ITEMS,
    QUEUE_VECTORS,
    TERM_STATISTICS,
    TermStatistics,
    explore_params,
    explore_sql,
    get_sql,
    keyword_params,
    keyword_sql,
    list_sql,
    plans_generic,
    positional,
    sketch_candidates,
    sketch_sql,
    vector_sql,
)
from app.engine.postgres.vectors import query_vector, register_vector_types, vector_array
from app.settings import Settings
from bench.corpus import CorpusItem

# The session settings PostgresEngine.connect gives its first pool's connections (keep in sync with
# it; its second pool's plan generic): the floor must search the index as the service does, or its
# figures are not the same query.
# An unfiltered search's breadth, every connection's own.
EF_SEARCH = Settings.model_fields["hnsw_ef_search"].default
ENGINE_SESSION = {
    "statement_timeout": str(Settings.model_fields["statement_timeout_ms"].default),
    "jit": "off",
    "plan_cache_mode": "force_custom_plan",
    "hnsw.ef_search": str(EF_SEARCH),
    "hnsw.iterative_scan": "relaxed_order",
}
# A filtered search's breadth, which the engine's statement sets for itself (vector_sql).
EF_SEARCH_FILTERED = Settings.model_fields["hnsw_ef_search_filtered"].default
# How many vectors may wait for the index before a write indexes some itself, as in the engine.
BACKLOG_LIMIT = Settings.model_fields["vector_backlog_limit"].default
# How many background workers index, as in the engine.
INDEXERS = Settings.model_fields["vector_indexers"].default


async def connect(url: str, *, generic_plan: bool = False) -> asyncpg.Connection:
    """One connection set up as the engine sets up its pools' (``generic_plan``: its second pool's)."""
    plans = {"plan_cache_mode": "force_generic_plan"} if generic_plan else {}
    connection = await asyncpg.connect(url, server_settings={**ENGINE_SESSION, **plans})
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


class Statement(NamedTuple):
    """A statement as the engine sends it. ``settled``: its rows are the answer, where a walk of the
    HNSW index that came back short is followed by the exact scan (index_was_enough)."""

    sql: str
    params: dict[str, Any]
    generic_plan: bool
    settled: bool


class RawSql:
    """asyncpg connections as the engine's pools have them, a cache of prepared statements, and the
    engine's query logic.

    ``custom`` and ``generic`` are two connections each, planning for the values and reusing one
    generic plan (plans_generic): the engine runs a hybrid fetch's two rankings at once on two
    connections, and so does this baseline. Everything else runs on the first custom one.
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
        self._cfg = ts_config
        self._prepared: dict[tuple[int, str], asyncpg.prepared_stmt.PreparedStatement] = {}
        self._statistics = StatisticsCache()
        self.phases: dict[str, list[float]] = {
            "embed": [],
            "insert_items": [],
            "queue_vectors_and_commit": [],
            "catch_up": [],
        }

    async def run(
        self, sql: str, params: dict[str, Any], *, generic_plan: bool = False, second: bool = False
    ) -> list[asyncpg.Record]:
        connection = self._connections[generic_plan][int(second)]
        converted, args = positional(sql, params)
        statement = self._prepared.get((id(connection), converted))
        if statement is None:
            statement = await connection.prepare(converted)
            self._prepared[(id(connection), converted)] = statement
        return list(await statement.fetch(*args))

    async def explain(self, sql: str, params: dict[str, Any], *, generic_plan: bool = False) -> str:
        converted, args = positional(sql, params)
        rows = await self._connections[generic_plan][0].fetch("EXPLAIN (ANALYZE, BUFFERS) " + converted, *args)
        return "\n".join(row[0] for row in rows)

    # Writes: the engine's two inserts in one transaction, embedding included, then its indexer.

    async def store_batch(self, batch: list[CorpusItem]) -> int:
        if self.indexer is None:
            raise RuntimeError("this RawSql was made without connections for its vector indexer")
        start = time.perf_counter()
        vectors = await self._embedder.embed([item.text for item in batch])
        embedded = time.perf_counter()
        rows = {
            "ids": [i.id for i in batch],
            "kinds": [i.row["kind"] for i in batch],
            "nss": [i.row["namespace"] for i in batch],
            "texts": [i.row["text"] for i in batch],
            "metas": [i.row["meta"] for i in batch],
            "items": [i.row["item"] for i in batch],
            "conf": [i.row["confidence"] for i in batch],
            "obs": [i.row["observed_at"] for i in batch],
            "srcs": [i.row["source_kind"] for i in batch],
        }
        async with self._db.transaction():
            inserted = {r["id"] for r in await self.run(INSERT_ITEMS, rows)}
            items_done = time.perf_counter()
            ids = [i.id for i in batch if i.id in inserted]
            (row,) = await self.run(
                QUEUE_VECTORS,
                {
                    "model": self._embedder.name,
                    "ids": ids,
                    "vs": vector_array([v for i, v in zip(batch, vectors, strict=True) if i.id in inserted]),
                },
            )
        queued = time.perf_counter()
        self.indexer.start()
        self.indexer.wake()
        if row["backlog"] > BACKLOG_LIMIT:
            await self.indexer.catch_up(to=BACKLOG_LIMIT)
        done = time.perf_counter()
        # Where a batch's time goes: embedding, the items insert (GIN and btree upkeep), queueing the
        # vectors, and the HNSW upkeep the write took on because the indexer was behind.
        self.phases["embed"].append((embedded - start) * 1000)
        self.phases["insert_items"].append((items_done - embedded) * 1000)
        self.phases["queue_vectors_and_commit"].append((queued - items_done) * 1000)
        self.phases["catch_up"].append((done - queued) * 1000)
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
        return await self._statistics.current(lambda: self.run(TERM_STATISTICS, {}, second=second))

    async def ranks_by_sketch(
        self, request_filter: Filter, pred: Predicate | None = None, *, second: bool = False
    ) -> bool:
        """Whether the engine ranks a vector search under ``request_filter`` (as ``pred``, when the
        caller has it) by sketches (sketch_sql)."""
        pred = pred or filter_predicate(request_filter)
        return not pred.admits_all and ranks_by_sketch(request_filter, await self.term_statistics(second=second))

    async def fetch_statement(
        self,
        query: str,
        mode: str,
        request_filter: Filter,
        vector: np.ndarray | None,
        *,
        exact: bool = False,
        second: bool = False,
        sketches: bool = True,
        count: int = 11,
    ) -> Statement:
        """The keyword or vector statement of a first page, as the engine sends it: ``count`` rows
        (limit 10 and the one that says whether there is a next page; a hybrid fetch runs both to
        fusion_depth); ``second``: the connection it will run on (see term_statistics); without
        ``sketches``, a filtered vector search walks the index whatever it admits (the engine before
        migration 0008, bench/proposals.py)."""
        pred = filter_predicate(request_filter)
        keywords = KeywordQuery.parse(query)
        offset = 0
        base = {**pred.params, "offset": offset}
        if mode == "keyword":
            return Statement(
                keyword_sql(pred, keywords, depth=offset + count),
                {
                    **base,
                    **keyword_params(self._cfg, keywords, offset + count, await self.term_statistics()),
                    "count": count,
                },
                plans_generic(pred),
                settled=True,
            )
        if vector is None:
            raise ValueError(f"a {mode} statement needs the query's vector")
        vec = {"vec": query_vector(vector), "model": self._embedder.name, "depth": offset + count}
        if sketches and await self.ranks_by_sketch(request_filter, pred, second=second):
            keys = sketch_keys(request_filter)
            return Statement(
                sketch_sql(pred.sql(), keys),
                {**base, **keys.predicate.params, **vec, "candidates": sketch_candidates(offset + count)},
                False,
                settled=True,
            )
        breadth = search_breadth(pred, exact=exact, filtered=EF_SEARCH_FILTERED)
        return Statement(
            vector_sql(pred.sql(), exact=exact, dimension=self._embedder.dimension, breadth=breadth),
            {**base, **vec},
            plans_generic(pred),
            settled=exact,
        )

    async def _ranking(
        self,
        query: str,
        mode: str,
        request_filter: Filter,
        vector: np.ndarray | None,
        count: int,
        second: bool = False,
        sketches: bool = True,
    ) -> list[asyncpg.Record]:
        """One ranking's first ``count`` rows (a page and its next-page row, or a hybrid fetch's depth),
        with the engine's exact fallback for vectors."""
        if mode == "keyword":
            if KeywordQuery.parse(query).is_empty:
                return []
            statement = await self.fetch_statement(query, mode, request_filter, None, count=count)
            return await self.run(statement.sql, statement.params, generic_plan=statement.generic_plan, second=second)
        for exact in (False, True):
            statement = await self.fetch_statement(
                query, mode, request_filter, vector, exact=exact, second=second, sketches=sketches, count=count
            )
            rows = await self.run(statement.sql, statement.params, generic_plan=statement.generic_plan, second=second)
            if statement.settled or index_was_enough(rows, count):
                return rows
        raise AssertionError("unreachable")

    async def vector_page(
        self, vector: np.ndarray, request_filter: Filter, limit: int = 10, *, sketches: bool = True
    ) -> list[str]:
        """The engine's vector ranking of an embedded query (see fetch_statement's ``sketches``): its
        first page's ids."""
        rows = await self._ranking("", "vector", request_filter, vector, limit + 1, sketches=sketches)
        return [r["id"] for r in rows][:limit]

    async def fetch(self, query: str, mode: str, request_filter: Filter, limit: int = 10) -> list[str]:
        if mode == "keyword":
            return [r["id"] for r in await self._ranking(query, mode, request_filter, None, limit + 1)][:limit]
        (vector,) = await self._embedder.embed_queries([query])
        if mode == "vector":
            return [r["id"] for r in await self._ranking(query, mode, request_filter, vector, limit + 1)][:limit]
        depth = fusion_depth(limit + 1)
        keyword, nearest = await asyncio.gather(
            self._ranking(query, "keyword", request_filter, None, depth),
            self._ranking(query, "vector", request_filter, vector, depth, second=True),
        )
        seq = {r["id"]: r["seq"] for r in (*keyword, *nearest)}
        scored = [[(r["id"], float(r["score"])) for r in ranking] for ranking in (keyword, nearest)]
        return [item_id for item_id, _ in fuse(*scored, seq)][:limit]

    async def list_page(self, after: int, limit: int = 100) -> tuple[list[str], int | None]:
        pred = filter_predicate(Filter())
        params = {"after": after, "ceiling": None, "count": limit + 1, **pred.params}
        rows = await self.run(list_sql(pred.sql()), params)
        page = rows[:limit]
        return [r["id"] for r in page], (page[-1]["seq"] if len(rows) > limit else None)

    async def get(self, ids: list[str]) -> list[str]:
        found = {r["id"] for r in await self.run(get_sql("TRUE"), {"ids": list(dict.fromkeys(ids))})}
        return [i for i in ids if i in found]

    async def explore_tags(self, limit: int = 20) -> dict[str, Any]:
        pred = filter_predicate(Filter())
        (row,) = await self.run(explore_sql("tag", pred), explore_params("tag", pred, limit))
        return dict(row)
