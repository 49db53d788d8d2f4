"""How many items a filter can admit, bounded from the planner's statistics (no query of its own).

A vector search picks its statement by it (sketch_sql for few, the HNSW walk for many), a keyword
search how it picks the matches it scores (admits_many). Only
what the statistics describe is bounded: tags (``tags_any``) and a namespace with or without
its subtree (the ``lineage`` key of ``at`` covers ``at`` and everything below it). Other clauses
only narrow what these admit, so the least of the bounds holds for the whole filter.
Statistics trail writes until autovacuum's next ANALYZE: a tag that has grown since is still ranked
by sketches, slower than the walk would be, with the same kind of answer.
"""

from __future__ import annotations

from app.contract.meta import Filter
from app.engine.postgres.filters import lineage_key
from app.engine.postgres.options import KeywordOptions, SketchOptions
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


def least_candidates(request_filter: Filter, statistics: TermStatistics, options: SketchOptions) -> int | None:
    """How many sketch-nearest items sketch_sql ranks again by their vectors, at least, when the filter
    is ranked by sketches; None when the HNSW walk ranks it.

    By sketches: a filter bound to ``max_admitted`` items (``candidates``), and one bound to at most
    ``max_share`` of the items and ``max_sparse`` items (``sparse_candidates``): in a large store the
    walk steps past ~1/share items for each admitted one (docs/tuning.md#filters-at-a-million-items).
    Below ``max_admitted / max_share`` items the second clause admits nothing the first does not.
    """
    bound = admitted_bound(request_filter, statistics)
    if bound is None:
        return None
    if bound <= options.max_admitted:
        return options.candidates
    if bound <= options.max_sparse and bound <= options.max_share * statistics.items:
        return options.sparse_candidates
    return None


def sampled_bound(request_filter: Filter, statistics: TermStatistics, options: SketchOptions) -> float | None:
    """The statistics' bound on the items of a filter ranked by sketches for its share (the second
    rule of least_candidates), whose candidates are looked for within a distance a sample of its
    sketches bounds (queries.vector.sketch_sql's ``pruned``); None for every other filter."""
    bound = admitted_bound(request_filter, statistics)
    if bound is None or bound <= options.max_admitted or options.sampled <= 0:
        return None
    return bound if least_candidates(request_filter, statistics, options) is not None else None


def ranks_by_sketch(request_filter: Filter, statistics: TermStatistics, options: SketchOptions) -> bool:
    """Whether a vector search under ``request_filter`` is sketch_sql's: it admits few items for certain."""
    return least_candidates(request_filter, statistics, options) is not None


def admits_many(request_filter: Filter, statistics: TermStatistics, options: KeywordOptions) -> bool:
    """Whether a keyword ranking under ``request_filter`` holds its matches first, as a ranking without
    a filter does: the statistics bound the filter to more than ``options.broad`` items, so the rarest
    words' matches it admits run past the budget, and the first in table order would be scored
    (docs/tuning.md#keyword-broad-filters). A filter nothing in it bounds is not known to be broad."""
    bound = admitted_bound(request_filter, statistics)
    return bound is not None and bound > options.broad
