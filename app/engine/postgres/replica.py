"""Reads on a streaming replica, writes on the primary, and each client's own writes seen at once.

With ``ENGRAM_READ_DATABASE_URL`` the engine's reads (fetch, recall, list, get, explore, export)
run here; everything that writes, the keys, the undo window and the background work stay on the
primary. A read whose client presented a position (app/engine/consistency.py) runs on the replica
once it has replayed that far, waiting up to ``ReplicaOptions.wait_ms``; past that the primary
answers it. A read without one gets the replica as it is, a little behind the primary. A replica
that cannot answer sends every read to the primary for ``retry_s``, then is tried again; a read the
replica cancels (a conflict with the WAL it replays) is asked of the primary again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import asyncpg

from app.contract.errors import ConfigError
from app.engine import consistency
from app.engine.postgres.options import ReplicaOptions
from app.engine.postgres.pool import Pools, fetch
from app.engine.postgres.queries.statement import Statement
from app.telemetry.metrics import READ_STATEMENTS

logger = logging.getLogger("engram")

# The position a server stands at: how far a replica has replayed, or a primary has written.
STANDS_AT = "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END"
# Where a write's commit left the primary's log, read on its connection once it committed.
WRITTEN_TO = "SELECT pg_current_wal_lsn()"
# What makes two servers one cluster and one database: a physical replica shares both.
IDENTITY = "SELECT (SELECT system_identifier FROM pg_control_system()), current_database()"

NOT_A_REPLICA = (
    "ENGRAM_READ_DATABASE_URL is not a streaming replica of ENGRAM_DATABASE_URL's database "
    "(another cluster, or another database in it)"
)

# The first wait between two looks at the replica's position, doubled up to the last.
FIRST_POLL_S = 0.002
LAST_POLL_S = 0.05

# The replica failed to answer: it is away, restarting, or refuses us. The primary answers meanwhile.
_UNREACHABLE = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    asyncpg.InvalidAuthorizationSpecificationError,
    asyncpg.InvalidCatalogNameError,
)
# A read the replica cancelled because the WAL it replays removed rows the read needed.
_CONFLICT = (asyncpg.SerializationError, asyncpg.DeadlockDetectedError)


class ReadRouter:
    """Which server each read statement runs on. Without a replica, always the primary."""

    def __init__(
        self,
        primary: Pools,
        replica: Pools | None = None,
        *,
        wait_s: float = ReplicaOptions.wait_ms / 1000,
        retry_s: float = ReplicaOptions.retry_s,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._primary = primary
        self._replica = replica
        self._wait_s = wait_s
        self._retry_s = retry_s
        self._clock = clock
        self._down_until = 0.0
        self._identity: tuple[int, str] | None = None  # the primary's, once known
        self._verified = False  # the replica's identity checked since it last answered

    @property
    def routing(self) -> bool:
        """Whether reads may go to a replica (and writes must report their position)."""
        return self._replica is not None

    async def start(self, primary: asyncpg.Connection) -> None:
        """Learn the primary's identity and check the replica's now: a read URL naming another cluster
        or database stops the start. A replica that does not answer yet is tried at the first read."""
        if self._replica is None:
            return
        self._identity = tuple(await primary.fetchrow(IDENTITY))  # type: ignore[assignment]
        try:
            async with self._replica.connection() as connection:
                same = await self._verify(connection)
        except _UNREACHABLE as error:
            self._unreachable(error)
            return
        if not same:
            raise ConfigError(NOT_A_REPLICA)

    async def run(self, statement: Statement, *, at_least: int | None = None) -> list[asyncpg.Record]:
        """The statement's rows, from the replica when it may answer, else from the primary; ``at_least``:
        a position the read must see beside the request's (where a listing's first page was read)."""
        rows, _ = await self._run(statement, seen=False, at_least=at_least)
        return rows

    async def run_seen(self, statement: Statement) -> tuple[list[asyncpg.Record], int | None]:
        """The rows and the position of the server that answered (None without a replica): a later
        page of the same listing must be read where that position is replayed, or it could miss
        rows this page's server already held."""
        return await self._run(statement, seen=True, at_least=None)

    async def _run(
        self, statement: Statement, *, seen: bool, at_least: int | None
    ) -> tuple[list[asyncpg.Record], int | None]:
        reason = self._replica_refused()
        if reason is None:
            assert self._replica is not None
            try:
                async with self._replica.connection(generic_plan=statement.generic_plan) as connection:
                    if not self._verified and not await self._verify(connection):
                        logger.error("%s: reads go to the primary", NOT_A_REPLICA)
                        reason = "not_a_replica"
                    elif await self._caught_up(connection, at_least):
                        rows = await fetch(connection, statement)
                        position = await connection.fetchval(STANDS_AT) if seen else None
                        READ_STATEMENTS.labels("replica", "caught_up").inc()
                        return rows, position
                    else:
                        reason = "behind"
            except _UNREACHABLE as error:
                self._unreachable(error)
                reason = "replica_down"
            except _CONFLICT:
                reason = "conflict"
        async with self._primary.connection(generic_plan=statement.generic_plan) as connection:
            rows = await fetch(connection, statement)
            position = await connection.fetchval(STANDS_AT) if seen and self.routing else None
        if reason != "primary_only":
            READ_STATEMENTS.labels("primary", reason).inc()
        return rows, position

    def _replica_refused(self) -> str | None:
        """Why this read goes to the primary without asking the replica; None: ask it."""
        if self._replica is None:
            return "primary_only"
        if consistency.sees_everything():
            return "decides_a_write"
        if self._clock() < self._down_until:
            return "replica_down"
        return None

    async def _caught_up(self, connection: asyncpg.Connection, at_least: int | None) -> bool:
        """Whether the replica has replayed what the read must see, waiting up to the bound. Asked on
        the connection the read then runs on: behind a balancer, each connection may be another replica."""
        needed = max((p for p in (consistency.read_after(), at_least) if p is not None), default=None)
        here = consistency.current()
        if needed is None:
            return True
        if here is not None and here.replica_behind is not None and needed >= here.replica_behind:
            return False
        deadline = self._clock() + self._wait_s
        pause = FIRST_POLL_S
        while True:
            reached = await connection.fetchval(STANDS_AT) or 0
            if reached >= needed:
                return True
            left = deadline - self._clock()
            if left <= 0:
                if here is not None:
                    here.replica_behind = needed
                return False
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, LAST_POLL_S)

    async def _verify(self, connection: asyncpg.Connection) -> bool:
        """Whether the replica is a copy of the primary's cluster and database (else positions mean
        nothing on it); one that is not is left alone for ``retry_s``."""
        if self._identity is None:
            return True
        if tuple(await connection.fetchrow(IDENTITY)) != self._identity:
            self._verified = False
            self._down_until = self._clock() + self._retry_s
            return False
        if not self._verified:
            logger.info("read replica answers: reads go to it")
        self._verified = True
        return True

    def _unreachable(self, error: BaseException) -> None:
        """Reads go to the primary for ``retry_s``; said once each time the replica goes away."""
        if self._verified or self._down_until == 0.0:
            logger.warning(
                "read replica unreachable (%s): reads go to the primary, tried again every %.0f s",
                type(error).__name__,
                self._retry_s,
            )
        self._verified = False
        self._down_until = self._clock() + self._retry_s

    async def written(self, connection: asyncpg.Connection) -> None:
        """After a write committed on ``connection``: its position, for the client to present
        (nothing to do without a replica, where every read sees every write)."""
        position = await self.position(connection)
        if position is not None:
            consistency.wrote(position)

    async def position(self, connection: asyncpg.Connection) -> int | None:
        """After a write committed on ``connection``: the position it reached; None without a replica."""
        if self._replica is None:
            return None
        return int(await connection.fetchval(WRITTEN_TO))

    async def problem(self) -> str | None:
        """Why the replica cannot serve reads now, or None (also None without a replica)."""
        if self._replica is None:
            return None
        try:
            async with asyncio.timeout(3), self._replica.connection() as connection:
                if not await self._verify(connection):
                    return f"{NOT_A_REPLICA}: reads go to the primary"
        except Exception as error:  # health never raises
            self._unreachable(error)
            return "the read replica cannot be reached: reads go to the primary"
        self._down_until = 0.0
        return None

    async def close(self) -> None:
        if self._replica is not None:
            await self._replica.close()
