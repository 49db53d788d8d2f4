"""Background sweepers: erase what no read returns any more, a bounded batch at a time.

Two run beside the engine: the undo window's (forgotten items older than the window) and
retention's (items whose expiry has passed). Reads already leave both out, so a sweep only
bounds how long their text and vectors stay on disk. Each statement removes at most its batch
and only while it holds its advisory lock (queries/sweeps.py): with several replicas on one
database, one sweeps at a time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from app.engine.postgres import background
from app.engine.postgres.errors import classify
from app.engine.postgres.indexer import Acquire
from app.engine.postgres.pool import fetchval
from app.engine.postgres.queries.statement import Statement

logger = logging.getLogger("engram")


class Sweeper:
    """Runs ``statement()`` (a sweep of at most ``batch`` rows that answers how many it removed)
    until one removes fewer than ``batch``; every ``every_s`` once started."""

    def __init__(
        self, acquire: Acquire, statement: Callable[[], Statement], *, batch: int, every_s: float, name: str
    ) -> None:
        self._acquire = acquire
        self._statement = statement
        self._batch = batch
        self._every_s = every_s
        self._name = name
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"engram-{self._name.replace(' ', '-')}-sweeper")

    async def sweep_batch(self) -> int:
        """One statement: at most ``batch`` rows; 0 when another replica is sweeping."""
        async with self._acquire() as connection:
            return int(await fetchval(connection, self._statement()) or 0)

    async def sweep(self) -> int:
        """Everything there is to erase now, a batch a statement; how many rows."""
        removed = 0
        while True:
            count = await self.sweep_batch()
            removed += count
            if count < self._batch:
                return removed

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._every_s)
            try:
                await self.sweep()
            except Exception as error:  # best effort: the next sweep takes what this one left
                logger.warning("%s sweep: %s", self._name, classify(error).message)

    async def stop(self) -> None:
        task, self._task = self._task, None
        await background.stop(task)
