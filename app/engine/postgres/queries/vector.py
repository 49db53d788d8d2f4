"""Vector ranking: through the HNSW index (exactly when it gives up), or by sketches for a filter
that admits few items; the vectors still queued for the index are always ranked exactly beside."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from app.engine.postgres.filters import EXPIRED_IDS, Predicate, SketchKeys
from app.engine.postgres.options import HNSWOptions
from app.engine.postgres.queries.statement import HIT_COLUMNS, Statement, plans_generic
from app.engine.postgres.vectors import query_vector

# Built over the vectors cast to half precision: half the index, faster inserts and walks, for
# recall a wider ef_search buys back; items keep full-precision vectors (docs/tuning.md#hnsw-build).
HNSW_INDEX = "engram_embeddings_hnsw"


def hnsw_index_sql(dimension: int, options: HNSWOptions | None = None) -> str:
    """The vector index, for vectors of ``dimension`` (the cast's type modifier is part of the index)."""
    hnsw = options or HNSWOptions()
    return (
        f"CREATE INDEX {HNSW_INDEX} ON engram_embeddings USING hnsw "
        f"((embedding::halfvec({int(dimension)})) halfvec_cosine_ops) "
        f"WITH (m = {int(hnsw.m)}, ef_construction = {int(hnsw.ef_construction)})"
    )


def nearest_sql(where: str, *, exact: bool, dimension: int, widened: bool = False) -> str:
    """The ``depth`` nearest admitted items, from the index and from the backlog not yet in it.

    Through the index, distances are the index's own (half precision, the expression must
    match it to be used), and the backlog is scanned with the same expression, so the two
    compare; ``exact`` scans every admitted item at full precision instead. The backlog is
    short (ENGRAM_VECTOR_BACKLOG_LIMIT) and empty once the indexer has caught up.
    ``from_index`` is how many rows the index (or the exact scan of the indexed) gave: fewer
    than ``depth`` and the index may have given up on a selective filter, which the
    backlog's rows must not hide (``index_was_enough``). ``widened``: the index's rows wait
    for vector_sql's ``breadth`` (a LATERAL reference to it), so the walk starts once it is set.
    """
    if exact:
        distance = "(e.embedding <=> CAST(:vec AS vector))"
        order = f"{distance} + 0"  # an expression no index provides
    else:
        distance = order = f"(e.embedding::halfvec({int(dimension)}) <=> CAST(:vec AS halfvec({int(dimension)})))"
    indexed = f"""
        SELECT e.item_id AS id, {distance} AS distance, i.seq, true AS indexed
        FROM engram_embeddings e JOIN engram_items i ON i.id = e.item_id
        WHERE e.model = :model AND {where} {"AND b.ef_search IS NOT NULL" if widened else ""}
        ORDER BY {order}
        LIMIT :depth
    """
    if widened:
        indexed = f"SELECT x.* FROM breadth b CROSS JOIN LATERAL ({indexed}) AS x"
    return f"""
        SELECT c.id, c.distance, c.seq, count(*) FILTER (WHERE c.indexed) OVER () AS from_index FROM (
            ({indexed})
            UNION ALL
            (SELECT e.item_id, {distance}, i.seq, false
             FROM engram_vector_backlog e JOIN engram_items i ON i.id = e.item_id
             WHERE e.model = :model AND {where}
             ORDER BY 2
             LIMIT :depth)
        ) AS c
        ORDER BY c.distance, c.seq
        LIMIT :depth
    """


def vector_sql(where: str, *, exact: bool, dimension: int, breadth: int | None = None) -> str:
    """The vector ranking; through the index at ``breadth`` (hnsw.ef_search) when given, else the connection's.

    The breadth is set inside the statement, by ``set_config`` local to its own (implicit)
    transaction, which ends with it: one round trip, where ``SET LOCAL`` in a transaction of
    its own cost two more (docs/tuning.md#breadth-in-the-statement). pgvector reads the setting
    when the walk starts, at the index's first row (tests/engine/postgres: a walk's buffers
    follow the breadth).
    """
    widen = ""
    if breadth is not None:
        widen = f"breadth AS MATERIALIZED (SELECT set_config('hnsw.ef_search', '{int(breadth)}', true) AS ef_search),"
    return f"""
        WITH {widen}
        nearest AS MATERIALIZED ({nearest_sql(where, exact=exact, dimension=dimension, widened=bool(widen))})
        SELECT {HIT_COLUMNS}, n.seq, 1 - n.distance AS score, n.from_index
        FROM nearest n JOIN engram_items i ON i.id = n.id
        ORDER BY n.distance, n.seq
        OFFSET :offset
    """


def sketch_candidates(depth: int, least: int) -> int:
    """How many admitted items sketch_sql ranks again by their vectors, for a page ending at ``depth``:
    ``least`` (selectivity.least_candidates) or four times the page's end."""
    return max(least, 4 * depth)


def sketch_sql(where: str, keys: SketchKeys, *, live: bool = False, pruned: bool = False) -> str:
    """The vector ranking of a filter that admits few items: their sketches, then their vectors.

    Every admitted indexed item's sketch (one bit per dimension) is compared with the query's by
    Hamming distance; the ``candidates`` nearest are ranked again by their full-precision vectors,
    beside the admitted vectors still queued for the index, ranked exactly (a queued vector has
    no sketch yet: the indexer writes both). The sketches are filed under their items' keys
    (migration 0010: one row per tag and per lineage key, in a btree that holds the sketch), so a
    key's sketches are read from consecutive index pages and no table row is visited. ``keys`` is
    the filter's part the postings hold (filters.sketch_keys); unless it is the whole filter
    (``complete``), each admitted sketch's item is read for the rest (``where``); filed under
    several tags, an item is ranked once. A page is never short while enough items match, and
    its distances are exact, as the exact scan's are; it reads every admitted item, so it is for
    filters that admit few (SketchOptions.max_admitted), where the HNSW walk must step past most of
    what it finds. ``live``: a complete key set leaves out the expired items by their ids
    (filters.EXPIRED_IDS, none while nothing expires), still without reading an item.

    ``pruned`` (a complete key set): the first ``sampled`` postings in the index's order say below what
    Hamming distance the nearest ``quantile`` of them lie, and only the postings within it are
    sorted (_pruned_candidates): the same candidates, for the cost of one distance a posting
    instead of a distance and a place in the sort (docs/tuning.md#sketch-pruning).
    """
    postings, rest = "engram_sketch_postings p", ""
    if not keys.complete:
        postings, rest = f"{postings} JOIN engram_items i ON i.id = p.item_id", f" AND {where}"
    elif live:
        rest = f" AND p.item_id NOT IN ({EXPIRED_IDS})"
    once = "DISTINCT ON (p.seq) " if keys.several else ""
    admitted = f"SELECT {once}p.item_id, p.seq, p.sketch FROM {postings} WHERE {keys.predicate.sql()}{rest}"
    nearest_sketches = f"""
                 SELECT a.item_id AS id, a.seq
                 FROM ({admitted}) AS a
                 ORDER BY a.sketch <~> {_QUERY_SKETCH}, a.seq
                 LIMIT :candidates"""
    pruned_ctes = ""
    if pruned and keys.complete:
        pruned_ctes = _pruned_candidates(keys, rest, admitted)
        nearest_sketches = "SELECT id, seq FROM pruned"
    return candidates_ranked_sql(nearest_sketches, where, ctes=pruned_ctes)


def candidates_ranked_sql(candidates: str, where: str, *, ctes: str = "", alive: str = "") -> str:
    """The ranking of ``candidates`` (a query of admitted items' id and seq) by their full-precision
    vectors, beside the admitted vectors still queued for the index (``where``; a queued vector has
    no sketch yet); the first :depth by distance, ties by seq, from :offset. ``ctes`` come before
    (ending in a comma); ``alive`` tests each candidate ``c`` further."""
    return f"""
        WITH {ctes}nearest AS MATERIALIZED (
            (SELECT c.id, c.seq, e.embedding <=> CAST(:vec AS vector) AS distance
             FROM ({candidates}
             ) AS c
             JOIN engram_embeddings e ON e.item_id = c.id AND e.model = :model{alive})
            UNION ALL
            (SELECT b.item_id, i.seq, b.embedding <=> CAST(:vec AS vector)
             FROM engram_vector_backlog b JOIN engram_items i ON i.id = b.item_id
             WHERE b.model = :model AND {where}
             ORDER BY 3, 2
             LIMIT :depth)
            ORDER BY distance, seq
            LIMIT :depth
        )
        SELECT {HIT_COLUMNS}, n.seq, 1 - n.distance AS score
        FROM nearest n JOIN engram_items i ON i.id = n.id
        ORDER BY n.distance, n.seq
        OFFSET :offset
    """


_QUERY_SKETCH = "binary_quantize(CAST(:vec AS vector))"


def _pruned_candidates(keys: SketchKeys, rest: str, admitted: str) -> str:
    """CTEs ending in ``pruned(id, seq)``: sketch_sql's ``candidates`` nearest admitted sketches, found
    by sorting only those within the Hamming distance (``bound``) below which the ``quantile`` nearest
    of the first ``sampled`` postings lie. Exactly the nearest: unless at least ``candidates`` lie
    within it (every one nearer than the last of them is then within it too), all are sorted."""
    return f"""
        bound AS MATERIALIZED (
            SELECT percentile_disc(CAST(:quantile AS float8)) WITHIN GROUP (ORDER BY s.d) AS d
            FROM (
                SELECT p.sketch <~> {_QUERY_SKETCH} AS d FROM engram_sketch_postings p
                WHERE {keys.predicate.sql()}{rest}
                LIMIT :sampled
            ) AS s
        ),
        within AS MATERIALIZED (
            SELECT a.item_id AS id, a.seq
            FROM ({admitted} AND p.sketch <~> {_QUERY_SKETCH} <= (SELECT d FROM bound)) AS a
            ORDER BY a.sketch <~> {_QUERY_SKETCH}, a.seq
            LIMIT :candidates
        ),
        pruned AS (
            SELECT id, seq FROM within WHERE (SELECT count(*) FROM within) >= :candidates
            UNION ALL
            (SELECT a.item_id, a.seq FROM ({admitted}) AS a
             WHERE (SELECT count(*) FROM within) < :candidates
             ORDER BY a.sketch <~> {_QUERY_SKETCH}, a.seq
             LIMIT :candidates)
        ),"""


def search_breadth(pred: Predicate, *, exact: bool, filtered: int | None) -> int | None:
    """The HNSW breadth of a search through the index under ``pred`` (vector_sql's ``breadth``):
    ``filtered`` when it filters, None (the connection's own) otherwise, or for an exact scan,
    which walks no index."""
    return None if exact or pred.admits_all else filtered


def index_was_enough(rows: Sequence[Mapping[str, Any]], depth: int) -> bool:
    """Whether a vector statement through the index answered for certain: the index gave all ``depth``
    rows. Short, it may have given up on a selective filter (hnsw.max_scan_tuples), and only the exact
    scan says what really matches, however many rows the vector backlog added."""
    return bool(rows) and rows[0]["from_index"] >= depth


def plan_vector(
    vector: Sequence[float] | np.ndarray,
    pred: Predicate,
    *,
    model: str,
    dimension: int,
    offset: int,
    count: int,
    exact: bool,
    options: HNSWOptions,
) -> Statement:
    """``count`` rows of the vector ranking under ``pred`` from ``offset``, through the index (at the
    filtered breadth when it filters) or, ``exact``, by a scan of every admitted vector: id, kind,
    text, meta, confidence, seq, score and ``from_index`` (index_was_enough)."""
    breadth = search_breadth(pred, exact=exact, filtered=options.ef_search_filtered)
    params = {
        "vec": query_vector(vector),
        "model": model,
        "depth": offset + count,
        "offset": offset,
        **pred.params,
    }
    sql = vector_sql(pred.sql(), exact=exact, dimension=dimension, breadth=breadth)
    return Statement.bind(sql, params, generic_plan=plans_generic(pred))


def plan_sketch(
    vector: Sequence[float] | np.ndarray,
    pred: Predicate,
    keys: SketchKeys,
    *,
    model: str,
    offset: int,
    count: int,
    candidates: int,
    admitted: float | None = None,
    sampled: int = 0,
    margin: float = 1.0,
) -> Statement:
    """``count`` rows of the vector ranking under ``pred`` from ``offset`` by sketches (sketch_sql),
    for a filter that admits few items; ``keys`` is the filter's part the postings hold, ``candidates``
    the least number of sketch-nearest items ranked again (selectivity.least_candidates).
    ``admitted``: the statistics' bound on the items a complete key set admits; the candidates are
    then looked for within the distance of ``margin`` times their share of it in the first
    ``sampled`` postings (sketch_sql's ``pruned``; selectivity.sampled_bound)."""
    params = {
        "vec": query_vector(vector),
        "model": model,
        "depth": offset + count,
        "candidates": sketch_candidates(offset + count, candidates),
        "offset": offset,
        **pred.params,
        **keys.predicate.params,
    }
    pruned = admitted is not None and sampled > 0 and keys.complete
    if pruned:
        params |= {"quantile": min(1.0, margin * params["candidates"] / max(admitted, 1.0)), "sampled": sampled}
    return Statement.bind(sketch_sql(pred.sql(), keys, live=pred.live, pruned=pruned), params)
