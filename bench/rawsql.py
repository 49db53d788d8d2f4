"""Baseline (a): the engine's own statements sent straight to PostgreSQL with asyncpg.

The statements below are copied from ``app/engine/postgres/engine.py`` and must
stay in sync with it (a comment there points here); filters come from the
engine's own ``filter_predicate``, so the WHERE clauses are the same by
construction. Each statement is prepared once and then executed, which is the
floor the HTTP service is measured against.
"""

from __future__ import annotations

import re
import time
from typing import Any

import asyncpg

from app.contract.meta import Filter
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.keywords import KeywordQuery
from app.engine.postgres.engine import HIT_COLUMNS, RRF_K, vector_literal
from app.engine.postgres.filters import filter_predicate
from app.settings import Settings
from bench.corpus import CorpusItem

# The session settings PostgresEngine.connect gives every pooled connection (keep in sync with it):
# the floor must search the index as the service does, or its figures are not the same query.
ENGINE_SESSION = {
    "statement_timeout": str(Settings.model_fields["statement_timeout_ms"].default),
    "jit": "off",
    "hnsw.ef_search": str(Settings.model_fields["hnsw_ef_search"].default),
    "hnsw.iterative_scan": "relaxed_order",
}

_NAMED = re.compile(r"(?<!:):([A-Za-z_][A-Za-z0-9_]*)")

INSERT_ITEMS = """
    INSERT INTO engram_items
        (id, kind, namespace, text, meta, item, confidence, observed_at, tags, source_kind)
    SELECT t.id, t.kind, t.ns, t.text, t.meta::jsonb, t.item::jsonb, t.conf, t.obs::timestamptz,
           ARRAY(SELECT jsonb_array_elements_text(coalesce(t.meta::jsonb->'tags', '[]'))), t.src
    FROM unnest(CAST(:ids AS text[]), CAST(:kinds AS text[]), CAST(:nss AS text[]), CAST(:texts AS text[]),
                CAST(:metas AS text[]), CAST(:items AS text[]), CAST(:conf AS float8[]),
                CAST(:obs AS text[]), CAST(:srcs AS text[]))
         WITH ORDINALITY AS t(id, kind, ns, text, meta, item, conf, obs, src, ord)
    ORDER BY t.ord
    ON CONFLICT (id) DO NOTHING
    RETURNING id
"""

INSERT_VECTORS = (
    "INSERT INTO engram_embeddings (item_id, model, embedding) "
    "SELECT t.id, :model, t.v::vector FROM unnest(CAST(:ids AS text[]), CAST(:vs AS text[])) AS t(id, v)"
)


def keyword_sql(where: str) -> str:
    return f"""
        SELECT {HIT_COLUMNS}, ts_rank_cd(i.tsv, q) AS score
        FROM engram_items i, to_tsquery(CAST(:cfg AS regconfig), :tsq) AS q
        WHERE i.tsv @@ q AND {where}
        ORDER BY score DESC, i.seq
        LIMIT :count OFFSET :offset
    """


def nearest_sql(where: str, *, exact: bool) -> str:
    distance = "(e.embedding <=> CAST(:vec AS vector))"
    order = f"{distance} + 0" if exact else distance
    return f"""
        SELECT e.item_id AS id, {distance} AS distance, i.seq
        FROM engram_embeddings e JOIN engram_items i ON i.id = e.item_id
        WHERE e.model = :model AND {where}
        ORDER BY {order}
        LIMIT :depth
    """


def vector_sql(where: str, *, exact: bool) -> str:
    return f"""
        WITH nearest AS MATERIALIZED ({nearest_sql(where, exact=exact)})
        SELECT {HIT_COLUMNS}, 1 - n.distance AS score
        FROM nearest n JOIN engram_items i ON i.id = n.id
        ORDER BY n.distance, n.seq
        OFFSET :offset
    """


