"""How many items a filter can admit, from the statistics alone (no database)."""

from __future__ import annotations

import pytest

from app.contract.meta import Filter
from app.engine.postgres.filters import sketch_keys
from app.engine.postgres.options import KeywordOptions, SketchOptions
from app.engine.postgres.queries.statistics import ElementShares, TermStatistics
from app.engine.postgres.selectivity import (
    admits_many,
    admitted_bound,
    least_candidates,
    ranks_by_sketch,
    sampled_bound,
)

SKETCH_MAX_ADMITTED = SketchOptions().max_admitted


def statistics(items: float = 100_000, **columns: dict[str, float]) -> TermStatistics:
    """Statistics as pg_stats gives them: per element, then the least and the greatest frequency."""
    shares = {}
    for column, elements in columns.items():
        freqs = [*elements.values(), min(elements.values()), max(elements.values())]
        shares[column] = ElementShares.of(list(elements), freqs)
    return TermStatistics(elems=None, freqs=None, items=items, **shares)


def subtree(at: str, *, inherit: bool = False, descendants: bool = True, **fields: object) -> Filter:
    return Filter.model_validate({"reach": {"at": at, "inherit": inherit, "descendants": descendants}, **fields})


STATS = statistics(
    tags={"common": 0.30, "middling": 0.04, "rare": 0.01},
    lineage={"team:a": 0.5, "team:a/agent:x": 0.02},
)


@pytest.mark.parametrize(
    ("request_filter", "bound"),
    [
        (Filter(tags_any=["rare"]), 1_000),
        (Filter(tags_any=["rare", "middling", "rare"]), 5_000),  # a union: the sum, each tag once
        (Filter(tags_any=["never seen"]), 1_000),  # below the least listed
        (Filter(tags_any=["common", "middling"]), 34_000),
        (subtree("team:a/agent:x"), 2_000),
        (subtree("team:a/agent:x", descendants=False), 2_000),  # the namespace alone: within its subtree
        (subtree("team:a"), 50_000),
        (Filter(tags_any=["common"], kinds=["learning"]), 30_000),  # other clauses only narrow it
        (subtree("team:a", tags_any=["middling"]), 4_000),
        # A reach that inherits bounds nothing (below): here only the tag does.
        (subtree("team:a/agent:x", inherit=True, tags_any=["common"]), 30_000),
    ],
)
def test_a_bounded_filter_admits_at_most_its_least_bound(request_filter: Filter, bound: float) -> None:
    assert admitted_bound(request_filter, STATS) == pytest.approx(bound)


@pytest.mark.parametrize(
    "request_filter",
    [
        Filter(),
        Filter(kinds=["learning"]),
        Filter(agent_id="a1"),
        subtree("root"),  # the root is in no lineage: it bounds nothing
        subtree("team:a/agent:x", inherit=True),  # the ancestors' own items are not counted anywhere
    ],
)
def test_what_the_statistics_do_not_describe_is_not_bounded(request_filter: Filter) -> None:
    assert admitted_bound(request_filter, STATS) is None
    assert not ranks_by_sketch(request_filter, STATS, SketchOptions())


def test_without_statistics_nothing_is_bounded() -> None:
    empty = TermStatistics.of(
        {"elems": None, "freqs": None, "items": 1.0, "tag_elems": None, "tag_freqs": None}
        | {"lineage_elems": None, "lineage_freqs": None}
    )
    assert admitted_bound(Filter(tags_any=["rare"]), empty) is None
    assert admitted_bound(subtree("team:a"), empty) is None


def test_sketches_rank_a_filter_up_to_the_measured_bound() -> None:
    at = SKETCH_MAX_ADMITTED / 100_000
    assert ranks_by_sketch(Filter(tags_any=["t"]), statistics(tags={"t": at}), SketchOptions())
    assert not ranks_by_sketch(Filter(tags_any=["t"]), statistics(tags={"t": at * 1.01}), SketchOptions())
    assert ranks_by_sketch(
        Filter(tags_any=["t"]), statistics(items=SKETCH_MAX_ADMITTED, tags={"t": 1.0}), SketchOptions()
    )


@pytest.mark.parametrize(
    ("items", "admitted", "candidates"),
    [
        # A million items: a filter admitting 40k (the bench's median tag) is 4% of them; the walk
        # found 0.89 of its nearest ten, its sketches and 400 re-ranked 0.96 (docs/tuning.md).
        (1_000_000, 40_000, SketchOptions().sparse_candidates),
        (1_000_000, 100_000, SketchOptions().sparse_candidates),  # a tenth, at the most items scanned
        (1_000_000, 101_000, None),
        (1_000_000, 15_000, SketchOptions().candidates),  # few: the first rule's, as at any size
        (2_000_000, 150_000, None),  # under a tenth but more than one scan should read
        # At 100k a tenth is under max_admitted: the share admits nothing the count does not.
        (100_000, 15_000, SketchOptions().candidates),
        (100_000, 16_000, None),
        (100_000, 40_000, None),
    ],
)
def test_a_filter_admitting_a_small_share_of_many_items_is_ranked_by_sketches_with_more_candidates(
    items: float, admitted: float, candidates: int | None
) -> None:
    stats = statistics(items=items, tags={"t": admitted / items, "other": 0.5})
    assert least_candidates(Filter(tags_any=["t"]), stats, SketchOptions()) == candidates
    assert ranks_by_sketch(Filter(tags_any=["t"]), stats, SketchOptions()) is (candidates is not None)


