"""Every SQL statement of the PostgreSQL engine, as text.

Kept apart from the engine so the benchmark's raw-SQL baseline (bench/rawsql.py)
sends exactly these statements: the floor is measured on the same SQL, by
construction. Filters arrive as a predicate over ``engram_items AS i``
(app.engine.postgres.filters).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

_NAMED = re.compile(r"(?<!:):([A-Za-z_][A-Za-z0-9_]*)")


@functools.lru_cache(maxsize=512)
def _numbered(sql: str) -> tuple[str, tuple[str, ...]]:
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return _NAMED.sub(number, sql), tuple(names)


def positional(sql: str, params: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """A statement written with ``:name`` parameters, as asyncpg's ``$n`` and their values in order."""
    numbered, names = _numbered(sql)
    return numbered, [params[name] for name in names]


RRF_K = 60
# Keyword ranking: ts_rank (cheap) orders every match, ts_rank_cd (cover density, ~5x the
# cost) re-orders the best KEYWORD_POOL. bench/analysis.md (10k, item 2): keyword p50
# 11.8 -> 4.4 ms, p95 33 -> 10 ms, recall@10 0.976 against ts_rank_cd over every match.
KEYWORD_POOL = 300
HIT_COLUMNS = "i.id, i.kind, i.text, i.meta, i.confidence"

# The value a facet counts under, per item (contract §6); NULL means missing.
FACET_VALUE = {
    "kind": "i.kind",
    "source": "i.source_kind",
    "source_id": "i.meta->'source'->>'id'",
    "workspace": "i.meta->>'workspace'",
    "folder": "i.meta->>'folder'",
    "file_path": "i.meta->>'file_path'",
    "language": "i.meta->>'language'",
    "repo": "i.meta->>'repo'",
    "url": "i.meta->>'url'",
    "thread": "i.meta->>'thread_id'",
    "agent": "i.meta->>'agent_id'",
    "tool_call": "i.meta->'tool_call'->>'name'",
    "namespace": "CASE WHEN i.namespace = '' THEN 'root' ELSE i.namespace END",
}

# Overlapping batches written at once wait on each other's new rows in batch order,
# and two batches in opposite orders deadlock. One lock per id, taken in one global
# order first, makes the later batch wait for the earlier instead.
LOCK_IDS = (
    "SELECT pg_advisory_xact_lock(hashtext('engram_items'), h) FROM "
    "(SELECT DISTINCT hashtext(k) AS h FROM unnest(CAST(:ids AS text[])) AS k ORDER BY h) AS locks"
)

HELD_IDS = "SELECT id FROM engram_items WHERE id = ANY(:ids)"

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


def delete_sql(where: str) -> str:
    return f"WITH gone AS (DELETE FROM engram_items i WHERE {where} RETURNING 1) SELECT count(*) FROM gone"


def keyword_params(ts_config: str, tsquery: str, depth: int) -> dict[str, object]:
    """The parameters of ``keyword_ctes`` for a page ending at ``depth``."""
    return {"cfg": ts_config, "tsq": tsquery, "depth": depth, "pool": KEYWORD_POOL, "ranked": max(depth, KEYWORD_POOL)}


