"""Every SQL statement of the PostgreSQL engine, as text.

Kept apart from the engine so the benchmark's raw-SQL baseline (bench/rawsql.py)
sends exactly these statements: the floor is measured on the same SQL, by
construction. Filters arrive as a predicate over ``engram_items AS i``
(app.engine.postgres.filters).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.engine.keywords import MAX_TERMS, KeywordQuery
from app.engine.postgres.filters import Predicate, SketchKeys

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


# Keyword ranking is BM25-like (see keyword_ctes). Only the matches of the query's rarest
# terms, up to KEYWORD_BUDGET estimated rows, are scored; the best KEYWORD_POOL of them
# (topped up from the other matches when fewer) lead every ranking. At 100k (bench/HISTORY.md,
# raw SQL, four runs): p50 62-74 -> ~15 ms and p95 143-155 -> 25-27 ms against scoring every
# match, recall@10 0.90 unfiltered and 0.98 filtered; budgets 2,000 / 3,000 / 4,000 measured recall 0.80 / 0.88 / 0.93.
KEYWORD_POOL = 300
KEYWORD_BUDGET = 4_000
# Without a filter, at most KEYWORD_SCORED of those matches are scored, those holding more of the
# query's operands first (_CORE_HELD_FIRST). At 100k (raw SQL, 200 questions, best of two, eighth
# session) unfiltered p50 / p95 / recall@10 against scoring every match: 16.1 / 24.3 ms / 0.897
# for the first 4,000 in table order -> 13.0 / 16.5 / 0.901; scoring 1,000 / 2,000 / 3,000 that
# way gave 11.5 / 14.5 / 0.872, 14.8 / 19.2 / 0.907 and 17.4 / 24.1 / 0.913. At 10k (the first
# 10,000 of those items) the pairs of essential operands are what keeps recall: 1.000 before and
# with them (p50 / p95 11.8 / 22.1 -> 10.9 / 18.3 ms), 0.848 with only "holds another operand".
# With a filter the admitted matches are mostly fewer than the budget and the order cost more
# than it saved: reading the other operands' posting lists took keyword/tag p50 11.3 -> 14.2 ms.
KEYWORD_SCORED = 1_500
# A query whose rarest terms match fewer than the pool (a selective filter) is topped up from
# the terms up to KEYWORD_MIDDLE estimated rows first, and from the commonest only if still short:
# a GIN bitmap costs its terms' posting lists. At 100k (200 questions twice, raw SQL, interleaved
# with the two-level statement, fourth session): keyword p95 with a tag 18.6 -> 14.4 ms, with a
# subtree 20.2 -> 17.7 ms, unfiltered 18.7 -> 16.5; every page the same as before (recall@10
# against scoring every match 0.991 / 0.982 filtered); a middle of 12,000 measured 16.6 / 17.3 ms.
# The commonest are then read through the filter, not the tsv index (eighth session, 100 questions
# twice, same pages): with the rarest tag (1,915 items) p50 / p95 11.3 / 26.2 -> 10.1 / 17.0 ms,
# under the smallest namespace subtree (649) 13.6 / 25.0 -> 9.8 / 13.7; the bench's filters within
# noise (their middle words mostly fill the pool).
KEYWORD_MIDDLE = 20_000
# Once the rarer terms' matches fill the first KEYWORD_SETTLED ranks, the commonest terms' matches
# only fill the pool's tail, and only as many are read (in table order) as the pool lacks, not up
# to the budget: a filter of a few thousand items was otherwise read whole for the one common word
# of a short question (28.7 ms at 100k). At 100k (raw SQL, 200 questions, best of two, two runs,
# ninth session) keyword p95 with a tag 18.5 / 19.0 -> 16.9 / 16.8 ms, with a subtree 18.1 / 17.8 ->
# 16.0 / 16.5, p50 -0.3 to -0.5, unfiltered the same; recall@10 against every match 0.991 -> 0.991
# and 0.982 -> 0.981, @100 0.957 -> 0.953 and 0.946 -> 0.935 (the rankings of 14 and 25 questions
# of 200 change, their first ten ids 1.000 and 0.999 the same).
KEYWORD_SETTLED = 100
HIT_COLUMNS = "i.id, i.kind, i.text, i.meta, i.confidence"

# The service's sessions say who they are, so `engram reembed` can tell a running service is there.
APPLICATION_NAME = "engram"
SERVICE_SESSIONS = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND application_name = :name AND pid <> pg_backend_pid()"
)

# The value a facet counts under, per item (contract §6); NULL means missing. Migration 0011's
# triggers keep the counts by the same values, frozen there (tests/engine/test_facet_counts.py).
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
# INSERT_ITEMS's parameters, one array each, in the order of engine.ItemRow's fields.
INSERT_ITEMS_COLUMNS = ("ids", "kinds", "nss", "texts", "metas", "items", "conf", "obs", "srcs")

# Which of a batch's ids are held already: their items are not embedded again.
HELD_IDS = "SELECT id FROM engram_items WHERE id = ANY(CAST(:ids AS text[]))"

# Each thread's latest :before items' texts, oldest first (engram_items_thread, migration 0012):
# what a new item of the thread is embedded after (app/engine/context.py).
THREAD_LATEST = """
    SELECT t.ns, t.thread, ARRAY(
        SELECT l.text FROM (
            SELECT b.text, b.seq FROM engram_items b
            WHERE b.namespace = t.ns AND b.meta ? 'thread_id' AND b.meta->>'thread_id' = t.thread
            ORDER BY b.seq DESC LIMIT :before
        ) AS l ORDER BY l.seq
    ) AS texts
    FROM unnest(CAST(:nss AS text[]), CAST(:threads AS text[])) AS t(ns, thread)