def hybrid_sql(where: str, *, exact: bool) -> str:
    return f"""
        WITH kw AS (
            SELECT i.id, row_number() OVER (ORDER BY ts_rank_cd(i.tsv, q) DESC, i.seq) AS rank
            FROM engram_items i, to_tsquery(CAST(:cfg AS regconfig), :tsq) AS q
            WHERE :tsq <> '' AND i.tsv @@ q AND {where}
            ORDER BY rank
            LIMIT :depth
        ),
        nearest AS MATERIALIZED ({nearest_sql(where, exact=exact)}),
        vec AS (SELECT id, row_number() OVER (ORDER BY distance, seq) AS rank FROM nearest),
        fused AS (
            SELECT id, sum(1.0 / (:k + rank)) AS score
            FROM (SELECT id, rank FROM kw UNION ALL SELECT id, rank FROM vec) AS ranks
            GROUP BY id
        )
        SELECT {HIT_COLUMNS}, f.score, (SELECT count(*) FROM vec) AS vector_depth
        FROM fused f JOIN engram_items i ON i.id = f.id
        ORDER BY f.score DESC, i.seq
        LIMIT :count OFFSET :offset
    """


def list_sql(where: str) -> str:
    return f"""
        SELECT {HIT_COLUMNS}, i.seq FROM engram_items i
        WHERE i.seq > :after AND {where}
        ORDER BY i.seq
        LIMIT :count
    """


GET_SQL = f"SELECT {HIT_COLUMNS} FROM engram_items i WHERE i.id = ANY(:ids) AND TRUE"


def explore_tag_sql(where: str) -> str:
    return f"""
        WITH admitted AS MATERIALIZED (SELECT i.id, i.tags FROM engram_items i WHERE {where}),
        counts AS (
            SELECT v.value, count(*) AS n
            FROM admitted s, LATERAL (SELECT DISTINCT unnest(s.tags) AS value) v
            WHERE v.value IS NOT NULL GROUP BY v.value
        )
        SELECT
            (SELECT count(*) FROM admitted) AS total,
            (SELECT count(*) FROM admitted a WHERE cardinality(a.tags) = 0) AS missing,
            (SELECT count(*) FROM counts) AS distinct_values,
            (SELECT coalesce(json_agg(json_build_object('value', t.value, 'count', t.n)
                                        ORDER BY t.n DESC, t.value COLLATE "C"), '[]')
             FROM (SELECT value, n FROM counts ORDER BY n DESC, value COLLATE "C" LIMIT :limit) t) AS buckets
    """


def positional(sql: str, params: dict[str, Any]) -> tuple[str, list[Any]]:
    """``:name`` parameters (SQLAlchemy style, as the engine writes them) as asyncpg's ``$n``."""
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in order:
            order.append(name)
        return f"${order.index(name) + 1}"

    converted = _NAMED.sub(number, sql)
    return converted, [params[name] for name in order]


async def connect(url: str) -> asyncpg.Connection:
    """One connection set up as the engine sets up its pool's."""
    return await asyncpg.connect(url, server_settings=ENGINE_SESSION)


