"""Late-interaction token vectors, made after the write (migration 0019).

A write is acknowledged once its dense vector is queued: the token vectors cost a second encoder
pass a text, which a store does not wait for (docs/decisions/2026-12-05-late-interaction-after-
acknowledgement.md). This writer reads the items that have none of its model yet, oldest first,
encodes their words (role prefixes left out) in the encoder's lanes, at the lowest CPU priority,
and stores them, each step once this process's writes ease (``writing``): a bulk load's encoder
runs and index moves keep the cores to themselves. A read whose first hits lack them makes those
itself, so that its order never depends on how far the writer has come, and hands them over
(``made``) to be stored first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
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
# A step waits while this process has had a write under way for at least this share of the last
# BUSY_WINDOW_S: a bulk load keeps the cores for its encoder runs and the index, a trickle of writes
# does not hold the writer back (docs/tuning.md#token-writer-after-writes).
BUSY_SHARE = 0.5
BUSY_WINDOW_S = 0.5
# Moves of the walk kept until the write transactions in progress at each have ended; past this many
# the oldest two are kept as one (_missing).
UNSETTLED_MOVES = 1_000
# How often a waiting step looks again.
RECHECK_S = 0.05
# Nor longer than this: under writes that never ease, a step still runs this often.
LONGEST_WAIT_S = 5.0


class TokenWriter:
    """Makes and stores the token vectors the items lack, in the background once started."""

    def __init__(
        self,
        acquire: Acquire,
        encoder: LateInteraction,
        *,
        poll_s: float = POLL_S,
        longest_wait_s: float = LONGEST_WAIT_S,
    ) -> None:
        self._acquire = acquire
        self._encoder = encoder
        self._poll_s = poll_s
        self._longest_wait_s = longest_wait_s
        self._writes = WriteLoad(BUSY_WINDOW_S)
        self._after = 0  # the highest seq the oldest-first walk has passed
        self._unsettled: deque[tuple[int, int]] = deque()  # (xmax, place before): see _missing
        self._made: dict[str, bytes] = {}  # made by reads, stored by the next step
        self._wake = asyncio.Event()
        self._stepping = asyncio.Lock()  # one step at a time: a catch-up waits for the step under way
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

    def writing(self) -> contextlib.AbstractContextManager[None]:
        """Around a write, from its encoder run to its commit: counted in the load ``after_writes`` waits out."""
        return self._writes.writing()

    def busy_share(self) -> float:
        """The share of the last ``BUSY_WINDOW_S`` this process had a write under way."""
        return self._writes.share()

    async def after_writes(self) -> None:
        """Until writes have been under way for less than ``BUSY_SHARE`` of the last ``BUSY_WINDOW_S``, or
        ``longest_wait_s`` have passed."""
        deadline = time.monotonic() + self._longest_wait_s
        while True:  # the share falls as time passes: nothing to wait on but the clock
            now = time.monotonic()
            if now >= deadline or self._writes.share(now) < BUSY_SHARE:
                return
            await asyncio.sleep(min(RECHECK_S, deadline - now))

    def made(self, stored: Mapping[str, bytes]) -> None:
        """Token vectors a read made (``packed``) for items that lacked them: stored by the next step."""
        self._made.update(stored)
        self._wake.set()

    async def step(self) -> int:
        """One step: what reads made first, else the next oldest items without token vectors; how many
        were stored. After the step under way, if any: its items are past the walk's place but not yet
        stored, and a caller that steps until nothing is left must find them stored."""
        async with self._stepping:
            return await self._step()

    async def _step(self) -> int:
        model = self._encoder.name
        if self._made:
            made, self._made = self._made, {}
            await self._store(list(made), list(made.values()))
            return len(made)
        rows = await self._missing(model)
        if not rows:
            return 0
        made_now = await anyio.to_thread.run_sync(self._encoder.items, [own_words(row["text"]) for row in rows])
        await self._store([row["id"] for row in rows], [packed(tokens) for tokens in made_now])
        return len(rows)

    async def _missing(self, model: str) -> list[asyncpg.Record]:
        """The next oldest items without token vectors, the walk's place moved past them.

        Items take their ``seq`` as they are inserted but are seen once their transaction commits,
        which may be after a later one's: a walk that passed the later items would never come back
        for the earlier. So each move past items while write transactions were in progress is kept
        with the snapshot's ``xmax``; once a snapshot's ``xmin`` reaches it, every one of those has
        ended, and the walk goes back to where that move started (items done since are skipped by
        the statement, not made again). A write has its transaction id before its first item draws a
        seq (migration 0023), so every snapshot from then on counts it until it ends."""
        while True:
            async with self._acquire() as connection:
                rows = await fetch(connection, Statement(MISSING_AFTER, (model, self._after, STEP)))
            xmin, xmax = rows[0]["xmin"], rows[0]["xmax"]
            rows = [row for row in rows if row["seq"] is not None]
            back = [start for ended, start in self._unsettled if ended <= xmin]
            self._unsettled = deque(move for move in self._unsettled if move[0] > xmin)
            if rows:
                if xmin < xmax:  # some write transaction was in progress
                    self._unsettled.append((xmax, self._after))
                    while len(self._unsettled) > UNSETTLED_MOVES:  # the oldest two as one: back further, later
                        (_, start), (ended, later) = self._unsettled.popleft(), self._unsettled.popleft()
                        self._unsettled.appendleft((ended, min(start, later)))
                self._after = max(self._after, max(row["seq"] for row in rows))
            if back:
                self._after = min(self._after, *back)
            if rows or not back:
                return rows

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


class WriteLoad:
    """How much of the last ``window_s`` a write was under way (several at once count once)."""

    def __init__(self, window_s: float) -> None:
        self._window_s = window_s
        self._under_way = 0
        self._since = 0.0  # when the writes under way began (time.monotonic)
        self._spans: deque[tuple[float, float]] = deque()  # earlier busy spans, oldest first

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        if not self._under_way:
            self._since = time.monotonic()
        self._under_way += 1
        try:
            yield
        finally:
            self._under_way -= 1
            if not self._under_way:
                now = time.monotonic()
                self._forget_before(now - self._window_s)  # kept short with no one asking (no writer running)
                self._spans.append((self._since, now))

    def share(self, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        start = now - self._window_s
        self._forget_before(start)
        busy = sum(end - max(began, start) for began, end in self._spans)
        if self._under_way:
            busy += now - max(self._since, start)
        return busy / self._window_s

    def _forget_before(self, start: float) -> None:
        while self._spans and self._spans[0][1] <= start:
            self._spans.popleft()


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
