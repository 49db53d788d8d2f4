"""Folds the facet count rows that writes add (migration 0011) in the background.

Every statement that inserts or deletes items adds a row per (facet, value) it changed: ~1.8 rows
an item in the bench's corpus (a batch of 100 adds ~180). Every facet is folded after every
``every`` items written, so facets nobody explores do not pile up rows either, and when an
explore sums too many rows (queries.facets.folds_facet), without waiting for the fold.
"""

from __future__ import annotations

import asyncio
import logging

from app.engine.postgres import background
from app.engine.postgres.errors import classify
from app.engine.postgres.indexer import Acquire
from app.engine.postgres.queries.facets import FOLD_FACETS

logger = logging.getLogger("engram")

# Items written (stored or forgotten) between two folds of every facet. At 10,000 a fold sums
# ~18,000 rows, tens of milliseconds on a connection of its own.
FOLD_EVERY_ITEMS = 10_000


class FacetFolder:
    """``wrote`` after each write commits; one fold at a time runs on a connection of its own."""

    def __init__(self, acquire: Acquire, *, every: int = FOLD_EVERY_ITEMS) -> None:
        self._acquire = acquire
        self._every = every
        self._since = 0
        self._task: asyncio.Task[None] | None = None

    def wrote(self, items: int) -> None:
        self._since += items
        if self._since >= self._every:
            self.fold_soon()

    def fold_soon(self) -> None:
        """A fold in the background, unless one is running."""
        if self._task is None or self._task.done():
            self._since = 0
            self._task = asyncio.create_task(self.fold(), name="engram-facet-folder")

    async def fold(self) -> None:
        """Every facet's rows, one a value. Best effort: a failure leaves them for the next fold."""
        try:
            async with self._acquire() as connection:
                await connection.execute(FOLD_FACETS)
        except Exception as error:
            logger.warning("facet counts: %s", classify(error).message)

    async def idle(self) -> None:
        """Until the fold running, if any, has finished."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        task, self._task = self._task, None
        await background.stop(task)
