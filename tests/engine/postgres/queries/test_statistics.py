"""The planner's statistics as the rankings read them (no database)."""

from __future__ import annotations

from app.engine.postgres.queries.statistics import StatisticsCache


async def test_term_statistics_are_read_once_a_while_and_again_when_forgotten() -> None:
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
