"""Reciprocal rank fusion, the two rankings of a hybrid fetch run at once, the ranking's statistics cache."""

from __future__ import annotations

import asyncio
import random

import pytest

from app.engine.fusion import FUSION_DEPTH, RRF_K, fuse, fusion_depth
from app.engine.postgres.engine import concurrently


def test_fusion_sums_reciprocal_ranks_and_breaks_ties_by_storage_order() -> None:
    seq = {"a": 3, "b": 1, "c": 2, "d": 4}
    fused = fuse([["a", "b", "c"], ["c", "a", "d"]], seq)
    assert [key for key, _ in fused] == ["a", "c", "b", "d"]
    assert dict(fused)["a"] == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 2))
    # b (first keyword hit, seq 1) and d (first vector hit, seq 4) score alike: storage order decides.
    assert [key for key, _ in fuse([["d"], ["b"]], seq)] == ["b", "d"]
    assert fuse([[], []], seq) == []


def test_a_page_is_cut_from_one_order_whatever_its_depth() -> None:
    """Pages read the rankings to different depths (fusion_depth) and must cut one order: the
    fused keys first (a rank within FUSION_DEPTH), then the others by their best rank. Fused at
    each page's own depth, a key deeper in both rankings moved up once a deeper cut saw it in both,
    and cursors repeated and skipped hits."""
    chance = random.Random(7)
    keys = [f"k{i}" for i in range(400)]
    seq = {key: i for i, key in enumerate(keys)}
    for _ in range(20):
        vector = chance.sample(keys, len(keys))  # every admitted item
        keyword = chance.sample(keys, chance.randrange(0, 300))  # the items holding a term
        whole = fuse([keyword, vector], seq)
        assert sorted(key for key, _ in whole) == sorted(keys)
        scores = [score for _, score in whole]
        assert scores == sorted(scores, reverse=True)
        for end in (1, 11, 49, 50, 51, 77, 150, 399):
            depth = fusion_depth(end)
            page = fuse([keyword[:depth], vector[:depth]], seq)[:end]
            assert page == whole[:end]


def test_fusion_counts_each_ranking_to_its_depth() -> None:
    seq = {f"k{i}": i for i in range(200)}
    deep = [f"k{i}" for i in range(200)]
    shallow = list(reversed(deep))
    fused = dict(fuse([deep, shallow], seq))
    # k0 is first in one ranking and 200th in the other, past the depth: only its first rank counts.
    assert fused["k0"] == pytest.approx(1 / (RRF_K + 1))
    # k100 is 101st and 100th: past the depth in both, it is scored by its best rank.
    assert fused["k100"] == pytest.approx(1 / (RRF_K + 100))
    assert fusion_depth(11) == FUSION_DEPTH and fusion_depth(FUSION_DEPTH + 1) == FUSION_DEPTH + 1


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
