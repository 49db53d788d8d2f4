"""The vector ranking's statements (no database): through the index, exactly, or by sketches."""

from __future__ import annotations

import numpy as np

from app.contract.meta import Filter
from app.engine.postgres.filters import filter_predicate, sketch_keys
from app.engine.postgres.options import HNSWOptions
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.vector import (
    hnsw_index_sql,
    index_was_enough,
    plan_sketch,
    plan_vector,
    search_breadth,
    sketch_candidates,
)

VECTOR = np.ones(8, dtype=np.float32)


def walk(request_filter: Filter, *, exact: bool = False, options: HNSWOptions | None = None) -> Statement:
    return plan_vector(
        VECTOR,
        filter_predicate(request_filter),
        model="m",
        dimension=8,
        offset=0,
        count=11,
        exact=exact,
        options=options or HNSWOptions(),
    )


def test_an_unfiltered_walk_keeps_the_connections_breadth_on_a_generic_plan() -> None:
    statement = walk(Filter())
    assert statement.generic_plan
    assert "set_config" not in statement.sql
    assert "halfvec(8)" in statement.sql


def test_a_filtered_walk_sets_its_own_breadth_in_its_statement() -> None:
    statement = walk(Filter(tags_any=["t"]), options=HNSWOptions(ef_search_filtered=456))
    assert not statement.generic_plan
    assert "set_config('hnsw.ef_search', '456', true)" in statement.sql
    assert "set_config" not in walk(Filter(tags_any=["t"]), options=HNSWOptions(ef_search_filtered=None)).sql


def test_the_exact_scan_walks_no_index() -> None:
    statement = walk(Filter(tags_any=["t"]), exact=True)
    assert "set_config" not in statement.sql
    assert "halfvec" not in statement.sql
    assert "+ 0" in statement.sql  # an order no index provides


def test_the_breadth_is_the_filtered_one_only_for_a_filtered_walk() -> None:
    tagged, everything = filter_predicate(Filter(tags_any=["x"])), filter_predicate(Filter())
    assert search_breadth(tagged, exact=False, filtered=456) == 456
    assert search_breadth(filter_predicate(Filter(kinds=["learning"])), exact=False, filtered=456) == 456
    assert search_breadth(everything, exact=False, filtered=456) is None
    assert search_breadth(tagged, exact=True, filtered=456) is None


def test_the_index_was_enough_only_when_it_gave_the_whole_depth() -> None:
    assert index_was_enough([{"from_index": 11}], 11)
    assert not index_was_enough([{"from_index": 10}], 11)
    assert not index_was_enough([], 11)


def test_sketches_rank_at_least_the_candidates_again_and_four_times_the_page() -> None:
    assert sketch_candidates(11, 200) == 200
    assert sketch_candidates(100, 200) == 400
    request_filter = Filter(tags_any=["a", "b"])
    statement = plan_sketch(
        VECTOR,
        filter_predicate(request_filter),
        sketch_keys(request_filter),
        model="m",
        offset=300,
        count=11,
        candidates=200,
    )
    assert not statement.generic_plan
    numbers = [arg for arg in statement.args if isinstance(arg, int)]
    assert 1_244 in numbers and 300 in numbers
    assert "DISTINCT ON (p.seq)" in statement.sql  # filed under two tags, an item ranks once


def test_a_filter_the_postings_hold_whole_reads_no_item() -> None:
    for request_filter, complete in (
        (Filter(tags_any=["a"]), True),
        (Filter(tags_any=["a"], kinds=["learning"]), False),
    ):
        keys = sketch_keys(request_filter)
        statement = plan_sketch(
            VECTOR, filter_predicate(request_filter), keys, model="m", offset=0, count=11, candidates=200
        )
        postings = statement.sql.split("FROM engram_sketch_postings p", 1)[1].split(") AS a", 1)[0]
        assert ("JOIN engram_items" in postings) is not complete


def test_the_index_is_built_over_half_precision_with_the_options() -> None:
    sql = hnsw_index_sql(384, HNSWOptions(m=12, ef_construction=64))
    assert "halfvec(384)" in sql and "halfvec_cosine_ops" in sql
    assert "m = 12" in sql and "ef_construction = 64" in sql
    assert "ef_construction = 80" in hnsw_index_sql(384)
