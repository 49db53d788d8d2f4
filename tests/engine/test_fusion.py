"""Reciprocal rank fusion, the two rankings of a hybrid fetch run at once, the ranking's statistics cache."""

from __future__ import annotations

import asyncio

import pytest

from app.engine.fusion import RRF_K, fuse
from app.engine.postgres.engine import concurrently


def test_fusion_sums_reciprocal_ranks_and_breaks_ties_by_storage_order() -> None:
    seq = {"a": 3, "b": 1, "c": 2, "d": 4}
    fused = fuse([["a", "b", "c"], ["c", "a", "d"]], seq)
    assert [key for key, _ in fused] == ["a", "c", "b", "d"]
    assert dict(fused)["a"] == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 2))
    # b (first keyword hit, seq 1) and d (first vector hit, seq 4) score alike: storage order decides.
    assert [key for key, _ in fuse([["d"], ["b"]], seq)] == ["b", "d"]
    assert fuse([[], []], seq) == []


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


async def test_term_statistics_are_read_once_a_while_and_again_when_forgotten() -> None:
    from app.engine.postgres.engine import StatisticsCache

    reads: list[int] = []

    async def read() -> list[dict[str, object]]:
        reads.append(1)
        row = {"elems": ["word"], "freqs": [0.5, 0.5, 0.5, 0.0], "items": len(reads)}
        return [{**row, "tag_elems": None, "tag_freqs": None, "lineage_elems": None, "lineage_freqs": None}]

    cache = StatisticsCache(ttl_s=60)
    assert (await cache.current(read)).items == 1
    assert (await cache.current(read)).items == 1  # within its time: not read again
    cache.forget()
    assert (await cache.current(read)).items == 2
    stale = StatisticsCache(ttl_s=0)
    await stale.current(read)
    assert (await stale.current(read)).items == 4
