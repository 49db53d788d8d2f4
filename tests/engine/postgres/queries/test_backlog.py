"""The vector backlog's claim and move (no database)."""

from __future__ import annotations

from app.engine.postgres.queries.backlog import (
    BEGIN_MOVE,
    INDEXER_LOCK_ORDER,
    MOVE_COMMITS_ASYNC,
    plan_claim,
    plan_move,
)


def test_a_move_begins_with_the_lock_order_and_an_asynchronous_commit_in_one_message() -> None:
    assert BEGIN_MOVE.sql == f"{INDEXER_LOCK_ORDER}; {MOVE_COMMITS_ASYNC}"
    assert BEGIN_MOVE.args == ()


def test_a_claim_skips_what_others_hold_and_takes_a_workers_share() -> None:
    statement = plan_claim(n=100, least=10, held=20, workers=2)
    assert "FOR UPDATE SKIP LOCKED" in statement.sql and "FOR KEY SHARE OF i SKIP LOCKED" in statement.sql
    assert sorted(statement.args) == [2, 10, 20, 100]


def test_a_move_takes_the_claimed_ids_and_models_pairwise() -> None:
    statement = plan_move(["a", "b"], ["m", "m"])
    assert statement.args == (["a", "b"], ["m", "m"])
    assert "binary_quantize" in statement.sql  # the sketches filed beside the vectors
