"""Late-interaction token vectors, made after the write (migration 0019).

A write is acknowledged once its dense vector is queued: the token vectors cost a second encoder
pass a text, which a store does not wait for (docs/decisions/2026-12-05-late-interaction-after-
acknowledgement.md). This writer reads the items that have none of its model yet, oldest first,
encodes their words (role prefixes left out) in the encoder's lanes, at the lowest CPU priority,
and stores them, each step once this process's writes pause (``writing``): a bulk load's encoder
runs and index moves keep the cores to themselves. A read whose first hits lack them makes those
itself, so that its order never depends on how far the writer has come, and hands them over
(``made``) to be stored first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager

import anyio.to_thread
import asyncpg

from app.embeddings.late import LateInteraction, packed
from app.engine.context import without_roles
from app.engine.postgres import background
from app.engine.postgres.errors import classify
from app.engine.postgres.pool import execute, fetch
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.tokens import MISSING_AFTER, STORE

logger = logging.getLogger("engram")

Acquire = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]

# Items encoded and stored per step: a step's texts are one call to the encoder's lanes.
STEP = 16
# How long an idle writer waits for a write before it looks again (another process's writes).
POLL_S = 5.0
# A failing writer retries after this long, or as soon as a write commits.
RETRY_S = 5.0
# A step waits until this process has had no write under way for this long: a bulk load's batches,
# a few ms apart, keep the cores for their encoder runs and the index (docs/tuning.md#token-writer-after-writes).
QUIET_S = 0.05
# Nor longer than this: under writes that never pause, a step still runs this often.
LONGEST_WAIT_S = 5.0


class TokenWriter:
    """Makes and stores the token vectors the items lack, in the background once started."""

    def __init__(
        self,
        acquire: Acquire,
        encoder: LateInteraction,
        *,
        poll_s: float = POLL_S,
        quiet_s: float = QUIET_S,
        longest_wait_s: float = LONGEST_WAIT_S,
    ) -> None:
        self._acquire = acquire
        self._encoder = encoder
        self._poll_s = poll_s
        self._quiet_s = quiet_s
        self._longest_wait_s = longest_wait_s
        self._writes = 0  # this process's writes under way
        self._last_write = 0.0  # when the last of them ended (time.monotonic)
        self._no_writes = asyncio.Event()
        self._no_writes.set()
        self._after = 0  # the highest seq the oldest-first walk has passed
        self._made: dict[str, bytes] = {}  # made by reads, stored by the next step
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="engram-token-writer")

    async def stop(self) -> None:
        task, self._task = self._task, None
        await background.stop(task)

    def wrote(self) -> None:
        """A write committed: there is something to make."""
        self._wake.set()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Around a write, from its encoder run to its commit: the next step waits for writes to pause."""
        self._writes += 1
        self._no_writes.clear()
        try:
            yield
        finally:
            self._writes -= 1
            self._last_write = time.monotonic()
            if not self._writes:
                self._no_writes.set()

    async def after_writes(self) -> None:
        """Until no write has been under way for ``quiet_s``, or ``longest_wait_s`` have passed."""
        deadline = time.monotonic() + self._longest_wait_s
        while (now := time.monotonic()) < deadline:
            if self._writes:
                await _within(self._no_writes, deadline - now)
            elif (pause := self._last_write + self._quiet_s - now) > 0:
                await asyncio.sleep(min(pause, deadline - now))
            else:
                return

    def made(self, stored: Mapping[str, bytes]) -> None:
        """Token vectors a read made (``packed``) for items that lacked them: stored by the next step."""
        self._made.update(stored)
        self._wake.set()

    async def step(self) -> int:
        """One step: what reads made first, else the next oldest items without token vectors; how many
        were stored."""
        model = self._encoder.name
        if self._made:
            made, self._made = self._made, {}
            await self._store(list(made), list(made.values()))
            return len(made)
        async with self._acquire() as connection:
            rows = await fetch(connection, Statement(MISSING_AFTER, (model, self._after, STEP)))
        if not rows:
            return 0
        self._after = max(self._after, max(row["seq"] for row in rows))
        made_now = await anyio.to_thread.run_sync(self._encoder.items, [own_words(row["text"]) for row in rows])
        await self._store([row["id"] for row in rows], [packed(tokens) for tokens in made_now])
        return len(rows)

    async def _store(self, ids: list[str], blobs: list[bytes]) -> None:
        async with self._acquire() as connection:
            await execute(connection, Statement(STORE, (self._encoder.name, ids, blobs)))

    async def catch_up(self) -> int:
        """Steps until every item has token vectors; how many were stored."""
        stored = 0
        while (count := await self.step()) > 0:
            stored += count
        return stored

    async def _run(self) -> None:
        while True:
            self._wake.clear()  # before the step: a write during it wakes the next wait
            if not self._made:  # what reads made is stored at once: no encoder run
                await self.after_writes()
            try:
                made = await self.step()
            except Exception as error:  # logged, retried: the items keep being found by their place
                logger.warning("token writer: %s", classify(error).message)
                made, wait = 0, RETRY_S
            else:
                wait = self._poll_s
            if made == 0:
                await _within(self._wake, wait)


async def _within(event: asyncio.Event, seconds: float) -> None:
    """Until ``event`` is set or ``seconds`` have passed. ``asyncio.timeout``, not ``wait_for``: on Python
    3.11 a cancel that came as the event was set was lost (wait_for returned), the task ran on, and a
    stop waited for it for ever."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()


def own_words(text: str) -> str:
    """What an item's token vectors are made of: its words, a role prefix (``user: ``) left out."""
    return without_roles(text) or text
