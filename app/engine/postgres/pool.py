"""The engine's connections: two asyncpg pools, and running planned statements on them.

Statements go to asyncpg itself, each prepared once a connection and kept in asyncpg's
statement cache: one round trip a read. The pools are asyncpg's own, their connections set up
once (settings at startup, the jsonb and pgvector codecs by ``init``) and handed back
as they were taken: no reset query, no ping (asyncpg replaces a connection the server closed
when it is next taken).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson

from app.engine.postgres.options import HNSWOptions, PoolOptions
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.vectors import register_vector_types
from app.telemetry.metrics import statement_timer

# The service's sessions say who they are, so `engram reembed` can tell a running service is there.
APPLICATION_NAME = "engram"

# A row as a read returns it: asyncpg's Record, read by column name.
Row = Mapping[str, Any]

# How long closing a pool waits for its connections to come back before it drops them.
CLOSE_TIMEOUT_S = 5.0


def connection_settings(pool: PoolOptions, hnsw: HNSWOptions, *, generic_plan: bool) -> dict[str, str]:
    """What every pooled connection sets at startup (``generic_plan``: the pool that reuses one
    generic plan per statement; the other plans each for its values, Statement.generic_plan)."""
    settings = {
        "application_name": APPLICATION_NAME,
        "statement_timeout": str(pool.statement_timeout_ms),
        "jit": "off",  # JIT compiles cost more than these short queries take
        "max_parallel_workers_per_gather": str(pool.parallel_workers),
        "plan_cache_mode": "force_generic_plan" if generic_plan else "force_custom_plan",
        "hnsw.ef_search": str(hnsw.ef_search),
        "hnsw.iterative_scan": hnsw.iterative_scan,
    }
    if not generic_plan:
        settings["effective_io_concurrency"] = str(pool.custom_plan_io_concurrency)
    return settings


def _jsonb(value: bytes) -> Any:
    return orjson.loads(value[1:])  # binary jsonb: a version byte, then the text


async def prepare_connection(connection: asyncpg.Connection) -> None:
    """A new connection's codecs: json and jsonb read by orjson (every hit's meta is jsonb;
    docs/tuning.md#json-decoding), vector and halfvec in pgvector's binary form."""
    await connection.set_type_codec(
        "json", schema="pg_catalog", encoder=str.encode, decoder=orjson.loads, format="binary"
    )
    await connection.set_type_codec(
        "jsonb", schema="pg_catalog", encoder=lambda text: b"\x01" + text.encode(), decoder=_jsonb, format="binary"
    )
    await register_vector_types(connection)


async def _as_it_was(_: asyncpg.Connection) -> None:
    """A connection goes back to its pool as it came: asyncpg's default reset (RESET ALL, CLOSE ALL,
    UNLISTEN, advisory unlocks) would be a round trip on every return. Statements leave nothing
    behind on the connection (a breadth is local to its statement, an advisory lock to its
    transaction); an open transaction is still rolled back before this runs."""


@dataclass(frozen=True)
class PoolUsage:
    """One pool's connections at a moment: handed out, open and idle, and callers waiting for one."""

    pool: str
    in_use: int
    idle: int
    waiting: int
    max_size: int


class Pools:
    """The two pools: ``custom`` plans every statement for its values, ``generic`` reuses one plan."""

    def __init__(self, custom: asyncpg.Pool, generic: asyncpg.Pool, *, acquire_timeout_s: float) -> None:
        self._pools = {False: custom, True: generic}
        self._acquire_timeout_s = acquire_timeout_s
        # Callers inside acquire(), per pool: asyncpg does not say how many wait.
        self._waiting = {False: 0, True: 0}

    @classmethod
    async def open(cls, dsn: str, pool: PoolOptions, hnsw: HNSWOptions) -> Pools:
        """Both pools, lazily: a connection is opened when first needed and kept while idle."""

        async def opened(generic_plan: bool) -> asyncpg.Pool:
            return await asyncpg.create_pool(
                dsn,
                min_size=0,
                max_size=pool.size + pool.overflow,
                max_inactive_connection_lifetime=0,  # kept while idle, as a pool of ``size`` should
                init=prepare_connection,
                reset=_as_it_was,
                timeout=pool.connect_timeout_s,
                command_timeout=pool.statement_timeout_ms / 1000 + pool.connect_timeout_s,
                server_settings=connection_settings(pool, hnsw, generic_plan=generic_plan),
            )

        custom = await opened(False)
        try:
            generic = await opened(True)
        except BaseException:
            await custom.close()
            raise
        return cls(custom, generic, acquire_timeout_s=pool.connect_timeout_s)

    @contextlib.asynccontextmanager
    async def connection(self, *, generic_plan: bool = False) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection; one a failure interrupted is dropped, not handed to the next caller
        (it may be half-way through a message exchange)."""
        pool = self._pools[generic_plan]
        self._waiting[generic_plan] += 1
        try:
            connection = await pool.acquire(timeout=self._acquire_timeout_s)
        finally:
            self._waiting[generic_plan] -= 1
        try:
            yield connection
        except BaseException:
            connection.terminate()
            raise
        finally:
            await pool.release(connection)

    def usage(self) -> list[PoolUsage]:
        """Each pool's connections now, read without a round trip (for a metrics scrape)."""
        return [
            PoolUsage(
                pool="generic" if generic_plan else "custom",
                in_use=pool.get_size() - pool.get_idle_size(),
                idle=pool.get_idle_size(),
                waiting=self._waiting[generic_plan],
                max_size=pool.get_max_size(),
            )
            for generic_plan, pool in self._pools.items()
        ]

    async def close(self) -> None:
        """Both pools closed once their connections are back, or dropped after CLOSE_TIMEOUT_S."""
        for pool in self._pools.values():
            try:
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await pool.close()
            except TimeoutError:
                pool.terminate()


async def fetch(connection: asyncpg.Connection, statement: Statement) -> list[asyncpg.Record]:
    """The statement's rows (prepared once a connection, from asyncpg's statement cache)."""
    with statement_timer(statement.family):
        return await connection.fetch(statement.sql, *statement.args)


async def fetchval(connection: asyncpg.Connection, statement: Statement) -> Any:
    """The first column of the statement's first row."""
    with statement_timer(statement.family):
        return await connection.fetchval(statement.sql, *statement.args)


async def execute(connection: asyncpg.Connection, statement: Statement) -> None:
    """The statement run for its effect; without arguments in one simple-protocol message."""
    with statement_timer(statement.family):
        await connection.execute(statement.sql, *statement.args)