"""

# A write queues its vectors in the backlog (migration 0004), unindexed, and says how many wait
# there now, its own included (the count does not see the rows this statement adds); the indexer
# (app/engine/postgres/indexer.py) moves them into engram_embeddings and so into the HNSW index.
QUEUE_VECTORS = """
    WITH queued AS (
        INSERT INTO engram_vector_backlog (item_id, model, embedding)
        SELECT t.id, :model, t.v FROM unnest(CAST(:ids AS text[]), CAST(:vs AS vector[])) AS t(id, v)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM queued) + (SELECT count(*) FROM engram_vector_backlog) AS backlog
"""

BACKLOG_SIZE = "SELECT count(*) FROM engram_vector_backlog"

# The backlog is a queue: every move deletes what a write inserted, and until a vacuum the table
# keeps the pages of every vector since (~1.1 kB a vector), which the claim, the count and each
# search's exact part over the backlog read. Autovacuum comes by once a minute at most; the
# indexer vacuums it itself when it has emptied it (indexer.VACUUM_AFTER).
VACUUM_BACKLOG = "VACUUM engram_vector_backlog"

# Tables are locked items, then backlog, then embeddings, then sketch postings, by every writer and every statement that
# locks whole tables (reembed, TRUNCATE): the indexer's claim reads the backlog before the items,
# so it takes its lock on the items first, the weakest there is (what FOR KEY SHARE takes anyway).
INDEXER_LOCK_ORDER = "LOCK TABLE engram_items IN ROW SHARE MODE"

# A move need not be durable the moment it commits: were the server to crash before its WAL
# reached the disk, the move would be undone whole and its vectors still queued, to be moved
# again (the write that queued them committed synchronously; a later synchronous commit, a
# forget say, flushes the move's WAL before its own). Not waiting for that flush (kept 100k
# store grown by the service, 2,000 vectors queued again and indexed in steps of 100, four
# passes each way alternated, eighteenth session): one connection 3.32 -> 3.08 s median (~12 ms
# a step, what catch_up costs a write beyond the backlog limit), two 1.37 -> 1.32 s. LOCAL: the
# connection goes back to the pool, to writers, as it came.
MOVE_COMMITS_ASYNC = "SET LOCAL synchronous_commit = off"

# The oldest queued vectors no other indexer holds, whose items no forget is deleting: both
# locked until the move commits, neither ever waited for (SKIP LOCKED), so an indexer is never
# part of a deadlock. Holding the item (KEY SHARE) is what lets the move's foreign-key check on
# it pass without waiting; a vector whose item is being deleted is left to go with it.
# How many: at most :n, and no more than a worker's share of what its indexer's workers do not
# hold yet (:held of the queue, :workers of them), but at least :least. So the last vectors of a
# burst are split among the workers instead of left to one while the others idle (indexer.Share).
CLAIM_BACKLOG = """
    WITH oldest AS (
        SELECT b.item_id, b.model FROM engram_vector_backlog b
        ORDER BY b.queued
        LIMIT CAST(greatest(:least, least(:n, ceil(
            ((SELECT count(*) FROM engram_vector_backlog) - :held) / CAST(:workers AS numeric)
        ))) AS bigint)
        FOR UPDATE SKIP LOCKED
    )
    SELECT o.item_id, o.model FROM oldest o JOIN engram_items i ON i.id = o.item_id
    FOR KEY SHARE OF i SKIP LOCKED
