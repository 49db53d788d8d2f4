"""Late-interaction token vectors, made after the write (migration 0019).

A write is acknowledged once its dense vector is queued: the token vectors cost a second encoder
pass a text, which a store does not wait for (docs/decisions/2026-12-05-late-interaction-after-
acknowledgement.md). This writer reads the items that have none of its model yet, oldest first,
encodes their words (role prefixes left out) in the encoder's lanes and stores them. Until then a
hit is re-scored by its place alone (app/engine/interaction.py); a read that meets such a hit asks
for it (``want``), so an item the oldest-first walk passed (one restored under its old ``seq``)
is made next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager

import anyio.to_thread
import asyncpg

from app.embeddings.late import LateInteraction, packed
from app.engine.context import without_roles
from app.engine.postgres import background
from app.engine.postgres.errors import classify
from app.engine.postgres.pool import execute, fetch
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.tokens import MISSING_AFTER, MISSING_AMONG, STORE

logger = logging.getLogger("engram")

Acquire = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]

# Items encoded and stored per step: a step's texts are one call to the encoder's lanes.
STEP = 16
# How long an idle writer waits for a write before it looks again (another process's writes).
POLL_S = 5.0
# A failing writer retries after this long, or as soon as a write commits.
RETRY_S = 5.0


class TokenWriter:
    """Makes and stores the token vectors the items lack, in the background once started."""

    def __init__(self, acquire: Acquire, encoder: LateInteraction, *, poll_s: float = POLL_S) -> None:
        self._acquire = acquire
        self._encoder = encoder
        self._poll_s = poll_s
        self._after = 0  # the highest seq the oldest-first walk has passed
        self._wanted: set[str] = set()
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

    def want(self, ids: Sequence[str]) -> None:
        """Ids a read found without token vectors: made before the walk goes on."""
        self._wanted.update(ids)
        self._wake.set()

    async def step(self) -> int:
        """One step: the wanted items first, else the next oldest without token vectors; how many
        were stored."""
        model = self._encoder.name
        async with self._acquire() as connection:
            if self._wanted:
                wanted, self._wanted = list(self._wanted), set()
                rows = await fetch(connection, Statement(MISSING_AMONG, (model, wanted, len(wanted))))
            else:
                rows = await fetch(connection, Statement(MISSING_AFTER, (model, self._after, STEP)))
                if rows:
                    self._after = max(self._after, max(row["seq"] for row in rows))
        if not rows:
            return 0
        texts = [without_roles(row["text"]) or row["text"] for row in rows]
        made = await anyio.to_thread.run_sync(self._encoder.items, texts)
        ids = [row["id"] for row in rows]
        async with self._acquire() as connection:
            await execute(connection, Statement(STORE, (model, ids, [packed(tokens) for tokens in made])))
        return len(rows)

    async def catch_up(self) -> int:
        """Steps until every item has token vectors; how many were stored."""
        stored = 0
        while (count := await self.step()) > 0:
            stored += count
        return stored

    async def _run(self) -> None:
        while True:
            self._wake.clear()  # before the step: a write during it wakes the next wait
            try:
                made = await self.step()
            except Exception as error:  # logged, retried: the items keep being found by their place
                logger.warning("token writer: %s", classify(error).message)
                made, wait = 0, RETRY_S
            else:
                wait = self._poll_s
            if made == 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
