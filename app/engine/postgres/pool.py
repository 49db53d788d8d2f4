"""Running planned statements on asyncpg connections."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg

from app.engine.postgres.queries.statement import Statement

# The service's sessions say who they are, so `engram reembed` can tell a running service is there.
APPLICATION_NAME = "engram"

# A row as a read returns it: asyncpg's Record, read by column name.
Row = Mapping[str, Any]


async def fetch(connection: asyncpg.Connection, statement: Statement) -> list[asyncpg.Record]:
    """The statement's rows (prepared once a connection, from asyncpg's statement cache)."""
    return await connection.fetch(statement.sql, *statement.args)


async def fetchval(connection: asyncpg.Connection, statement: Statement) -> Any:
    """The first column of the statement's first row."""
    return await connection.fetchval(statement.sql, *statement.args)


async def execute(connection: asyncpg.Connection, statement: Statement) -> None:
    """The statement run for its effect; without arguments in one simple-protocol message."""
    await connection.execute(statement.sql, *statement.args)