"""

# The keys an item's sketch is filed under (migration 0010; filters.tag_posting_key, filters.lineage_posting_key):
# each of its tags and each key of its namespace's lineage, prefixed so a tag never reads as a
# namespace, each once however often the item repeats a tag.
POSTING_KEYS = "SELECT 't:' || t FROM unnest(i.tags) AS t UNION SELECT 'n:' || l FROM unnest(i.lineage) AS l"

# The claimed vectors into the index, and their sketches beside it (sketch_sql), in one
# statement; how many moved. A sketch is filed under its item's keys with the item's seq: items
# are never updated, so the copy never goes stale.
MOVE_BACKLOG = f"""
    WITH moved AS (
        DELETE FROM engram_vector_backlog b
        USING unnest(CAST(:ids AS text[]), CAST(:models AS text[])) AS c(item_id, model)
        WHERE b.item_id = c.item_id AND b.model = c.model
        RETURNING b.item_id, b.model, b.embedding, b.queued
    ),
    indexed AS (
        INSERT INTO engram_embeddings (item_id, model, embedding)
        SELECT item_id, model, embedding FROM moved ORDER BY queued
        ON CONFLICT (item_id, model) DO NOTHING
    ),
    sketched AS (
        INSERT INTO engram_sketch_postings (key, seq, item_id, sketch)
        SELECT k.key, i.seq, m.item_id, binary_quantize(m.embedding)
        FROM moved m JOIN engram_items i ON i.id = m.item_id CROSS JOIN LATERAL ({POSTING_KEYS}) AS k(key)
        ON CONFLICT (key, seq) DO NOTHING
    )
    SELECT count(*) FROM moved
