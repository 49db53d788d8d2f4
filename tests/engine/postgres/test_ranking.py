"""Running the two halves of a hybrid ranking at once (app/engine/postgres/ranking.py)."""

from __future__ import annotations

import asyncio

import pytest

from app.engine.postgres.ranking import concurrently


async def test_concurrently_answers_in_order_and_a_failure_cancels_the_rest_ungrouped() -> None:
    async def after(delay: float, value: str) -> str:
        await asyncio.sleep(delay)
        return value

    assert await concurrently(after(0.02, "slow"), after(0, "fast")) == ["slow", "fast"]

    cancelled = asyncio.Event()

    async def waits() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def fails() -> None:
        await asyncio.sleep(0)
        raise LookupError("one half failed")

    with pytest.raises(LookupError, match="one half failed"):
        await concurrently(waits(), fails())
    assert cancelled.is_set()