@pytest.mark.parametrize(
    "request_filter, filed_under, lineage, complete",
    [
        (Filter(tags_any=["rare", "middling", "rare"]), ["t:rare", "t:middling"], None, True),
        (subtree("team:a"), ["n:team:a"], None, True),
        # A lineage key beside tags: the tags' postings are read, each checked against the key's.
        (subtree("team:a", tags_any=["rare"]), ["t:rare"], "n:team:a", True),
        # ``at`` alone: its lineage key admits its subtree too, so the items' rows narrow it.
        (subtree("team:a", descendants=False), ["n:team:a"], None, False),
        # Bounded by its tags only: the reach is the items' rows' to test.
        (subtree("team:a", inherit=True, tags_any=["rare"]), ["t:rare"], None, False),
        (subtree("root", tags_any=["rare"]), ["t:rare"], None, False),
        (Filter(tags_any=["rare"], kinds=["document"]), ["t:rare"], None, False),
        (Filter(tags_any=["rare"], agent_id="a1"), ["t:rare"], None, False),
    ],
)
def test_the_sketches_are_read_under_the_keys_the_statistics_bound_and_say_when_that_is_the_whole_filter(
    request_filter: Filter, filed_under: list[str], lineage: str | None, complete: bool
) -> None:
    keys = sketch_keys(request_filter.checked())
    assert keys.predicate.params == {"k0": filed_under, **({"k1": lineage} if lineage else {})}
    assert keys.complete is complete
    assert keys.several is (len(filed_under) > 1)
    # Whenever the bound lets sketches rank a filter, they have a key to find its items by.
    assert admitted_bound(request_filter.checked(), STATS) is not None


@pytest.mark.parametrize(
    "request_filter",
    [Filter(), Filter(kinds=["document"]), subtree("team:a", inherit=True), subtree("root")],
)
def test_a_filter_without_a_bounded_key_is_never_ranked_by_sketches(request_filter: Filter) -> None:
    assert admitted_bound(request_filter.checked(), STATS) is None
    with pytest.raises(ValueError):
        sketch_keys(request_filter.checked())


@pytest.mark.parametrize(
    ("items", "admitted", "many"),
    [
        # A million items: the bench's broadest tags and subtrees admit 120k-350k; their rarest
        # words' matches ran past the keyword budget (docs/tuning.md#keyword-broad-filters).
        (1_000_000, 336_000, True),
        (1_000_000, KeywordOptions().broad * 1.01, True),
        (1_000_000, KeywordOptions().broad, False),
        (1_000_000, 40_000, False),
        # At 100k no filter is bound to more than the store holds.
        (100_000, 100_000, False),
    ],
)
def test_a_filter_bound_to_many_items_has_its_keyword_matches_held_first(
    items: float, admitted: float, many: bool
) -> None:
    stats = statistics(items=items, tags={"t": admitted / items, "other": 0.01})
    assert admits_many(Filter(tags_any=["t"]), stats, KeywordOptions()) is many


def test_a_filter_nothing_bounds_is_not_known_to_admit_many() -> None:
    assert not admits_many(Filter(kinds=["learning"]), STATS, KeywordOptions(broad=0))
    assert not admits_many(Filter(), STATS, KeywordOptions(broad=0))


@pytest.mark.parametrize(
    ("items", "admitted", "sampled"),
    [
        # Ranked by sketches for its share: the candidates are looked for within a sampled distance.
        (1_000_000, 40_000, 40_000),
        (1_000_000, 100_000, 100_000),
        # Ranked by sketches for being few, or walked: every sketch sorted, or none read.
        (1_000_000, 15_000, None),
        (1_000_000, 101_000, None),
        (100_000, 15_000, None),
    ],
)
def test_only_a_filter_ranked_by_sketches_for_its_share_bounds_their_distance_by_a_sample(
    items: float, admitted: float, sampled: float | None
) -> None:
    stats = statistics(items=items, tags={"t": admitted / items, "other": 0.5})
    assert sampled_bound(Filter(tags_any=["t"]), stats, SketchOptions()) == (
        pytest.approx(sampled) if sampled else None
    )
    assert sampled_bound(Filter(tags_any=["t"]), stats, SketchOptions(sampled=0)) is None
