"""Keyword ranking: BM25-like scores over the tsvector, bounded to the rarest terms' matches."""

from __future__ import annotations

from app.engine.keywords import MAX_TERMS, KeywordQuery
from app.engine.postgres.filters import Predicate
from app.engine.postgres.filters import live as live_items
from app.engine.postgres.options import KeywordOptions
from app.engine.postgres.queries.statement import HIT_COLUMNS, Statement, plans_generic
from app.engine.postgres.queries.statistics import TermStatistics


def keyword_params(
    ts_config: str, keywords: KeywordQuery, depth: int, statistics: TermStatistics, options: KeywordOptions
) -> dict[str, object]:
    """The parameters of ``keyword_ctes`` for a page ending at ``depth``."""
    return {
        "cfg": ts_config,
        "elems": statistics.elems,
        "freqs": statistics.freqs,
        "items": statistics.items,
        "operands": keywords.operands(),
        "words": list(keywords.texts),
        "depth": depth,
        "budget": options.budget,
        "scored": options.scored,
        "middle": max(options.budget, options.middle),
        # Never fewer than the pool, so a page is never short.
        "topup": max(options.budget, options.pool),
        "pool": options.pool,
        "settled": options.settled,
        "ranked": max(depth, options.pool),
    }


# Each query operand (a word, a run such as a file name, or a phrase), its tsquery and an
# estimate of how many items hold it, from TermStatistics (a lexeme not listed is below the
# least frequent, estimated at half of it, as the planner does). Without statistics every
# operand counts as rare. A phrase is as rare as its rarest word. ``idf`` is BM25's.
# Only the first MAX_TERMS operands with a lexeme count (KeywordQuery.parse reads more): which
# words are stop words is the configuration's. An operand's text has a lexeme exactly when its
# tsquery has one (the same parser and dictionaries), and only those reach to_tsquery, which
# sends the client a notice for every operand it finds empty.
_KEYWORD_TERMS = f"""
        stats AS MATERIALIZED (
            SELECT CAST(CAST(:elems AS text) AS text[]) AS elems, CAST(CAST(:freqs AS text) AS float4[]) AS freqs
        ),
        total AS (SELECT CAST(:items AS float8) AS n),
        terms AS (
            SELECT o.ord, to_tsquery(CAST(:cfg AS regconfig), o.operand) AS tq, d.df,
                   ln(1 + (total.n - d.df + 0.5) / (d.df + 0.5)) AS idf
            FROM (
                SELECT x.ord, x.operand, v.lexemes
                FROM unnest(CAST(:operands AS text[]), CAST(:words AS text[])) WITH ORDINALITY AS x(operand, words, ord)
                CROSS JOIN LATERAL (
                    SELECT tsvector_to_array(to_tsvector(CAST(:cfg AS regconfig), x.words)) AS lexemes
                ) AS v
                WHERE cardinality(v.lexemes) > 0
                ORDER BY x.ord
                LIMIT {MAX_TERMS}
            ) AS o
            CROSS JOIN total
            CROSS JOIN LATERAL (
                SELECT coalesce(min(coalesce(
                           s.freqs[array_position(s.elems, l)], s.freqs[array_length(s.elems, 1) + 1] / 2
                       )), 0) * total.n AS df
                FROM unnest(o.lexemes) AS l
                LEFT JOIN stats s ON true
            ) AS d
        ),
        ranked_terms AS (
            SELECT tq, k, running, running <= :budget OR k = 1 AS is_essential
            FROM (
                SELECT tq, sum(df) OVER (ORDER BY df, ord) AS running, row_number() OVER (ORDER BY df, ord) AS k
                FROM terms
            ) AS r
        ),
        essential AS (
            SELECT CAST(string_agg('(' || tq::text || ')', ' | ') AS tsquery) AS q
            FROM ranked_terms WHERE is_essential
        ),
        middle AS (
            SELECT CAST(string_agg('(' || tq::text || ')', ' | ') AS tsquery) AS q
            FROM ranked_terms WHERE NOT is_essential AND running <= :middle
        ),
        commonest AS (
            SELECT CAST(string_agg('(' || tq::text || ')', ' | ') AS tsquery) AS q
            FROM ranked_terms WHERE NOT is_essential AND running > :middle
        )
"""


def _score(keywords: KeywordQuery) -> str:
    """An item's relevance (see keyword_ctes) as one expression over the ``weights`` arrays.

    Written out per operand, in the order of ``terms``, so its sum is the one a correlated
    ``(SELECT sum(t.idf * ts_rank(...)) FROM terms t WHERE i.tsv @@ t.tq)`` gave, to the bit;
    past the arrays' end (stop words leave them shorter than the operands) a term adds
    nothing. Rescanning a correlated subquery for every row cost more, and one copy of the
    expression over the pool's candidates plans faster than a copy in each CTE that gathers them
    (docs/tuning.md#keyword-score).
    """
    return " + ".join(
        f"CASE WHEN i.tsv @@ w.tq[{k}] THEN w.idf[{k}] * ts_rank(i.tsv, w.tq[{k}]) ELSE 0 END"
        for k in range(1, min(len(keywords.texts), MAX_TERMS) + 1)
    )