class RawSql:
    """One asyncpg connection, a cache of prepared statements, and the engine's query logic."""

    def __init__(self, connection: asyncpg.Connection, embedder: WordLlamaEmbedder, ts_config: str = "english"):
        self._db = connection
        self._embedder = embedder
        self._cfg = ts_config
        self._prepared: dict[str, asyncpg.prepared_stmt.PreparedStatement] = {}
        self.phases: dict[str, list[float]] = {"embed": [], "insert_items": [], "insert_vectors_and_commit": []}

    async def run(self, sql: str, params: dict[str, Any]) -> list[asyncpg.Record]:
        converted, args = positional(sql, params)
        statement = self._prepared.get(converted)
        if statement is None:
            statement = await self._db.prepare(converted)
            self._prepared[converted] = statement
        return list(await statement.fetch(*args))

    async def explain(self, sql: str, params: dict[str, Any]) -> str:
        converted, args = positional(sql, params)
        rows = await self._db.fetch("EXPLAIN (ANALYZE, BUFFERS) " + converted, *args)
        return "\n".join(row[0] for row in rows)

    # Writes: the engine's two inserts in one transaction, embedding included.

    async def store_batch(self, batch: list[CorpusItem]) -> int:
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
            await self.run(
                INSERT_VECTORS,
                {
                    "model": self._embedder.name,
                    "ids": ids,
                    "vs": [vector_literal(v) for i, v in zip(batch, vectors, strict=True) if i.id in inserted],
                },
            )
        done = time.perf_counter()
        # Where a batch's time goes: embedding, the items insert (GIN and btree upkeep), the vectors (HNSW).
        self.phases["embed"].append((embedded - start) * 1000)
        self.phases["insert_items"].append((items_done - embedded) * 1000)
        self.phases["insert_vectors_and_commit"].append((done - items_done) * 1000)
        return len(inserted)

    # Reads, as the engine runs them (including its exact-scan fallback).

    def fetch_statement(
        self, query: str, mode: str, request_filter: Filter, vector: list[float] | None, *, exact: bool = False
    ) -> tuple[str, dict[str, Any]]:
        pred = filter_predicate(request_filter)
        keywords = KeywordQuery.parse(query)
        count, offset = 11, 0  # limit 10 + the one row that says whether there is a next page
        base = {**pred.params, "offset": offset}
        if mode == "keyword":
            return keyword_sql(pred.sql()), {**base, "cfg": self._cfg, "tsq": keywords.to_tsquery(), "count": count}
        vec = {"vec": vector_literal(vector or []), "model": self._embedder.name, "depth": offset + count}
        if mode == "vector":
            return vector_sql(pred.sql(), exact=exact), {**base, **vec}
        tsq = keywords.to_tsquery() if not keywords.is_empty else ""
        params = {**base, **vec, "cfg": self._cfg, "tsq": tsq, "count": count, "k": RRF_K}
        return hybrid_sql(pred.sql(), exact=exact), params

    async def fetch(self, query: str, mode: str, request_filter: Filter, limit: int = 10) -> list[str]:
        if mode == "keyword":
            if KeywordQuery.parse(query).is_empty:
                return []
            sql, params = self.fetch_statement(query, mode, request_filter, None)
            return [r["id"] for r in await self.run(sql, params)][:limit]
        (vector,) = await self._embedder.embed([query])
        for exact in (False, True):
            sql, params = self.fetch_statement(query, mode, request_filter, vector, exact=exact)
            rows = await self.run(sql, params)
            if mode == "vector" and (len(rows) == limit + 1 or exact):
                return [r["id"] for r in rows][:limit]
            if mode == "hybrid" and (exact or not rows or rows[0]["vector_depth"] == limit + 1):
                return [r["id"] for r in rows][:limit]
        raise AssertionError("unreachable")

    async def list_page(self, after: int, limit: int = 100) -> tuple[list[str], int | None]:
        pred = filter_predicate(Filter())
        rows = await self.run(list_sql(pred.sql()), {"after": after, "count": limit + 1, **pred.params})
        page = rows[:limit]
        return [r["id"] for r in page], (page[-1]["seq"] if len(rows) > limit else None)

    async def get(self, ids: list[str]) -> list[str]:
        found = {r["id"] for r in await self.run(GET_SQL, {"ids": list(dict.fromkeys(ids))})}
        return [i for i in ids if i in found]

    async def explore_tags(self, limit: int = 20) -> dict[str, Any]:
        pred = filter_predicate(Filter())
        (row,) = await self.run(explore_tag_sql(pred.sql()), {"limit": limit, **pred.params})
        return dict(row)

    async def exact_neighbours(self, vector: list[float], request_filter: Filter, k: int = 10) -> list[str]:
        """Ground truth: the same nearest-neighbour statement with the index defeated (a full, filtered scan)."""
        pred = filter_predicate(request_filter)
        sql = nearest_sql(pred.sql(), exact=True)
        params = {"vec": vector_literal(vector), "model": self._embedder.name, "depth": k, **pred.params}
        return [r["id"] for r in await self.run(sql, params)]

    async def count(self, request_filter: Filter) -> int:
        pred = filter_predicate(request_filter)
        rows = await self.run(f"SELECT count(*) AS n FROM engram_items i WHERE {pred.sql()}", pred.params)
        return int(rows[0]["n"])
