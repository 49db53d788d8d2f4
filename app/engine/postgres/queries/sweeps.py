"""Sweeps: what the background sweepers erase, a bounded batch a statement, one replica at a time."""

from __future__ import annotations

from app.engine.postgres.queries.retention import POLICIES_LOCK
from app.engine.postgres.queries.statement import Statement

SWEEP_BATCH = 1_000
"""Rows a sweep statement removes at most: it holds them only for one short statement, and the
sweeper repeats it until a statement finds fewer."""


def sweep_sql(table: str, doomed: str, lock: str, *, shared: str | None = None) -> str:
    """Delete up to ``:batch`` rows of ``table`` that ``doomed`` admits; how many.

    Only while this transaction holds the advisory lock ``lock`` (and, given ``shared``, that
    advisory lock shared): with several replicas on one database, a statement that finds another
    sweeping removes nothing, and its sweeper stops until its next round. Cascades (vectors,
    sketches) and triggers (facet counts) follow the rows.
    """
    also = f" AND pg_try_advisory_xact_lock_shared({shared})" if shared else ""
    return f"""
        WITH mine AS (SELECT pg_try_advisory_xact_lock(hashtext('{lock}'), 0){also} AS held),
        doomed AS (SELECT t.ctid FROM {table} t WHERE (SELECT held FROM mine) AND {doomed} LIMIT :batch),
        gone AS (DELETE FROM {table} t USING doomed d WHERE t.ctid = d.ctid RETURNING 1)
        SELECT count(*) FROM gone
    """


# The advisory locks the sweeps hold (hashtext(name), 0): a test or an operator holding one keeps
# that sweep from running.
FORGOTTEN_LOCK = "engram_forgotten"
EXPIRED_LOCK = "engram_items_expired"


def plan_sweep_forgotten(window_s: float, batch: int = SWEEP_BATCH) -> Statement:
    """Forgotten items kept longer than the undo window (migration 0014)."""
    sql = sweep_sql("engram_forgotten", "t.forgotten_at <= now() - make_interval(secs => :window)", FORGOTTEN_LOCK)
    return Statement.bind(sql, {"window": window_s, "batch": batch})


def plan_sweep_expired(batch: int = SWEEP_BATCH) -> Statement:
    """Items whose retention expiry has passed (migration 0015), found by the partial index; not
    while a policy change rewrites expiries (its rows and the sweep's would lock in other orders)."""
    sql = sweep_sql("engram_items", "t.expires_at <= now()", EXPIRED_LOCK, shared=POLICIES_LOCK)
    return Statement.bind(sql, {"batch": batch})
