"""Listing and getting by id (no database)."""

from __future__ import annotations

from app.contract.meta import Filter
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.queries.listing import plan_get, plan_list


def test_a_listing_page_reads_after_its_position_up_to_its_ceiling() -> None:
    first = plan_list(filter_predicate(Filter()), after=0, ceiling=None, count=101)
    assert first.args == (None, 0, 101)  # the ceiling first: the first page takes it
    assert "ORDER BY i.seq" in first.sql and not first.generic_plan
    later = plan_list(filter_predicate(Filter(tags_any=["t"])), after=40, ceiling=90, count=11)
    assert later.args == (90, 40, ["t"], 11)


def test_get_reads_the_ids_under_the_reach() -> None:
    statement = plan_get(filter_predicate(Filter()), ["a", "b"])
    assert statement.args == (["a", "b"],)
    assert "= ANY($1)" in statement.sql