# The core of an unfiltered ranking, or of a filter that admits so many items that its matches too
# run past the budget (KeywordOptions.broad): up to ``scored`` matches of the essential operands,
# best placed first: those holding two essential operands, then one and another operand, then the
# rest. An item holding more of the query's words outranks one holding fewer unless it repeats
# them, so when the matches run past what is scored these are the ones to keep; the bitmap heap
# scan otherwise keeps the first in table order. The pairs read only the essential operands'
# posting lists; each tier's bitmap excludes the tiers before it, so no row is read twice.
def _core_held_first(admitted: str | None) -> str:
    """The core of a ranking held first (above); ``admitted``, when given, is what a row must also meet
    (the filter, or only the live items)."""
    also = f" AND {admitted}" if admitted else ""
    return f"""
        pairs AS (
            SELECT CAST(string_agg('(' || a.tq::text || ') & (' || b.tq::text || ')', ' | ') AS tsquery) AS q
            FROM ranked_terms a JOIN ranked_terms b ON a.k < b.k
            WHERE a.is_essential AND b.is_essential
        ),
        others AS (
            SELECT CAST(string_agg('(' || tq::text || ')', ' | ') AS tsquery) AS q
            FROM ranked_terms WHERE NOT is_essential
        ),
        core AS (
            SELECT * FROM (
                SELECT i.id, i.seq, i.tsv FROM engram_items i, pairs p
                WHERE p.q IS NOT NULL AND i.tsv @@ p.q{also}
                UNION ALL
                SELECT i.id, i.seq, i.tsv FROM engram_items i, essential e, others o, pairs p
                WHERE o.q IS NOT NULL
                  AND i.tsv @@ CASE WHEN p.q IS NULL THEN e.q && o.q ELSE e.q && o.q && !! p.q END{also}
                UNION ALL
                SELECT i.id, i.seq, i.tsv FROM engram_items i, essential e, others o, pairs p
                WHERE i.tsv @@ CASE WHEN o.q IS NULL AND p.q IS NULL THEN e.q
                                    WHEN o.q IS NULL THEN e.q && !! p.q
                                    WHEN p.q IS NULL THEN e.q && !! o.q
                                    ELSE e.q && !! (o.q || p.q) END{also}
            ) AS held
            LIMIT :scored
        )"""


def _core_in_table_order(where: str) -> str:
    """The core of a filtered ranking: the admitted matches of the essential operands, up to ``budget``."""
    return f"""
        core AS (
            SELECT i.id, i.seq, i.tsv FROM engram_items i, essential e
            WHERE i.tsv @@ e.q AND {where}
            LIMIT :budget
        )"""


