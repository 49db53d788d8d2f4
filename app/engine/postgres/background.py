"""The engine's background tasks (indexer workers, sweepers, the facet folder, the supervisor): how one stops."""

from __future__ import annotations

import asyncio
import contextlib


async def stop(*tasks: asyncio.Task[None] | None) -> None:
    """Cancel each task given, then wait for each to end: none is still running once this returns."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    for task in running:
        with contextlib.suppress(asyncio.CancelledError):
            await task