"""


def delete_sql(where: str) -> str:
    return f"WITH gone AS (DELETE FROM engram_items i WHERE {where} RETURNING 1) SELECT count(*) FROM gone"


def keyword_params(
    ts_config: str,
    keywords: KeywordQuery,
    depth: int,
    statistics: TermStatistics,
    *,
    budget: int = KEYWORD_BUDGET,
    scored: int = KEYWORD_SCORED,
    middle: int = KEYWORD_MIDDLE,
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
        "budget": budget,
        "scored": scored,
        "middle": max(budget, middle),
        # Never fewer than the pool, so a page is never short.
        "topup": max(budget, KEYWORD_POOL),
        "pool": KEYWORD_POOL,
        "settled": KEYWORD_SETTLED,
        "ranked": max(depth, KEYWORD_POOL),
    }


@dataclass(frozen=True)
class ElementShares:
    """The share of items holding each of an array column's most common elements (``pg_stats``),
    and a share no other element exceeds (the least listed). No elements: no statistics yet."""

    shares: Mapping[str, float]
    rest: float

    @classmethod
    def of(cls, elems: Sequence[str] | None, freqs: Sequence[float] | None) -> ElementShares | None:
        if not elems or not freqs:
            return None
        # pg_stats lists one frequency per element, then the least and the greatest of them.
        return cls(shares=dict(zip(elems, map(float, freqs), strict=False)), rest=float(freqs[len(elems)]))

    def share(self, element: str) -> float:
        return self.shares.get(element, self.rest)


@dataclass(frozen=True)
class TermStatistics:
    """What keyword ranking reads of the planner's statistics of ``tsv``: its most common lexemes,
    their frequencies (as ``pg_stats`` gives them: one per lexeme, then the least and the greatest
    frequency, then the null one) and the estimated item count. No lexemes: no statistics yet.
    Also the shares of the commonest tags and lineage keys, which bound how many items a filter
    admits (``admitted_bound``).

    The two arrays stay in PostgreSQL's text form, each one parameter for the statement to
    cast: sent as arrays, asyncpg checks every element and they cost ~0.5 ms of every keyword
    statement (~350 lexemes at 100k, eighth session); as text ~0.05 ms. The statement casts
    them once (``stats AS MATERIALIZED``: inlined, the casts ran again for every operand,
    ~0.15 ms each; keyword mean at 100k 15.4 -> 13.8 ms unfiltered, 10.5 -> 10.1 with a tag)."""

    elems: str | None
    freqs: str | None
    items: float
    tags: ElementShares | None = None
    lineage: ElementShares | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> TermStatistics:
        return cls(
            elems=row["elems"],
            freqs=row["freqs"],
            items=float(row["items"]),
            tags=ElementShares.of(row["tag_elems"], row["tag_freqs"]),
            lineage=ElementShares.of(row["lineage_elems"], row["lineage_freqs"]),
        )


# One row, whether or not ANALYZE has run. The engine reads it every few seconds, not in every
# keyword statement: planning and running the pg_stats view there cost ~1 ms of each (100k items,
# 200 questions twice, interleaved, fourth session: keyword p50 14.1 -> 13.0 ms and p95 19.9 ->
# 17.9 unfiltered, p50 7.7 -> 7.0 with a tag, 8.2 -> 7.5 with a subtree; every page the same).
TERM_STATISTICS = """
    SELECT s.most_common_elems::text AS elems, s.most_common_elem_freqs::text AS freqs,
           t.most_common_elems::text::text[] AS tag_elems, t.most_common_elem_freqs AS tag_freqs,
           l.most_common_elems::text::text[] AS lineage_elems, l.most_common_elem_freqs AS lineage_freqs,
           (SELECT greatest(c.reltuples, 1) FROM pg_class c WHERE c.oid = 'engram_items'::regclass) AS items
    FROM (SELECT 1) AS one
    LEFT JOIN pg_stats s
        ON s.schemaname = current_schema() AND s.tablename = 'engram_items' AND s.attname = 'tsv'
    LEFT JOIN pg_stats t
        ON t.schemaname = current_schema() AND t.tablename = 'engram_items' AND t.attname = 'tags'
    LEFT JOIN pg_stats l
        ON l.schemaname = current_schema() AND l.tablename = 'engram_items' AND l.attname = 'lineage'