def keyword_ctes(
    where: str,
    keywords: KeywordQuery,
    *,
    depth: int,
    admits_all: bool,
    pool: int,
    live: bool = False,
    broad: bool = False,
) -> str:
    """CTEs ending in ``kw(id, seq, score, rank)``: matches best first, in one order whatever the page.

    Relevance is BM25-like: the sum, over the query operands an item holds, of the
    operand's ``idf`` times ``ts_rank`` (which saturates with repeats). Scoring every
    match is linear in the matches, tens of thousands for a question full of common
    words, so only the matches of the rarest operands (``essential``, up to ``budget``
    estimated rows) are scored: an item holding none of them can only score through
    common, low-``idf`` operands. When they are fewer than the pool (a selective filter,
    say), up to ``budget`` other matches are scored too, so a page is never short and a
    filtered query is ranked over all its matches when they are few: first those of the
    operands up to ``middle`` estimated rows, then, only if still short, those of the
    commonest, read through the filter's own index or the table, never a bitmap of their
    posting lists (``IS TRUE`` keeps ``@@`` from being an index condition): ORing them in
    the tsv index took ~20 ms at 100k for a few thousand admitted items, and a filter that
    leaves the pool short is a narrow one (KeywordOptions.middle); once the rarer operands'
    matches fill the first ``settled`` ranks, only as many as the pool lacks (KeywordOptions.settled).
    At most three times the budget rows are read and scored. Without a filter (``admits_all``) the rarest operands'
    matches often run past the budget, and which of them are scored decides the page: at
    most ``scored`` are, those holding more of the operands first (``_core_held_first``); so too
    under a ``broad`` filter, one the statistics bound to many items (KeywordOptions.broad). The
    best ``pool`` lead every ranking; a page ending past the pool continues with the
    other matches by ``ts_rank``, scaled below the pool's lowest score, so cursors neither
    skip nor repeat.
    Parameters: cfg, elems, freqs, items, operands, words, budget, scored, middle, topup, pool,
    settled, ranked (see ``keyword_params``).
    """
    if admits_all:
        core = _core_held_first(live_items() if live else None)
    elif broad:
        core = _core_held_first(where)
    else:
        core = _core_in_table_order(where)
    ranking = f"""{_KEYWORD_TERMS},
        weights AS (SELECT array_agg(idf ORDER BY ord) AS idf, array_agg(tq ORDER BY ord) AS tq FROM terms),{core},
        extra_middle AS (
            SELECT i.id, i.seq, i.tsv FROM engram_items i, essential e, middle m
            WHERE (SELECT count(*) FROM core) < :pool AND i.tsv @@ m.q AND NOT (i.tsv @@ e.q) AND {where}
            LIMIT :topup
        ),
        held AS (SELECT (SELECT count(*) FROM core) + (SELECT count(*) FROM extra_middle) AS n),
        extra AS (
            SELECT i.id, i.seq, i.tsv
            FROM engram_items i, essential e, middle m, commonest c
            -- Both tests once, before any row is read: without commonest terms (a question of
            -- rare words, or only stop words) a filter's items were otherwise all read for nothing.
            WHERE (SELECT n FROM held) < :pool AND (SELECT q IS NOT NULL FROM commonest)
              AND (i.tsv @@ c.q) IS TRUE
              AND NOT (i.tsv @@ e.q) AND NOT coalesce(i.tsv @@ m.q, false) AND {where}
            LIMIT (SELECT CASE WHEN n >= :settled THEN greatest(:pool - n, 0) ELSE :topup END FROM held)
        ),
        pool AS (
            SELECT i.id, i.seq, {_score(keywords)} AS score
            FROM (SELECT * FROM core UNION ALL SELECT * FROM extra_middle UNION ALL SELECT * FROM extra) AS i, weights w
            ORDER BY score DESC, i.seq
            LIMIT :pool
        )"""
    if depth <= pool:
        return f"""{ranking},
        kw AS (SELECT id, seq, score, row_number() OVER (ORDER BY score DESC, seq) AS rank FROM pool)
        """
    return f"""{ranking},
        -- The operands terms keeps, ORed: a deep page matches what the pool's operands match.
        whole AS (SELECT CAST(string_agg('(' || tq::text || ')', ' | ' ORDER BY ord) AS tsquery) AS q FROM terms),
        rest AS (
            SELECT i.id, i.seq, ts_rank(i.tsv, w.q) AS r FROM engram_items i, whole w
            WHERE i.tsv @@ w.q AND {where} AND i.id NOT IN (SELECT id FROM pool)
            ORDER BY r DESC, i.seq
            LIMIT :ranked
        ),
        kw AS (
            SELECT id, seq, score, row_number() OVER (ORDER BY in_pool DESC, score DESC, seq) AS rank
            FROM (
                SELECT id, seq, score, true AS in_pool FROM pool
                UNION ALL
                SELECT id, seq, r * (SELECT min(score) FROM pool) / nullif((SELECT max(r) FROM rest), 0), false
                FROM rest
            ) AS ranked
        )
    """


def keyword_sql(
    pred: Predicate, keywords: KeywordQuery, *, depth: int, options: KeywordOptions, broad: bool = False
) -> str:
    """A keyword page under ``pred``, written as the terms index serves it beside the words;
    ``broad``: ``pred`` admits many items (keyword_ctes)."""
    where = pred.sql(beside_words=True)
    ctes = keyword_ctes(
        where, keywords, depth=depth, admits_all=pred.admits_all, pool=options.pool, live=pred.live, broad=broad
    )
    return f"""
        WITH {ctes}
        SELECT {HIT_COLUMNS}, i.seq, page.score
        FROM (SELECT id, score, rank FROM kw ORDER BY rank LIMIT :count OFFSET :offset) AS page
        JOIN engram_items i ON i.id = page.id
        ORDER BY page.rank
    """


def plan_keyword(
    keywords: KeywordQuery,
    pred: Predicate,
    *,
    offset: int,
    count: int,
    statistics: TermStatistics,
    ts_config: str,
    options: KeywordOptions,
    broad: bool = False,
) -> Statement:
    """``count`` rows of the keyword ranking under ``pred`` from ``offset``: id, kind, text, meta,
    confidence, seq and score. Unfiltered, on the generic plan (plans_generic). ``broad``: the
    statistics bound ``pred`` to many items (selectivity.admits_many), so its matches are held first
    as a ranking without a filter's are."""
    depth = offset + count
    params = {
        **keyword_params(ts_config, keywords, depth, statistics, options),
        "count": count,
        "offset": offset,
        **pred.params,
    }
    return Statement.bind(
        keyword_sql(pred, keywords, depth=depth, options=options, broad=broad), params, generic_plan=plans_generic(pred)
    )
