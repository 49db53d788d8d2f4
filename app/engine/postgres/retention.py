"""Retention policies in ``engram_retention`` (migration 0015), each change with its items' expiry.

A change is one transaction: the policies' lock (queries/retention.py), the row, then the expiry
of every item below the namespace written again, a batch a statement. A dry run does all of it
and rolls back, so it answers exactly what the change would expire.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import asyncpg

from app.contract.errors import NotFound
from app.contract.namespaces import Namespace
from app.contract.retention import RetentionPolicy, RetentionReport, RetentionRequest, RetentionTarget, Ttl
from app.engine.postgres.errors import database_errors
from app.engine.postgres.indexer import Acquire
from app.engine.postgres.pool import execute, fetch
from app.engine.postgres.queries.retention import (
    POLICIES_EXCLUSIVE,
    plan_clear_ttl,
    plan_hold,
    plan_policies,
    plan_recompute,
    plan_release,
    plan_set_ttl,
)
from app.engine.postgres.queries.statement import Statement
from app.engine.retention import no_hold, no_ttl, report


def policy_of(row: asyncpg.Record) -> RetentionPolicy | None:
    """The policy a row holds; None for a row that is not there (a change that emptied it)."""
    if row["namespace"] is None:
        return None
    return RetentionPolicy(
        namespace=str(Namespace.parse(row["namespace"])), ttl=row["ttl"], hold=row["hold"], updated_at=row["updated_at"]
    )


class _DryRun(Exception):
    """Rolls a dry run's transaction back."""


class PostgresRetention:
    """``written`` is told of each change's connection once it committed (a read replica's
    position, app/engine/postgres/replica.py)."""

    def __init__(self, acquire: Acquire, written: Callable[[asyncpg.Connection], Awaitable[None]]) -> None:
        self._acquire = acquire
        self._written = written

    async def list(self) -> list[RetentionPolicy]:
        with database_errors():
            async with self._acquire() as connection:
                rows = await fetch(connection, plan_policies())
        return [policy for policy in map(policy_of, rows) if policy is not None]

    async def set(self, request: RetentionRequest) -> RetentionReport:
        request = request.checked()
        namespace = Namespace.parse(request.namespace)
        return await self._change(namespace, plan_set_ttl(namespace, Ttl.parse(request.ttl)), request.dry_run)

    async def clear(self, request: RetentionTarget) -> RetentionReport:
        request = request.checked()
        namespace = Namespace.parse(request.namespace)
        return await self._change(namespace, plan_clear_ttl(namespace), request.dry_run, missing=no_ttl)

    async def hold(self, request: RetentionTarget) -> RetentionReport:
        request = request.checked()
        namespace = Namespace.parse(request.namespace)
        return await self._change(namespace, plan_hold(namespace), request.dry_run)

    async def release(self, request: RetentionTarget) -> RetentionReport:
        request = request.checked()
        namespace = Namespace.parse(request.namespace)
        return await self._change(namespace, plan_release(namespace), request.dry_run, missing=no_hold)

    async def _change(
        self,
        namespace: Namespace,
        statement: Statement,
        dry_run: bool,
        *,
        missing: Callable[[str], NotFound] | None = None,
    ) -> RetentionReport:
        """``statement`` (it answers the row as left, and ``present`` when it unsets a part that
        must be there), then the subtree's expiry written again; rolled back for a dry run."""
        answer: RetentionReport | None = None
        with database_errors():
            async with self._acquire() as connection:
                try:
                    async with connection.transaction():
                        await execute(connection, Statement(POLICIES_EXCLUSIVE))
                        (row,) = await fetch(connection, statement)
                        if missing is not None and not row["present"]:
                            raise missing(str(namespace))
                        expired, after = 0, 0
                        while True:
                            (batch,) = await fetch(connection, plan_recompute(namespace, after=after))
                            if batch["last"] is None:
                                break
                            expired, after = expired + batch["expired"], batch["last"]
                        answer = report(policy_of(row), expired, dry_run)
                        if dry_run:
                            raise _DryRun
                    await self._written(connection)
                except _DryRun:
                    pass
        assert answer is not None
        return answer
