"""The undo window's sweeper: forgotten items older than the window are dropped for good.

Reads never see ``engram_forgotten`` (a forget moves its items there), so the sweep only bounds
how long a forgotten item can come back and how long its text and vector stay on disk. With
several replicas on one database, one sweeps at a time (an advisory lock); each sweep removes at
most ``SWEEP_BATCH`` rows a statement and repeats until nothing is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from app.engine.postgres.errors import classify
from app.engine.postgres.indexer import Acquire
from app.engine.postgres.queries.writes import SWEEP_BATCH, SWEEP_EXPIRED

logger = logging.getLogger("engram")


class UndoSweeper:
    def __init__(self, acquire: Acquire, *, window_s: float, every_s: float) -> None:
        self._acquire = acquire
        self._window_s = window_s
        self._every_s = every_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="engram-undo-sweeper")

    async def sweep(self) -> int:
        """Drop every kept item older than the window now; how many."""
        dropped = 0
        async with self._acquire() as connection:
            while True:
                count = int(await connection.fetchval(SWEEP_EXPIRED, self._window_s, SWEEP_BATCH) or 0)
                dropped += count
                if count < SWEEP_BATCH:
                    return dropped

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._every_s)
            try:
                await self.sweep()
            except Exception as error:  # best effort: the next sweep takes what this one left
                logger.warning("undo window sweep: %s", classify(error).message)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
