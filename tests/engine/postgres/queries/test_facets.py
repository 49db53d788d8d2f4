"""Facet counts (no database): kept counts without a filter, the items counted with one."""

from __future__ import annotations

from app.contract.meta import Filter
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.queries.facets import FACET_VALUE, FOLD_AFTER_ROWS, folds_facet, plan_explore


def test_without_a_filter_the_kept_counts_are_summed() -> None:
    statement = plan_explore("kind", filter_predicate(Filter()), 20)
    assert "engram_facet_counts WHERE facet = $" in statement.sql
    assert set(statement.args) == {"kind", 20}


def test_with_a_filter_the_admitted_items_are_counted_by_the_facets_value() -> None:
    tags = plan_explore("tag", filter_predicate(Filter(kinds=["learning"])), 5)
    assert "GROUP BY i.tags" in tags.sql and "engram_facet_counts" not in tags.sql
    agents = plan_explore("agent", filter_predicate(Filter(kinds=["learning"])), 5)
    assert FACET_VALUE["agent"] in agents.sql
    assert 5 in agents.args and ["learning"] in agents.args


def test_counts_are_folded_once_they_run_past_a_row_a_value() -> None:
    assert not folds_facet(kept_rows=10 + 1 + FOLD_AFTER_ROWS, distinct_values=10)
    assert folds_facet(kept_rows=10 + 2 + FOLD_AFTER_ROWS, distinct_values=10)
