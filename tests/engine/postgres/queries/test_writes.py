"""Stores and forgets (no database)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from pgvector import Vector

from app.contract.meta import Filter
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.queries.writes import (
    ITEM_COLUMNS,
    ItemRow,
    plan_forget_filter,
    plan_forget_ids,
    plan_prior,
    plan_write,
)

FIRST_STORED = datetime(2026, 1, 1, tzinfo=UTC)
ROWS = [
    ItemRow("a", "learning", "", "first", "{}", "{}", 0.5, None, "manual"),
    ItemRow("b", "note", "team:x", "second", "{}", "{}", None, "2026-01-02T03:04:05Z", "file", FIRST_STORED),
]


def test_the_write_takes_one_array_a_column_in_the_rows_order() -> None:
    statement = plan_write(ROWS, "m", {}, count_backlog=False)
    items = statement.args[: len(ITEM_COLUMNS)]
    assert len(ITEM_COLUMNS) == len(ItemRow._fields)
    assert items[0] == ["a", "b"]
    assert items[6] == [0.5, None]
    assert items[-2] == ["manual", "file"]
    assert items[-1] == [None, FIRST_STORED]  # a restore's stored_at; None: now
    assert statement.args[len(ITEM_COLUMNS) :] == ("m", [], [], False)


def test_the_write_takes_the_vectors_in_binary_form_by_id() -> None:
    vectors = {"a": np.zeros(3, dtype=np.float32), "b": np.ones(3, dtype=np.float32)}
    statement = plan_write(ROWS, "m", vectors, count_backlog=True)
    model, ids, binary, count_backlog = statement.args[len(ITEM_COLUMNS) :]
    assert (model, ids, count_backlog) == ("m", ["a", "b"], True)
    assert all(isinstance(v, Vector) for v in binary)
    assert binary[1].to_list() == [1.0, 1.0, 1.0]


def test_a_forget_by_ids_names_each_once_and_keeps_to_the_reach() -> None:
    assert plan_forget_ids(["a", "b", "a"]).args == (["a", "b"],)
    within = plan_forget_ids(["a"], filter_predicate(Filter.model_validate({"reach": {"at": "team:x"}})))
    assert within.args[0] == ["a"] and "team:x" in within.args
    assert "i.namespace = $2" in within.sql


def test_a_forget_by_filter_deletes_what_the_filter_admits_and_counts_the_live() -> None:
    statement = plan_forget_filter(filter_predicate(Filter(tags_any=["t"]), live=False))
    assert statement.sql.startswith("WITH gone AS (DELETE FROM engram_items i WHERE i.tags && CAST($1 AS text[]) ")
    assert "count(*) FILTER (WHERE live) FROM gone" in statement.sql and ["t"] in statement.args


def test_held_ids_and_thread_context_are_asked_for_at_once() -> None:
    statement = plan_prior(["a", "b"], [("user:ana", "s1"), ("", "s2")], 2)
    assert set(map(repr, statement.args)) == {repr(["a", "b"]), repr(["user:ana", ""]), repr(["s1", "s2"]), "2"}
