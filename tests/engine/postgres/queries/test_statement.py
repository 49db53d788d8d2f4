"""Statements as asyncpg takes them (no database)."""

from __future__ import annotations

import dataclasses

import pytest

from app.contract.meta import Filter
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.queries.statement import Statement, plans_generic


def test_names_are_numbered_in_order_of_first_use_and_a_repeat_reuses_its_number() -> None:
    statement = Statement.bind("SELECT :b, :a, :b WHERE x = :a", {"a": 1, "b": 2, "unused": 3})
    assert statement.sql == "SELECT $1, $2, $1 WHERE x = $2"
    assert statement.args == (2, 1)
    assert not statement.generic_plan


def test_casts_are_not_parameters() -> None:
    statement = Statement.bind("SELECT x::text, CAST(:v AS int)::bigint", {"v": 7}, generic_plan=True)
    assert statement.sql == "SELECT x::text, CAST($1 AS int)::bigint"
    assert statement.args == (7,)
    assert statement.generic_plan


def test_a_missing_value_is_refused_and_a_statement_never_changes() -> None:
    with pytest.raises(KeyError):
        Statement.bind("SELECT :missing")
    statement = Statement("SELECT 1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        statement.sql = "SELECT 2"  # type: ignore[misc]


def test_only_an_unfiltered_ranking_plans_generic() -> None:
    assert plans_generic(filter_predicate(Filter()))
    assert not plans_generic(filter_predicate(Filter(tags_any=["x"])))
    assert not plans_generic(filter_predicate(Filter(kinds=["learning"])))
