"""Folds the facet count rows that writes add (migration 0011) in the background.

Every statement that inserts or deletes items adds a row per (facet, value) it changed: ~1.8 rows
an item in the bench's corpus (a batch of 100 adds ~180). An explore folds its own facet when it
sums too many; this folds every facet after every ``every`` items written, so facets nobody
explores do not pile up rows either, and an explore seldom finds much to fold.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from app.engine.postgres.errors import classify
from app.engine.postgres.indexer import Acquire
from app.engine.postgres.statements import ALL_FACETS, FOLD_FACET, positional

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
        if self._since >= self._every and (self._task is None or self._task.done()):
            self._since = 0
            self._task = asyncio.create_task(self.fold(), name="engram-facet-folder")

    async def fold(self) -> None:
        """Every facet's rows, one a value. Best effort: a failure leaves them for the next fold."""
        numbered, values = positional(FOLD_FACET, {"facets": ALL_FACETS})
        try:
            async with self._acquire() as connection:
                await connection.execute(numbered, *values)
        except Exception as error:
            logger.warning("facet counts: %s", classify(error).message)

    async def idle(self) -> None:
        """Until the fold running, if any, has finished."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