def keyword_ctes(where: str, *, depth: int) -> str:
    """CTEs ending in ``kw(id, seq, score, rank)``: matches best first, in one order whatever the page.

    The pool (the best KEYWORD_POOL by ``ts_rank``) is ordered by ``ts_rank_cd``; the
    rest follow by ``ts_rank``, which only a page ending past the pool needs. The pool
    does not depend on the page, so cursors neither skip nor repeat; past the pool
    ``ts_rank`` is scaled below the pool's lowest score so scores fall monotonically.
    Parameters: cfg, tsq, pool, ranked (see ``keyword_params``).
    """
    matches = f"""
            SELECT i.id, i.seq, i.tsv, ts_rank(i.tsv, q) AS r
            FROM engram_items i, to_tsquery(CAST(:cfg AS regconfig), :tsq) AS q
            WHERE i.tsv @@ q AND {where}
            ORDER BY r DESC, i.seq
    """
    cover_density = "ts_rank_cd(tsv, to_tsquery(CAST(:cfg AS regconfig), :tsq))"
    if depth <= KEYWORD_POOL:
        return f"""
        pool AS ({matches} LIMIT :pool),
        kw AS (
            SELECT id, seq, score, row_number() OVER (ORDER BY score DESC, seq) AS rank
            FROM (SELECT id, seq, {cover_density} AS score FROM pool) AS scored
        )
        """
    return f"""
        ranked AS ({matches} LIMIT :ranked),
        pooled AS (
            SELECT id, seq, r, tsv, row_number() OVER (ORDER BY r DESC, seq) <= :pool AS in_pool FROM ranked
        ),
        scored AS (
            SELECT id, seq, r, in_pool, CASE WHEN in_pool THEN {cover_density} END AS cd FROM pooled
        ),
        keyword AS (
            SELECT id, seq, in_pool,
                   CASE WHEN in_pool THEN cd
                        ELSE r * (min(cd) OVER ()) / nullif(max(r) FILTER (WHERE NOT in_pool) OVER (), 0)
                   END AS score
            FROM scored
        ),
        kw AS (
            SELECT id, seq, score, row_number() OVER (ORDER BY in_pool DESC, score DESC, seq) AS rank
            FROM keyword
        )
    """


def keyword_sql(where: str, *, depth: int) -> str:
    return f"""
        WITH {keyword_ctes(where, depth=depth)}
        SELECT {HIT_COLUMNS}, page.score
        FROM (SELECT id, score, rank FROM kw ORDER BY rank LIMIT :count OFFSET :offset) AS page
        JOIN engram_items i ON i.id = page.id
        ORDER BY page.rank
    """


def nearest_sql(where: str, *, exact: bool) -> str:
    """The ``depth`` nearest admitted items; ``exact`` defeats the index (a full, filtered scan)."""
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


def hybrid_sql(where: str, *, exact: bool, depth: int) -> str:
    """Reciprocal rank fusion of the keyword and vector rankings, each cut at ``depth``, in one statement."""
    return f"""
        WITH {keyword_ctes(where, depth=depth)},
        nearest AS MATERIALIZED ({nearest_sql(where, exact=exact)}),
        vec AS (SELECT id, row_number() OVER (ORDER BY distance, seq) AS rank FROM nearest),
        fused AS (
            SELECT id, sum(1.0 / (:k + rank)) AS score
            FROM (SELECT id, rank FROM kw WHERE rank <= :depth UNION ALL SELECT id, rank FROM vec) AS ranks
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


def get_sql(where: str) -> str:
    return f"SELECT {HIT_COLUMNS} FROM engram_items i WHERE i.id = ANY(:ids) AND {where}"


def explore_sql(facet: str, where: str) -> str:
    """One aggregation: total, missing, distinct values and the top ``limit`` buckets (contract §6)."""
    if facet == "tag":
        admitted_cols, missing = "i.id, i.tags", "cardinality(a.tags) = 0"
        source = "admitted s, LATERAL (SELECT DISTINCT unnest(s.tags) AS value) v"
    else:
        admitted_cols = f"i.id, {FACET_VALUE[facet]} AS value"
        missing = "a.value IS NULL"
        source = "admitted v"
    return f"""
        WITH admitted AS MATERIALIZED (SELECT {admitted_cols} FROM engram_items i WHERE {where}),
        counts AS (
            SELECT v.value, count(*) AS n FROM {source} WHERE v.value IS NOT NULL GROUP BY v.value
        )
        SELECT
            (SELECT count(*) FROM admitted) AS total,
            (SELECT count(*) FROM admitted a WHERE {missing}) AS missing,
            (SELECT count(*) FROM counts) AS distinct_values,
            (SELECT coalesce(json_agg(json_build_object('value', t.value, 'count', t.n)
                                        ORDER BY t.n DESC, t.value COLLATE "C"), '[]')
             FROM (SELECT value, n FROM counts ORDER BY n DESC, value COLLATE "C" LIMIT :limit) t) AS buckets
    """
