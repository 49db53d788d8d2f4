"""What the planner's statistics say of the items: keyword ranking's term frequencies, and the
shares of tags and lineage keys that bound how many items a filter admits (selectivity.py)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.engine.postgres.queries.statement import Statement


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

    The two arrays stay in PostgreSQL's text form, each one parameter the statement casts once:
    sent as arrays, asyncpg checks every element (docs/tuning.md#term-statistics-as-text)."""

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


# One row, whether or not ANALYZE has run. Read every few seconds (StatisticsCache), not inside
# every keyword statement, where the pg_stats view cost ~1 ms a search (docs/tuning.md#term-statistics).
TERM_STATISTICS = Statement("""
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
""")


class StatisticsCache:
    """The statistics (TermStatistics), read again once ``ttl_s`` old.

    ANALYZE (autovacuum's, as the store grows) changes them now and then; reading them is a
    statement of its own, so not one in every search.
    """

    def __init__(self, ttl_s: float = 2.0) -> None:
        self._ttl_s = ttl_s
        self._statistics: TermStatistics | None = None
        self._read_at = 0.0

    async def current(self, read: Callable[[], Awaitable[Sequence[Mapping[str, Any]]]]) -> TermStatistics:
        now = time.monotonic()
        if self._statistics is None or now - self._read_at > self._ttl_s:
            (row,) = await read()
            self._statistics, self._read_at = TermStatistics.of(row), now
        return self._statistics

    def forget(self) -> None:
        self._statistics = None
