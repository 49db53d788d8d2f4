"""Concurrent one-item stores written together, as one batch.

Each store is a round trip for what it already knows, a write statement and a commit that waits
for its WAL to reach the disk: at 16 clients the database's time per store bounded the service's
writes (docs/tuning.md#stores-written-together). The stores that arrive while a write is under
way wait for it and are then written in one batch (at most ``most``), one encoder call, one
statement, one commit; a store that finds none under way is written at once. Each keeps what it
had alone: its own receipt (of two copies of one item in a batch the first is stored and the
second a replay, as when two stores of it race), its answer only once its batch has committed,
and its own error: a batch that fails is written again item by item (all at once), so one item's
failure (its encoder call refused, say) is not another's.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable

from app.contract.items import StoredItem
from app.contract.requests import StoreReceipt

# A batch's receipts in its order, and the position its commit reached (None without a replica).
Written = tuple[list[StoreReceipt], int | None]
Write = Callable[[list[StoredItem]], Awaitable[Written]]
Waiting = tuple[StoredItem, "asyncio.Future[tuple[StoreReceipt, int | None]]"]


class StoreCombiner:
    """``store`` one validated item; ``write`` writes a batch of them as one (engine._commit_items)."""

    def __init__(self, write: Write, *, most: int) -> None:
        self._write = write
        self._most = most
        self._waiting: list[Waiting] = []
        self._task: asyncio.Task[None] | None = None

    async def store(self, item: StoredItem) -> tuple[StoreReceipt, int | None]:
        """The item's receipt, and the position its batch's commit reached."""
        future: asyncio.Future[tuple[StoreReceipt, int | None]] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._task is None:
            # In a context of its own: the batch belongs to no one request (each applies its position).
            self._task = asyncio.create_task(self._drain(), name="engram-store-combiner", context=contextvars.Context())
        return await future

    async def close(self) -> None:
        """Wait for the batches under way (and those waiting for them) to be written."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[: self._most], self._waiting[self._most :]
                await self._settle(batch)
        finally:
            self._task = None
            for _, future in self._waiting:  # only when cancelled: nothing is left behind waiting
                future.cancel()
            self._waiting = []

    async def _settle(self, batch: list[Waiting]) -> None:
        try:
            receipts, position = await self._write([item for item, _ in batch])
        except asyncio.CancelledError:
            for _, future in batch:
                if not future.done():
                    future.cancel()
            raise
        except Exception as error:
            if len(batch) > 1:  # each alone, at once: its own answer, or its own error
                await asyncio.gather(*(self._settle([one]) for one in batch))
                return
            (_, future) = batch[0]
            if not future.done():
                future.set_exception(error)
            return
        for (_, future), receipt in zip(batch, receipts, strict=True):
            if not future.done():  # a caller that gave up (its request cancelled) is not answered
                future.set_result((receipt, position))