"""


def plans_generic(pred: Predicate) -> bool:
    """Whether a ranking under ``pred`` runs on one generic plan (PostgresEngine's second pool).

    Without a filter the values change no estimate (every tsquery comes from a CTE; a
    vector's distance orders the index the same whatever the vector), and planning is a
    good part of the statement: the keyword ranking's ~2 ms (100k, raw SQL, 200 questions
    three times, interleaved, ninth session, two runs: p50 / p95 15.7 / 23.1
    -> 14.6 / 19.7 and 14.6 / 21.2 -> 13.3 / 18.0 ms; at 10k 13.0 / 21.0 -> 11.6 / 19.6;
    every page and score the same, a page past the pool too), the vector statement's ~0.9
    ms (100k, thirteenth session: 9.89 -> 9.03 ms p50). A connection whose session plans
    generic costs no round trip, where ``SET LOCAL`` in a transaction of its own cost two
    (BEGIN with the SET, COMMIT): the keyword ranking 16.8 -> 14.9 ms p50 raw, 18.0 -> 17.5
    through HTTP (100k, thirteenth session). With a filter its values decide the plan
    (bench/HISTORY.md, eighth session: the smallest namespace 14 -> 45 ms on a generic plan).
    """
    return pred.admits_all


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
    nothing. At 100k (bench corpus, 200 questions twice, raw SQL, interleaved, eighth
    session): keyword p50 / p95 unfiltered 20.4 / 32.0 -> 17.7 / 25.9 ms, with a tag or a
    subtree within noise (fewer rows scored); every page and score the same. Rescanning
    the subquery for every row was the cost. It is written once, over the pool's
    candidates: a copy in each CTE that gathers them doubled the planning (1.4 -> 2.7 ms
    unfiltered) for no faster run.
    """
    return " + ".join(
        f"CASE WHEN i.tsv @@ w.tq[{k}] THEN w.idf[{k}] * ts_rank(i.tsv, w.tq[{k}]) ELSE 0 END"
        for k in range(1, min(len(keywords.texts), MAX_TERMS) + 1)
    )


# The core of an unfiltered ranking: up to ``scored`` matches of the essential operands, best
# placed first: those holding two essential operands, then one and another operand, then the
# rest. An item holding more of the query's words outranks one holding fewer unless it repeats
# them, so when the matches run past what is scored these are the ones to keep; the bitmap heap
# scan otherwise keeps the first in table order. The pairs read only the essential operands'
# posting lists; each tier's bitmap excludes the tiers before it, so no row is read twice.
_CORE_HELD_FIRST = """
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
                WHERE p.q IS NOT NULL AND i.tsv @@ p.q
                UNION ALL
                SELECT i.id, i.seq, i.tsv FROM engram_items i, essential e, others o, pairs p
                WHERE o.q IS NOT NULL
                  AND i.tsv @@ CASE WHEN p.q IS NULL THEN e.q && o.q ELSE e.q && o.q && !! p.q END
                UNION ALL
                SELECT i.id, i.seq, i.tsv FROM engram_items i, essential e, others o, pairs p
                WHERE i.tsv @@ CASE WHEN o.q IS NULL AND p.q IS NULL THEN e.q
                                    WHEN o.q IS NULL THEN e.q && !! p.q
                                    WHEN p.q IS NULL THEN e.q && !! o.q
                                    ELSE e.q && !! (o.q || p.q) END
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


def keyword_ctes(where: str, keywords: KeywordQuery, *, depth: int, admits_all: bool) -> str:
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
    leaves the pool short is a narrow one (see KEYWORD_MIDDLE); once the rarer operands'
    matches fill the first ``settled`` ranks, only as many as the pool lacks (KEYWORD_SETTLED).
    At most three times the
    budget rows are read and scored. Without a filter (``admits_all``) the rarest operands'
    matches often run past the budget, and which of them are scored decides the page: at
    most ``scored`` are, those holding more of the operands first (``_CORE_HELD_FIRST``). The
    best KEYWORD_POOL lead every ranking; a page ending past the pool continues with the
    other matches by ``ts_rank``, scaled below the pool's lowest score, so cursors neither
    skip nor repeat.
    Parameters: cfg, elems, freqs, items, operands, words, budget, scored, middle, topup, pool,
    settled, ranked (see ``keyword_params``).
    """
    core = _CORE_HELD_FIRST if admits_all else _core_in_table_order(where)
    pool = f"""{_KEYWORD_TERMS},
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
    if depth <= KEYWORD_POOL:
        return f"""{pool},
        kw AS (SELECT id, seq, score, row_number() OVER (ORDER BY score DESC, seq) AS rank FROM pool)
        """
    return f"""{pool},
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


def keyword_sql(pred: Predicate, keywords: KeywordQuery, *, depth: int) -> str:
    """A keyword page under ``pred``, written as the terms index serves it beside the words."""
    where = pred.sql(beside_words=True)
    return f"""
        WITH {keyword_ctes(where, keywords, depth=depth, admits_all=pred.admits_all)}
        SELECT {HIT_COLUMNS}, i.seq, page.score
        FROM (SELECT id, score, rank FROM kw ORDER BY rank LIMIT :count OFFSET :offset) AS page
        JOIN engram_items i ON i.id = page.id
        ORDER BY page.rank
    """


# The HNSW index is built over the vectors cast to half precision: at 100k items (bench corpus,
# 1,000 inserts into a 99k index, 200 queries, recall@10 against an exact full-precision scan),
# vector m=16/ef_construction=64 inserted 100 vectors in 277 ms with recall 0.970 at ef_search 200
# and 4.4 ms per search; halfvec m=16/ef_construction=40 took 155 ms, recall 0.956 at ef_search 200
# (2.6 ms) and 0.971 at 300 (3.8 ms). Half the index size, faster inserts and searches, for
# recall that a larger ef_search buys back (app/settings.py). Items keep full-precision vectors.
# ef_construction 100 (migration 0005; sixth session, 100k, 200 queries, one process): ef_search 150
# finds 0.965 unfiltered in 6.5 ms where 40 needed 300 for 0.972 in 14.2 ms; filtered, ef_search 200
# gives 0.921 / 0.932 in ~19 ms where 40 needed 500 for 0.919 / 0.922 in ~26 ms. What it costs is
# graph upkeep: 100 inserts into the bulk-built graph 443 -> 493 ms, but in a graph grown by inserts
# (the bench's 100k ingest, one indexer) 422 -> 270 items/s; two indexers (indexer.py) won back part
# (295). ef_construction 160: ef_search 100 gives 0.963 / 0.922 / 0.929, but 100 inserts take 711 ms.
# ef_construction 80 (migration 0007; twelfth session, the bench's 10k + 100k run, graph grown by inserts,
# two indexers): 100k ingest 227 -> 265 items/s (1.51x -> 1.76x LangGraph's, same machine state), recall
# 0.967 / 0.930 / 0.933 -> 0.963 / 0.919 / 0.930 at the same ef_search, vector p50 the same within noise.
# 64 left filtered recall at 0.904 / 0.920 on a bulk-built graph, too near 0.9 (bench/HISTORY.md).
HNSW_INDEX = "engram_embeddings_hnsw"
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 80
# How far a search walks the graph, unfiltered and filtered: the defaults of the engine and of
# the service's settings (measured where the setting is, app/settings.py).
HNSW_EF_SEARCH = 150
HNSW_EF_SEARCH_FILTERED = 200


def hnsw_index_sql(dimension: int) -> str:
    """The vector index, for vectors of ``dimension`` (the cast's type modifier is part of the index)."""
    return (
        f"CREATE INDEX {HNSW_INDEX} ON engram_embeddings USING hnsw "
        f"((embedding::halfvec({int(dimension)})) halfvec_cosine_ops) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
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
    its own cost two more (BEGIN with the SET, COMMIT; 100k, raw SQL, 400 tag-filtered searches
    interleaved, thirteenth session: p50 20.3 -> 19.5 ms, every page the same). pgvector reads
    the setting when the walk starts, at the index's first row (tests/engine: a walk's buffers
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


# A filter that admits at most this many items is ranked by sketch_sql, not the HNSW walk. At
# 100k items (bench corpus, the engine's filtered walk at ef_search 200 against sketch_sql, 200
# questions per case, the two interleaved, raw SQL, fifteenth session; p50 ms by items admitted):
# 1-2k 14.4 / 19.9 (tag / subtree) -> 4.7 / 4.8, 2-3k 13.2 / 15.0 -> 5.5 / 5.5, 3-4k 10.5 / 10.6
# -> 7.0 / 7.5, 4-5k 9.6 / 11.7 -> 8.7 / 9.4, 5-7k 6.1 / 9.5 -> 10.0 / 10.6: the walk finds
# admitted items faster the more there are, the sketch scan reads every admitted item.
# With the sketches in their own narrow table (migration 0009; sixteenth session, a graph grown
# by the service's inserts, 60 questions a bucket over the bench's tags, pairs and triples of
# them, and subtrees, interleaved): 3-4k 12.8 -> 5.2, 4-5k 12.9 -> 6.8, 5-6k 8.6 -> 6.6, 6-7k
# 7.5 -> 6.8, 7-8k 6.9 -> 6.9 (p95 11.9 -> 9.7), 8-9k 6.2 -> 6.9, 10-11k 6.1 -> 7.9.
# With the sketches filed under their keys (migration 0010; eighteenth session, the same store and
# method, the bench's tags, pairs, triples and fives of them and its subtrees, 60 questions a
# bucket; walk -> sketches p50, recall@10 against exact): 2-4k 9.4 -> 1.7 (0.900 -> 0.982), 4-6k
# 5.7 -> 2.4 (0.888 -> 0.965), 6-8k 5.0 -> 2.8, 8-10k 5.9 -> 3.7, 10-13k 5.3 -> 4.2 (0.892 ->
# 0.948), 13-16k 5.4 -> 5.0 (p95 6.3 -> 6.0; 0.910 -> 0.948), 16-20k 6.0 -> 6.9, 20-30k 5.8 -> 9.2.
SKETCH_MAX_ADMITTED = 15_000
# Sketches ranked, then ranked again by their vectors: recall@10 against the exact ranking, in
# that measurement, 0.83 / 0.81 at 50, 0.92 / 0.91 at 100, 0.97 / 0.96 at 200, 0.99 / 0.98 at 300
# (the walk's 0.92 / 0.93), the scan the same ~7 ms at each.
SKETCH_CANDIDATES = 200


def sketch_candidates(depth: int) -> int:
    """How many admitted items sketch_sql ranks again by their vectors, for a page ending at ``depth``."""
    return max(SKETCH_CANDIDATES, 4 * depth)


def sketch_sql(where: str, keys: SketchKeys) -> str:
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
    filters that admit few (SKETCH_MAX_ADMITTED), where the HNSW walk must step past most of
    what it finds.
    """
    postings, rest = "engram_sketch_postings p", ""
    if not keys.complete:
        postings, rest = f"{postings} JOIN engram_items i ON i.id = p.item_id", f" AND {where}"
    once = "DISTINCT ON (p.seq) " if keys.several else ""
    return f"""
        WITH nearest AS MATERIALIZED (
            (SELECT c.id, c.seq, e.embedding <=> CAST(:vec AS vector) AS distance
             FROM (
                 SELECT a.item_id AS id, a.seq
                 FROM (SELECT {once}p.item_id, p.seq, p.sketch FROM {postings} WHERE {keys.predicate.sql()}{rest}) AS a
                 ORDER BY a.sketch <~> binary_quantize(CAST(:vec AS vector)), a.seq
                 LIMIT :candidates
             ) AS c
             JOIN engram_embeddings e ON e.item_id = c.id AND e.model = :model)
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


def list_sql(where: str) -> str:
    """A page of the listing after ``:after``, up to ``:ceiling``: the last item stored when the
    first page was read (NULL on the first page, which takes it and answers it in every row).

    Items stored after that are left to a new listing: an item forgotten and stored again while a
    client pages takes a new ``seq``, and without the ceiling a cursor that had passed it met it
    again (contract §5: never returned twice)."""
    return f"""
        SELECT {HIT_COLUMNS}, i.seq, t.ceiling
        FROM engram_items i,
             (SELECT coalesce(CAST(:ceiling AS bigint), (SELECT max(seq) FROM engram_items)) AS ceiling) AS t
        WHERE i.seq > :after AND i.seq <= t.ceiling AND {where}
        ORDER BY i.seq
        LIMIT :count
    """


def get_sql(where: str) -> str:
    return f"SELECT {HIT_COLUMNS} FROM engram_items i WHERE i.id = ANY(:ids) AND {where}"


# An explore has the facet counts (migration 0011) folded when a facet's sum read more than this
# many rows beyond one a value: writes add a row a (facet, value) and statement.
FOLD_AFTER_ROWS = 256

# Every facet value's count rows summed into one row, where it has more than one (a folded value is
# not written again: at a million items the folded rows alone may be hundreds of thousands). Folds
# run one at a time (the advisory lock: one that finds it held leaves the rows to the fold that
# holds it), and a fold deletes only rows it sees and writes back their sum: rows a write adds
# meanwhile stay as they are. A NULL value (the items lacking the facet) is its own group.
FOLD_FACETS = """
    WITH mine AS (SELECT pg_try_advisory_xact_lock(hashtext('engram_facet_counts'), 0) AS held),
    scattered AS (
        SELECT facet, coalesce(value, '') AS value, value IS NULL AS missing
        FROM engram_facet_counts WHERE (SELECT held FROM mine)
        GROUP BY 1, 2, 3 HAVING count(*) > 1
    ),
    gone AS (
        DELETE FROM engram_facet_counts c USING scattered s
        WHERE c.facet = s.facet AND coalesce(c.value, '') = s.value AND (c.value IS NULL) = s.missing
        RETURNING c.facet, c.value, c.n
    )
    INSERT INTO engram_facet_counts (facet, value, n)
    SELECT facet, value, sum(n) FROM gone GROUP BY facet, value HAVING sum(n) <> 0
"""


def explore_sql(facet: str, pred: Predicate) -> str:
    """Total, missing, distinct values and the top ``limit`` buckets (contract §6), and how many
    count rows were summed (``kept_rows``, 0 when the items were read).

    Without a filter the facet's kept counts are summed (migration 0011): at 100k items the tag
    facet over everything counted every item in ~75 ms p50, 19x its 10k figure (nineteenth
    session); the kept counts are a row a value once folded (FOLD_FACETS). With a filter the
    admitted items are counted in one pass. The tag facet first groups them by their tag list
    (3,213 lists among the bench's 100k items) and unnests each list once, counting a tag once
    per item however often the item repeats it. Gathering the admitted items first (as before)
    read them twice and spilled them to disk. At 100k (bench corpus, raw SQL, old and new
    interleaved, same answers, seventh session): over everything, tag ~255 -> ~170 ms, kind ~130
    -> ~20, namespace ~130 -> ~30, source_id ~185 -> ~130; tag with a tag filter ~21 -> ~17.
    """
    where = pred.sql()
    if pred.admits_all:
        counted = """
        kept AS (SELECT value, n FROM engram_facet_counts WHERE facet = :facet),
        per_value AS (SELECT value, sum(n) AS n FROM kept GROUP BY value),
        admitted AS (
            SELECT (SELECT sum(n) FROM engram_facet_counts WHERE facet = '') AS total,
                   (SELECT n FROM per_value WHERE value IS NULL) AS missing,
                   (SELECT count(*) FROM kept) AS kept_rows
        ),
        counts AS (SELECT value, n FROM per_value WHERE value IS NOT NULL AND n > 0)"""
    elif facet == "tag":
        counted = f"""
        lists AS (SELECT i.tags, count(*) AS n FROM engram_items i WHERE {where} GROUP BY i.tags),
        admitted AS (
            SELECT sum(n) AS total, sum(n) FILTER (WHERE cardinality(tags) = 0) AS missing, 0 AS kept_rows
            FROM lists
        ),
        counts AS (
            SELECT v.value, sum(l.n) AS n
            FROM lists l, LATERAL (SELECT DISTINCT unnest(l.tags) AS value) v
            GROUP BY v.value
        )"""
    else:
        counted = f"""
        per_value AS (SELECT {FACET_VALUE[facet]} AS value, count(*) AS n FROM engram_items i WHERE {where} GROUP BY 1),
        admitted AS (
            SELECT sum(n) AS total, sum(n) FILTER (WHERE value IS NULL) AS missing, 0 AS kept_rows FROM per_value
        ),
        counts AS (SELECT value, n FROM per_value WHERE value IS NOT NULL)"""
    return f"""
        WITH {counted}
        SELECT
            CAST(coalesce(a.total, 0) AS bigint) AS total,
            CAST(coalesce(a.missing, 0) AS bigint) AS missing,
            (SELECT count(*) FROM counts) AS distinct_values,
            (SELECT coalesce(json_agg(json_build_object('value', t.value, 'count', t.n)
                                        ORDER BY t.n DESC, t.value COLLATE "C"), '[]')
             FROM (SELECT value, CAST(n AS bigint) AS n FROM counts
                   ORDER BY n DESC, value COLLATE "C" LIMIT :limit) t) AS buckets,
            CAST(a.kept_rows AS bigint) AS kept_rows
        FROM admitted a
    """


def explore_params(facet: str, pred: Predicate, limit: int) -> dict[str, Any]:
    return {"limit": limit, **({"facet": facet} if pred.admits_all else pred.params)}


def folds_facet(kept_rows: int, distinct_values: int) -> bool:
    """Whether an explore that summed ``kept_rows`` count rows should have them folded (FOLD_FACETS)."""
    return kept_rows > distinct_values + 1 + FOLD_AFTER_ROWS
