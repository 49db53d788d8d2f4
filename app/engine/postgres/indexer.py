"""The vector indexer: queued vectors into the HNSW index after the write that brought them.

A write queues its vectors in ``engram_vector_backlog`` and is acknowledged; this moves
them into ``engram_embeddings`` (inserting each into the HNSW index, most of a write's
cost) on connections of its own, so PostgreSQL does it on other cores while the
service takes the next write. Searches read the backlog exactly beside the index, so
nothing waits to be found. A writer that finds the backlog over its limit indexes on
its own time until it is not: the backlog, and so the exact part of every search,
stays short however fast writes come, and writes never outrun the index by more.
Several processes may run indexers on one database: each claims rows no other holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager

import asyncpg

from app.engine.postgres import background
from app.engine.postgres.errors import classify
from app.engine.postgres.pool import execute, fetch, fetchval
from app.engine.postgres.queries.backlog import (
    BACKLOG_SIZE,
    BEGIN_MOVE,
    DROP_HNSW,
    HNSW_DEFINITION,
    INDEXED_COUNT,
    INDEXED_ESTIMATE,
    VACUUM_BACKLOG,
    plan_claim,
    plan_claim_oldest,
    plan_move,
)

logger = logging.getLogger("engram")

Acquire = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]

# Vectors moved per transaction. At 100k items an HNSW insert takes ~2 ms, so a step holds its
# rows (and a forget of them waits) for ~0.2 s.
STEP = 100
# The fewest a background worker claims while there is more (Share): a step's fixed cost (a
# transaction, the claim, the move statement) stays small beside its inserts.
LEAST_SHARE = 10
# Vectors moved since the backlog was last vacuumed (VACUUM_BACKLOG) after which a worker that
# finds it empty vacuums it: the table stays small for the searches that read it.
# docs/tuning.md#indexer-shares-and-vacuum
VACUUM_AFTER = 1_000
# Vectors this process queues between two counts of the backlog (BacklogCount).
# docs/tuning.md#one-round-trip-writes
COUNT_EVERY = 32
# How long a worker woken by a write waits before it claims, so that the writes of that moment
# share one move: its fixed cost (a transaction, the claim reading the backlog) is paid once for
# them. Searches read the waiting vectors exactly meanwhile. docs/tuning.md#one-round-trip-writes
GATHER_S = 0.01
# A failing indexer retries after 1 s, then 2, 4 ... up to this, or as soon as a write commits.
MAX_RETRY_S = 30.0


class BacklogCount:
    """Which writes ask how many vectors wait (a count of the backlog, which reads all of it): one
    whenever this process has queued ``every`` vectors since the last one asked. A write that
    finds the backlog over its limit indexes until it is not (VectorIndexer.catch_up); between
    counts the backlog may pass the limit by what the writes in between queued.
    docs/tuning.md#one-round-trip-writes
    """

    def __init__(self, every: int) -> None:
        self._every = every
        self._queued = 0

    def due(self, queued: int) -> bool:
        """Whether the write about to queue ``queued`` vectors asks."""
        self._queued += queued
        if self._queued < self._every:
            return False
        self._queued = 0
        return True


class Share:
    """What the workers of one indexer hold: each claims its share of the rest (CLAIM_BACKLOG).

    With whole steps, the last vectors of a burst went to one worker while the other idled
    (docs/tuning.md#indexer-shares-and-vacuum).
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.held = 0

    @contextlib.contextmanager
    def holding(self, count: int) -> Iterator[None]:
        self.held += count
        try:
            yield
        finally:
            self.held -= count


async def index_backlog(connection: asyncpg.Connection, *, step: int = STEP, share: Share | None = None) -> int:
    """One transaction: the oldest queued vectors nobody else holds moved into the index; how many.

    ``step`` of them, or with a ``share`` that many at most. Its commit does not wait for its WAL
    to reach the disk (queries.backlog.MOVE_COMMITS_ASYNC): a crash undoes the move whole, and the vectors, still
    queued, are moved again.
    """
    sharing = (
        {"least": min(LEAST_SHARE, step), "held": share.held, "workers": share.workers}
        if share
        else {"least": step, "held": 0, "workers": 1}
    )
    with contextlib.ExitStack() as holding:  # held until the move has committed, the rows gone for all
        async with connection.transaction():
            await execute(connection, BEGIN_MOVE)
            claimed = await fetch(connection, plan_claim(n=step, **sharing))
            if not claimed:
                return 0
            if share:
                holding.enter_context(share.holding(len(claimed)))
            ids, models = [row["item_id"] for row in claimed], [row["model"] for row in claimed]
            return int(await fetchval(connection, plan_move(ids, models)))


async def backlog_size(connection: asyncpg.Connection) -> int:
    return int(await fetchval(connection, BACKLOG_SIZE))


async def index_everything(connection: asyncpg.Connection) -> None:
    """``index_backlog`` until nothing waits, including what other indexers held for a moment."""
    while True:
        if await index_backlog(connection):
            continue
        if not await backlog_size(connection):
            return
        await asyncio.sleep(0.01)  # what is left is another indexer's, for a moment


# Vectors claimed and moved per statement while the index is being built afresh (rebuild_index).
REBUILD_STEP = 10_000
# How long each of a rebuild's statements may take (a pooled connection's bound is its
# statement_timeout, 15 s): building the graph of a million vectors takes minutes on 2 cores.
REBUILD_TIMEOUT_S = 3_600.0


async def worth_rebuilding(connection: asyncpg.Connection, *, least: int) -> bool:
    """Whether the backlog is better moved by building the index afresh than by inserting each vector.

    pgvector builds an HNSW graph in memory several times faster a vector than it inserts one into
    the graph on disk, so a backlog of at least ``least`` vectors and at least as many as the index
    holds (a bulk load: the index at least doubles) is moved by ``rebuild_index``.
    docs/tuning.md#bulk-index-build
    """
    backlog = await backlog_size(connection)
    if backlog < least:
        return False
    indexed = int(await fetchval(connection, INDEXED_ESTIMATE) or 0)
    if indexed < 0:  # never counted yet
        indexed = int(await fetchval(connection, INDEXED_COUNT))
    return backlog >= indexed


async def rebuild_index(connection: asyncpg.Connection, *, memory_mb: int) -> int:
    """One transaction: the index dropped, every queued vector nobody else holds moved, the index built
    again as it was defined; how many moved.

    Reads of vectors wait for it (the index is gone until it commits); a failure or a kill undoes
    it whole, the index as before and the vectors still queued. ``memory_mb`` is the build's
    maintenance_work_mem: a graph that outgrows it is built on disk, much slower.
    """
    bound = REBUILD_TIMEOUT_S
    definition = await connection.fetchval(HNSW_DEFINITION.sql, timeout=bound)
    if definition is None:  # no index to build (a schema being changed): vector by vector
        await index_everything(connection)
        return 0
    moved = 0
    claim = plan_claim_oldest(REBUILD_STEP)
    async with connection.transaction():
        await connection.execute(BEGIN_MOVE.sql, timeout=bound)
        await connection.execute(
            f"SET LOCAL statement_timeout = {int(bound * 1000)}; SET LOCAL maintenance_work_mem = '{int(memory_mb)}MB'",
            timeout=bound,
        )
        # Before any queued row is claimed: a forget waiting for the index's table then holds none of them.
        await connection.execute(DROP_HNSW, timeout=bound)
        while claimed := await connection.fetch(claim.sql, *claim.args, timeout=bound):
            move = plan_move([row["item_id"] for row in claimed], [row["model"] for row in claimed])
            moved += int(await connection.fetchval(move.sql, *move.args, timeout=bound))
        await connection.execute(definition, timeout=bound)
    return moved


class VectorIndexer:
    """Runs ``index_backlog`` in the background whenever there is a backlog, on ``workers`` connections.

    PostgreSQL inserts into the HNSW graph on one core per connection: with one worker,
    a 2-core machine left a core idle whenever writes paused
    (docs/tuning.md#indexer-shares-and-vacuum). Each worker claims rows no other holds.
    ``wake`` after a write commits wakes one worker; a worker that moved a whole share
    looks again at once and wakes the next, one that moved less waits for a wake: a trickle
    of one-item writes costs a move each, not a move and empty claims
    (docs/tuning.md#one-round-trip-writes). Rows queued by another process, or left by a
    crash, are found by a poll every ``poll_s`` when idle. A failure (the database away) is
    logged and retried after ``retry_s``, twice that after a second, and so on up to
    MAX_RETRY_S, or at a write's wake: the rows stay queued, nothing is lost. A worker that
    empties the backlog after ``vacuum_after`` moves vacuums it.
    """

    def __init__(
        self,
        acquire: Acquire,
        *,
        workers: int = 1,
        step: int = STEP,
        poll_s: float = 1.0,
        retry_s: float = 1.0,
        vacuum_after: int = VACUUM_AFTER,
        gather_s: float = GATHER_S,
    ) -> None:
        if workers < 1:
            raise ValueError("an indexer needs at least one worker")
        self._acquire = acquire
        self._workers = workers
        self._step = step
        self._poll_s = poll_s
        self._retry_s = retry_s
        self._wakes = [asyncio.Event() for _ in range(workers)]  # one a worker
        self._gathers = [False] * workers  # whether a worker's wake came from a write of a few (it gathers)
        self._gathering = 0  # workers waiting to claim: they take what is queued until they do
        self._tasks: list[asyncio.Task[None]] = []
        self._share = Share(workers)
        self._vacuum_after = vacuum_after
        self._gather_s = gather_s
        self._unvacuumed = 0

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._run(n), name=f"engram-vector-indexer-{n}") for n in range(self._workers)
            ]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        await background.stop(*tasks)

    def wake(self, queued: int = 1) -> None:
        """After a write of ``queued`` vectors committed: one worker looks, the first not woken
        already (a worker moving now looks again when done), unless one is gathering: its claim,
        still to come, takes this write's vectors too. It gathers first when the write queued less
        than a share. A worker that finds more than a share wakes the next."""
        if not self._gathering:
            self._wake_one(gather=queued < LEAST_SHARE)

    def _wake_one(self, *, gather: bool, but: int | None = None) -> None:
        for n, event in enumerate(self._wakes):
            if n != but and not event.is_set():
                self._gathers[n] = gather
                event.set()
                return

    async def catch_up(self, *, to: int) -> None:
        """Index on the caller's time until at most ``to`` vectors wait, or the rest are held by other indexers.

        Best effort: the caller's write has committed, so a failure here is logged and leaves
        the backlog to the background indexer.
        """
        try:
            async with self._acquire() as connection:
                while await index_backlog(connection, step=self._step) and await backlog_size(connection) > to:
                    pass
        except Exception as error:
            logger.warning("vector indexer: %s", classify(error).message)

    async def _run(self, worker: int) -> None:
        delay = self._retry_s
        least = min(LEAST_SHARE, self._step)
        while True:
            self._wakes[worker].clear()
            try:
                async with self._acquire() as connection:
                    moved = await index_backlog(connection, step=self._step, share=self._share)
                    self._unvacuumed += moved
                    # Less than a share, and no other worker mid-move: the backlog is empty but for what
                    # was queued since, and a vacuum can clear every moved row's page.
                    if moved < least and not self._share.held and self._unvacuumed >= self._vacuum_after:
                        self._unvacuumed = 0
                        await connection.execute(VACUUM_BACKLOG)
            except Exception as error:
                logger.warning("vector indexer: %s; retrying within %g s", classify(error).message, delay)
                await self._idle(worker, delay)
                delay = min(delay * 2, MAX_RETRY_S)
                continue
            delay = self._retry_s
            if moved >= least:
                self._wake_one(gather=False, but=worker)  # there may be more: another takes its share too
            elif await self._idle(worker, self._poll_s) and self._gathers[worker]:
                # Less than a share: nothing else was free when it claimed. Woken by a write of a
                # few vectors since: the writes of the next moment are taken with it.
                self._gathering += 1
                try:
                    await asyncio.sleep(self._gather_s)
                finally:
                    self._gathering -= 1

    async def _idle(self, worker: int, seconds: float) -> bool:
        """Until this worker is woken (True), or ``seconds`` have passed (False)."""
        try:
            async with asyncio.timeout(seconds):
                await self._wakes[worker].wait()
        except TimeoutError:
            return False
        return True
