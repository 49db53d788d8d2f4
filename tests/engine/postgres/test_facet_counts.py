"""An explore without a filter answers from counts kept as items come and go (migration 0011).

Each answer must be the one counting the items would give: the same as an explore whose filter
admits every item, which counts them (queries.facets.explore_sql).
"""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from app.contract.items import ITEM_ADAPTER, StoredItem
from app.contract.meta import Filter
from app.contract.namespaces import Reach
from app.contract.requests import ExplorePage, ExploreRequest, ForgetByFilter, ForgetByIds
from app.contract.timebuckets import TIME_FACETS
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.facets import FacetFolder
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.queries.facets import FOLD_AFTER_ROWS, plan_explore
from tests.engine.postgres.support import learning
from tests.support.engines import truncate

FACETS = [
    "kind", "source", "source_id", "workspace", "folder", "file_path", "language",
    "repo", "url", "thread", "agent", "tool_call", "tag", "namespace",
]  # fmt: skip
# Not kept: without a filter they read observed_at's index, and the total from the kept counts.
COUNTED = [*FACETS, *TIME_FACETS]
EPOCH = datetime(2019, 11, 30, tzinfo=UTC)  # observed_at spread from here over ~4.5 years, all past
# Admits every item, but as a clause: the items are counted, not the kept counts read.
EVERY_ITEM = Filter(reach=Reach(at="root", inherit=False, descendants=True))


def varied_items(count: int, seed: int) -> list[StoredItem]:
    """Items of every kind, each meta field present or not, tags none to repeated, root and nested namespaces."""
    rng = random.Random(seed)

    def maybe(values: list[str]) -> str | None:
        return rng.choice([*values, None])

    items = []
    for n in range(count):
        meta: dict[str, Any] = {
            "namespace": rng.choice(["", "root", "team:a", "team:a/agent:x", "team:b/agent:y/project:p"]),
            "tags": rng.sample(["red", "green", "blue", "Zed", "ärger"], rng.randint(0, 3)),
            "workspace": maybe(["w1", "w2"]),
            "language": maybe(["en", "de"]),
            "repo": maybe(["engram", "other"]),
            "url": maybe([f"https://example.com/{n % 7}"]),
            "thread_id": maybe(["t-1", "t-2"]),
            "agent_id": maybe(["agent-1", "agent-2", "agent-3"]),
        }
        if meta["tags"] and rng.random() < 0.2:
            meta["tags"].append(meta["tags"][0])  # counted once for the item
        if rng.random() < 0.3:
            meta["source"] = {"kind": rng.choice(["import", "file"]), "id": rng.choice(["s1", "s2"])}
        if rng.random() < 0.2:
            meta["tool_call"] = {"name": rng.choice(["search", "fetch"])}
        if rng.random() < 0.6:
            meta["observed_at"] = (
                EPOCH + timedelta(hours=rng.randint(0, 40_000), minutes=rng.randint(0, 59))
            ).isoformat()
        kind = rng.choice(["learning", "document", "conversation"])
        text_ = f"item {n} of seed {seed}"
        if kind == "learning":
            data: dict[str, Any] = {"type": "learning", "text": text_, "kind": "fact", "confidence": 0.5}
        elif kind == "document":
            folder = maybe(["/notes", "/notes/rust"])
            if folder:
                meta["folder"] = folder
                meta["file_path"] = f"{folder}/{n}.md"
            data = {"type": "document", "body": {"text": text_}}
        else:
            data = {"type": "conversation", "turns": [{"role": "user", "text": text_}]}
        data["meta"] = {k: v for k, v in meta.items() if v is not None}
        items.append(ITEM_ADAPTER.validate_python(data))
    return items


async def store(engine: PostgresEngine, items: list[StoredItem]) -> None:
    for start in range(0, len(items), 100):
        await engine.store_many(items[start : start + 100])


def answer(page: ExplorePage) -> tuple[Any, ...]:
    return ([(b.value, b.count) for b in page.buckets], page.total, page.missing, page.more_buckets)


async def assert_counts_match_the_items(engine: PostgresEngine, limit: int = 500) -> None:
    for facet in COUNTED:
        kept = await engine.explore(ExploreRequest(facet=facet, limit=limit))  # type: ignore[arg-type]
        counted = await engine.explore(ExploreRequest(facet=facet, filter=EVERY_ITEM, limit=limit))  # type: ignore[arg-type]
        assert answer(kept) == answer(counted), facet


async def kept_rows(engine: PostgresEngine, facet: str) -> int:
    async with engine.connection() as connection:
        return int(await connection.fetchval("SELECT count(*) FROM engram_facet_counts WHERE facet = $1", facet))


async def test_every_facet_without_a_filter_counts_what_the_items_hold(pg_engine: PostgresEngine) -> None:
    items = varied_items(600, seed=1)
    await store(pg_engine, items)
    await assert_counts_match_the_items(pg_engine)
    page = await pg_engine.explore(ExploreRequest(facet="tag", limit=500))
    assert page.total == 600
    assert page.missing == sum(1 for i in items if not i.meta.tags)


