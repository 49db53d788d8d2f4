"""Facet counts (contract §6): summed from the kept counts (migration 0011) or counted over a filter."""

from __future__ import annotations

from app.contract.timebuckets import TIME_FACETS
from app.engine.postgres.filters import Predicate
from app.engine.postgres.queries.statement import Statement

# The value a facet counts under, per item (contract §6); NULL means missing. Migration 0011's
# triggers keep the counts by the same values, frozen there (tests/engine/postgres/test_facet_counts.py).
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

# An explore has the facet counts folded when a facet's sum read more than this many rows beyond
# one a value: writes add a row a (facet, value) and statement.
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


# The expired items the sweeper has not erased yet (filters.EXPIRED_IDS): few, or none while
# nothing expires, found by the partial index of migration 0015.
_EXPIRED = "engram_items i WHERE i.expires_at <= now()"


def _expired_values(facet: str) -> str:
    """Each facet value's count among the expired items, as the kept counts hold them: a tag once
    per item, NULL for an item without the facet."""
    if facet == "tag":
        return f"""
            SELECT v.value, count(*) AS n
            FROM (SELECT i.tags FROM {_EXPIRED}) AS e, LATERAL (SELECT DISTINCT unnest(e.tags) AS value) v
            GROUP BY v.value
            UNION ALL
            SELECT NULL, count(*) FROM {_EXPIRED} AND cardinality(i.tags) = 0"""
    return f"SELECT {FACET_VALUE[facet]} AS value, count(*) AS n FROM {_EXPIRED} GROUP BY 1"


# A time facet's bucket (app/contract/timebuckets.py): the UTC unit an item's observed_at falls
# in, written as the contract writes an instant once the rows are grouped (a bucket starts on
# the hour; ":MI" would read as a parameter).
def _time_bucket(unit: str) -> str:
    return f"date_trunc('{unit}', i.observed_at AT TIME ZONE 'UTC')"


_INSTANT = """to_char(t, 'YYYY-MM-DD"T"HH24') || ':00:00Z'"""


def _time_counted(unit: str, pred: Predicate) -> str:
    """A time facet's CTEs. Without a filter the items with an ``observed_at`` are read from its
    index alone (migration 0016 keeps expires_at beside it) and the total is the kept count
    (migration 0011), less the expired ones not erased yet; a filter's items are counted in one
    pass, as the other facets count them (docs/tuning.md#explore)."""
    where = pred.sql()
    if pred.admits_all:
        gone = f" - (SELECT count(*) FROM {_EXPIRED})" if pred.live else ""
        return f"""
        per_value AS (
            SELECT {_time_bucket(unit)} AS t, count(*) AS n FROM engram_items i
            WHERE i.observed_at IS NOT NULL AND {where} GROUP BY 1
        ),
        kept AS (SELECT (SELECT sum(n) FROM engram_facet_counts WHERE facet = ''){gone} AS total),
        admitted AS (
            SELECT k.total, k.total - coalesce((SELECT sum(n) FROM per_value), 0) AS missing, 0 AS kept_rows
            FROM kept k
        ),
        counts AS (SELECT {_INSTANT} AS value, n FROM per_value)"""
    return f"""
        per_value AS (SELECT {_time_bucket(unit)} AS t, count(*) AS n FROM engram_items i WHERE {where} GROUP BY 1),
        admitted AS (
            SELECT sum(n) AS total, sum(n) FILTER (WHERE t IS NULL) AS missing, 0 AS kept_rows FROM per_value
        ),
        counts AS (SELECT {_INSTANT} AS value, n FROM per_value WHERE t IS NOT NULL)"""


def explore_sql(facet: str, pred: Predicate) -> str:
    """Total, missing, distinct values and the top ``limit`` buckets (contract §6), and how many
    count rows were summed (``kept_rows``, 0 when the items were read).

    Without a filter the facet's kept counts are summed (migration 0011), a row a value once
    folded (FOLD_FACETS): counting every item grew with the store; the expired items the sweeper
    has not erased yet are counted apart and taken off (``live``). With a filter the admitted
    items are counted in one pass; the tag facet first groups them by their tag list and unnests
    each list once, counting a tag once per item however often the item repeats it
    (docs/tuning.md#explore). A time facet counts items by the UTC unit of their observed_at
    (_time_counted).
    """
    where = pred.sql()
    if facet in TIME_FACETS:
        counted = _time_counted(TIME_FACETS[facet], pred)
    elif pred.admits_all:
        expired, gone = "", ""
        if pred.live:
            expired = f"""
        expired AS MATERIALIZED ({_expired_values(facet)}),"""
            gone = f" - (SELECT count(*) FROM {_EXPIRED})"
        counted = f"""{expired}
        kept AS (SELECT value, n FROM engram_facet_counts WHERE facet = :facet),
        per_value AS (
            SELECT value, sum(n) AS n
            FROM (SELECT value, n FROM kept{" UNION ALL SELECT value, -n FROM expired" if expired else ""}) AS v
            GROUP BY value
        ),
        admitted AS (
            SELECT (SELECT sum(n) FROM engram_facet_counts WHERE facet = ''){gone} AS total,
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


def plan_explore(facet: str, pred: Predicate, limit: int) -> Statement:
    """One row: total, missing, distinct_values, the top ``limit`` buckets (json) and kept_rows."""
    kept = pred.admits_all and facet not in TIME_FACETS
    params = {"limit": limit, **({"facet": facet} if kept else pred.params)}
    return Statement.bind(explore_sql(facet, pred), params)


def folds_facet(kept_rows: int, distinct_values: int) -> bool:
    """Whether an explore that summed ``kept_rows`` count rows should have them folded (FOLD_FACETS)."""
    return kept_rows > distinct_values + 1 + FOLD_AFTER_ROWS
