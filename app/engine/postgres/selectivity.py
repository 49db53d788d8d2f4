"""How many items a filter can admit, bounded from the planner's statistics (no query of its own).

A vector search picks its statement by it (sketch_sql for few, the HNSW walk for many). Only
what the statistics describe is bounded: tags (``tags_any``) and a namespace with or without
its subtree (the ``lineage`` key of ``at`` covers ``at`` and everything below it). Other clauses
only narrow what these admit, so the least of the bounds holds for the whole filter.
Statistics trail writes until autovacuum's next ANALYZE: a tag that has grown since is still ranked
by sketches, slower than the walk would be, with the same kind of answer.
"""

from __future__ import annotations

from app.contract.meta import Filter
from app.engine.postgres.filters import lineage_key
from app.engine.postgres.options import SketchOptions
from app.engine.postgres.queries.statistics import TermStatistics


def admitted_bound(request_filter: Filter, statistics: TermStatistics) -> float | None:
    """At most how many items ``request_filter`` admits; None when nothing in it is bounded."""
    shares: list[float] = []
    if request_filter.tags_any and statistics.tags is not None:
        shares.append(min(1.0, sum(statistics.tags.share(tag) for tag in set(request_filter.tags_any))))
    key = lineage_key(request_filter.reach)
    if key is not None and statistics.lineage is not None:
        shares.append(statistics.lineage.share(key))
    return min(shares) * statistics.items if shares else None


def ranks_by_sketch(request_filter: Filter, statistics: TermStatistics, options: SketchOptions) -> bool:
    """Whether a vector search under ``request_filter`` is sketch_sql's: it admits few items for certain."""
    bound = admitted_bound(request_filter, statistics)
    return bound is not None and bound <= options.max_admitted