async def test_counts_follow_replays_and_forgets(pg_engine: PostgresEngine) -> None:
    items = varied_items(300, seed=2)
    await store(pg_engine, items)
    await store(pg_engine, items[:150])  # replayed: nothing new to count
    await assert_counts_match_the_items(pg_engine)
    ids = [i.checked().fingerprint() for i in items[:40]]
    await pg_engine.forget(ForgetByIds(ids=ids))
    await pg_engine.forget(ForgetByFilter(filter=Filter(tags_any=["red"])))
    await assert_counts_match_the_items(pg_engine)
    await pg_engine.forget(ForgetByFilter(filter=EVERY_ITEM, all=True))
    for facet in COUNTED:
        page = await pg_engine.explore(ExploreRequest(facet=facet, limit=10))  # type: ignore[arg-type]
        assert answer(page) == ([], 0, 0, 0), facet


async def test_an_explore_has_the_rows_writes_added_folded(pg_engine: PostgresEngine) -> None:
    # One write a item: each adds a row for every tag it holds.
    for item in varied_items(FOLD_AFTER_ROWS + 50, seed=3):
        await pg_engine.store(item)
    before = await kept_rows(pg_engine, "tag")
    assert before > FOLD_AFTER_ROWS
    first = await pg_engine.explore(ExploreRequest(facet="tag", limit=500))
    for _ in range(250):  # the fold runs in the background
        if await kept_rows(pg_engine, "") == 1:
            break
        await asyncio.sleep(0.02)
    assert await kept_rows(pg_engine, "tag") <= len(first.buckets) + 1  # a row a tag, one for the items without
    assert await kept_rows(pg_engine, "") == 1
    again = await pg_engine.explore(ExploreRequest(facet="tag", limit=500))
    assert answer(again) == answer(first)
    await assert_counts_match_the_items(pg_engine)


async def test_emptying_the_items_empties_the_counts(pg_engine: PostgresEngine) -> None:
    await store(pg_engine, varied_items(50, seed=4))
    await truncate(pg_engine)
    assert await kept_rows(pg_engine, "") == 0
    page = await pg_engine.explore(ExploreRequest(facet="kind", limit=10))
    assert answer(page) == ([], 0, 0, 0)


async def test_concurrent_writes_forgets_and_folds_keep_the_counts_exact(pg_engine: PostgresEngine) -> None:
    items = varied_items(1200, seed=5)

    async def writer(part: list[StoredItem]) -> None:
        for start in range(0, len(part), 20):
            await pg_engine.store_many(part[start : start + 20])

    async def explorer() -> None:
        for _ in range(30):
            await pg_engine.explore(ExploreRequest(facet="tag", limit=10))
            await pg_engine.explore(ExploreRequest(facet="namespace", limit=10))

    async def forgetter() -> None:
        for n in range(10):
            await pg_engine.forget(ForgetByIds(ids=[i.checked().fingerprint() for i in items[n * 30 : n * 30 + 10]]))
            await asyncio.sleep(0.01)

    # Overlapping batches: the same items written by two writers at once make one item each.
    await asyncio.gather(writer(items[:700]), writer(items[500:]), explorer(), explorer(), forgetter())
    await assert_counts_match_the_items(pg_engine)


async def test_writes_fold_every_facet_in_the_background(pg_engine: PostgresEngine, database_url: str) -> None:
    """Facets nobody explores do not pile up rows: every ``every`` items written, all are folded."""
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=1)
    folder = FacetFolder(pool.acquire, every=200)
    try:
        items = varied_items(200, seed=6)
        for start in range(0, 200, 10):
            await pg_engine.store_many(items[start : start + 10])
            assert await kept_rows(pg_engine, "") == start // 10 + 1  # a row a write, till the fold
            folder.wrote(10)  # the 200th item starts a fold
        await folder.idle()
        assert await kept_rows(pg_engine, "") == 1
        for facet in FACETS:
            page = await pg_engine.explore(ExploreRequest(facet=facet, limit=500))  # type: ignore[arg-type]
            assert await kept_rows(pg_engine, facet) == len(page.buckets) + (page.missing > 0), facet
        await assert_counts_match_the_items(pg_engine)
        # A value already folded is not written again by the next fold.
        rows = "SELECT facet, value, ctid::text FROM engram_facet_counts ORDER BY 1, 2"
        before = {(r["facet"], r["value"]): r["ctid"] for r in await pool.fetch(rows)}
        await pg_engine.store_many([learning(f"note {n}", namespace="team:new") for n in range(3)])
        await folder.fold()
        after = {(r["facet"], r["value"]): r["ctid"] for r in await pool.fetch(rows)}
        assert after[("namespace", "team:a")] == before[("namespace", "team:a")]  # untouched
        assert after[("", "")] != before[("", "")]  # folded with the three items' row
        assert ("namespace", "team:new") in after and len(after) == len(before) + 1
        await assert_counts_match_the_items(pg_engine)
    finally:
        await folder.stop()
        await pool.close()


async def test_a_time_facet_without_a_filter_reads_observed_ats_index_alone(pg_engine: PostgresEngine) -> None:
    """Migration 0016 keeps expires_at in the index: the live items are counted without their rows."""
    statement = plan_explore("observed_month", filter_predicate(Filter()), 500)
    async with pg_engine.connection() as connection, connection.transaction():
        # Without these a tiny table is read whole: what is asked is whether the index can serve alone.
        await connection.execute("SET LOCAL enable_seqscan = off")
        await connection.execute("SET LOCAL enable_bitmapscan = off")
        plan = [row[0] for row in await connection.fetch("EXPLAIN " + statement.sql, *statement.args)]
    assert [line for line in plan if "Index Only Scan using engram_items_observed on engram_items" in line], plan
    assert not [line for line in plan if "Seq Scan on engram_items " in line], plan
