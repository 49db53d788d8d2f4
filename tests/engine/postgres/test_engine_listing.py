"""Listing and exploring through the engine: pages under concurrent writers, exact counts."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from app.contract.requests import ExploreRequest, ListRequest
from app.engine.postgres.engine import PostgresEngine
from tests.engine.postgres.support import learning


async def test_list_paging_under_concurrent_writers_neither_skips_nor_repeats(pg_engine: PostgresEngine) -> None:
    initial = [r.id for r in await pg_engine.store_many([learning(f"present from the start {n}") for n in range(60)])]
    stop = asyncio.Event()

    async def writer(worker: int) -> None:
        n = 0
        while not stop.is_set():
            await pg_engine.store(learning(f"written while paging {worker}-{n}"))
            n += 1

    writers = [asyncio.create_task(writer(w)) for w in range(3)]
    seen: list[str] = []
    cursor = None
    try:
        while True:
            page = await pg_engine.list(ListRequest(limit=7, cursor=cursor))
            seen += [h.id for h in page.items]
            cursor = page.next_cursor
            await asyncio.sleep(0)
            if cursor is None:
                break
    finally:
        stop.set()
        await asyncio.gather(*writers)
    assert len(seen) == len(set(seen)), "an item was returned twice"
    assert set(initial) <= set(seen), "an item present for the whole paging was skipped"


async def test_explore_over_ten_thousand_items_is_exact(pg_engine: PostgresEngine) -> None:
    rng = random.Random(7)
    tags = [f"tag{n:02d}" for n in range(25)]
    namespaces = ["", "team:a", "team:a/agent:x", "team:b", "team:b/agent:y/project:p"]
    items = []
    for n in range(10_000):
        chosen = rng.sample(tags, rng.randint(0, 3))
        items.append(learning(f"fact {n}", tags=chosen, namespace=rng.choice(namespaces)))
    for start in range(0, len(items), 100):
        await pg_engine.store_many(items[start : start + 100])
    expected_tags: Counter[str] = Counter(t for i in items for t in set(i.meta.tags or ()))
    page = await pg_engine.explore(ExploreRequest(facet="tag", limit=500))
    assert {b.value: b.count for b in page.buckets} == expected_tags
    assert page.total == 10_000
    assert page.missing == sum(1 for i in items if not i.meta.tags)
    assert page.truncated is False
    counts = [b.count for b in page.buckets]
    assert counts == sorted(counts, reverse=True)
    by_namespace = await pg_engine.explore(ExploreRequest(facet="namespace", limit=10))
    expected_ns = Counter((i.meta.namespace or "root") for i in items)
    assert {b.value: b.count for b in by_namespace.buckets} == expected_ns
