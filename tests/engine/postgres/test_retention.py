"""Retention in PostgreSQL: the sweeper erases expired items in bounded batches, one replica at a
time; the reads that do not visit items (kept facet counts, sketch postings) leave them out too;
a write under way when a policy changes cannot keep the old expiry."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg

from app.contract.meta import Filter
from app.contract.requests import ExploreRequest, FetchRequest, ForgetByFilter, GetRequest
from app.contract.retention import RetentionRequest, RetentionTarget, Ttl
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.filters import sketch_keys
from app.engine.postgres.options import SketchOptions
from app.engine.postgres.queries.retention import POLICIES_EXCLUSIVE, expiry_sql
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.statistics import TERM_STATISTICS, TermStatistics
from app.engine.postgres.queries.sweeps import EXPIRED_LOCK, plan_sweep_expired
from app.engine.postgres.selectivity import ranks_by_sketch
from app.engine.postgres.sweeper import Sweeper
from tests.engine.postgres.support import analyse, count_rows, learning, tables_holding
from tests.engine.postgres.test_facet_counts import assert_counts_match_the_items, store, varied_items

LONG_AGO = (datetime.now(UTC) - timedelta(days=40)).isoformat()
SECRET = "quartermaster"


async def expiring(engine: PostgresEngine, count: int, live: int = 5) -> list[str]:
    """``count`` items observed long ago in user:gone (expired under its P30D policy) and ``live``
    fresh ones in user:kept, all indexed (sketches and postings written)."""
    old = [
        learning(f"{SECRET} note {n}", namespace="user:gone", observed_at=LONG_AGO, tags=["t"]) for n in range(count)
    ]
    new = [learning(f"kept note {n}", namespace="user:kept", tags=["t"]) for n in range(live)]
    ids = [r.id for r in await engine.store_many(old + new)]
    await engine.finish_indexing()
    report = await engine.retention.set(RetentionRequest(namespace="user:gone", ttl="P30D"))
    assert report.expired == count
    return ids


async def test_the_sweeper_erases_in_bounded_batches_and_leaves_no_trace(pg_engine: PostgresEngine) -> None:
    await expiring(pg_engine, 25)
    await assert_counts_match_the_items(pg_engine)  # the kept counts, the expired taken off
    sweeper = Sweeper(pg_engine.connection, lambda: plan_sweep_expired(batch=10), batch=10, every_s=0, name="test")
    assert await sweeper.sweep_batch() == 10
    assert await count_rows(pg_engine) == (20, 20)
    assert await sweeper.sweep() == 15
    assert await count_rows(pg_engine) == (5, 5)
    assert await tables_holding(pg_engine, SECRET) == []
    await assert_counts_match_the_items(pg_engine)
    assert (await pg_engine.explore(ExploreRequest(facet="namespace", limit=5))).total == 5


async def test_one_replica_sweeps_at_a_time(pg_engine: PostgresEngine, database_url: str) -> None:
    await expiring(pg_engine, 30)
    other = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await other.execute("SELECT pg_advisory_lock(hashtext($1), 0)", EXPIRED_LOCK)  # another replica sweeping
        assert await pg_engine.sweep_expired() == 0
        assert (await count_rows(pg_engine))[0] == 35
        await other.execute("SELECT pg_advisory_unlock(hashtext($1), 0)", EXPIRED_LOCK)
    finally:
        await other.close()
    sweepers = [
        Sweeper(pg_engine.connection, lambda: plan_sweep_expired(batch=4), batch=4, every_s=0, name=f"replica {n}")
        for n in range(2)
    ]
    swept = await asyncio.gather(*(s.sweep() for s in sweepers))
    leftover = await pg_engine.sweep_expired()
    assert sum(swept) + leftover == 30, "each expired item erased once, whoever erased it"
    assert await count_rows(pg_engine) == (5, 5)


async def test_no_sweep_while_a_policy_change_rewrites_expiries(pg_engine: PostgresEngine, database_url: str) -> None:
    await expiring(pg_engine, 3)
    other = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        async with other.transaction():
            await other.execute(POLICIES_EXCLUSIVE)  # a change under way
            assert await pg_engine.sweep_expired() == 0
    finally:
        await other.close()
    assert await pg_engine.sweep_expired() == 3


async def test_explore_without_a_filter_counts_only_what_has_not_expired(pg_engine: PostgresEngine) -> None:
    items = varied_items(300, seed=5)
    await store(pg_engine, items)
    await pg_engine.retention.set(RetentionRequest(namespace="team:a", ttl="PT1S"))
    await asyncio.sleep(1.5)
    await assert_counts_match_the_items(pg_engine)
    live = sum(1 for i in items if not (i.meta.namespace or "").startswith("team:a"))
    assert (await pg_engine.explore(ExploreRequest(facet="tag", limit=50))).total == live
    assert (await pg_engine.explore(ExploreRequest(facet="kind", limit=5))).total == live


async def test_a_filter_ranked_by_its_sketch_postings_alone_leaves_out_the_expired(pg_engine: PostgresEngine) -> None:
    common = [learning(f"common note {n} on harbour tides", tags=["common"]) for n in range(200)]
    for start in range(0, 200, 100):
        await pg_engine.store_many(common[start : start + 100])
    rare = [
        learning(f"rare note {n} on harbour tides", tags=["rare"], namespace="user:gone" if n % 2 else "user:kept")
        for n in range(10)
    ]
    await pg_engine.store_many(rare)
    await pg_engine.finish_indexing()
    await analyse(pg_engine)
    request_filter = Filter(tags_any=["rare"])
    statistics = TermStatistics.of((await pg_engine.run(TERM_STATISTICS))[0])
    assert ranks_by_sketch(request_filter, statistics, SketchOptions()) and sketch_keys(request_filter).complete
    await pg_engine.retention.set(RetentionRequest(namespace="user:gone", ttl="PT1S"))
    await asyncio.sleep(1.5)
    page = await pg_engine.fetch(FetchRequest(query="harbour tides", mode="vector", filter=request_filter, limit=10))
    assert len(page.hits) == 5 and all(hit.meta.namespace == "user:kept" for hit in page.hits)


async def test_a_write_under_way_when_a_policy_changes_takes_the_new_expiry(
    pg_engine: PostgresEngine, database_url: str
) -> None:
    """The change holds the policies' lock: a write waits for it and then reads the new policy (without
    the lock it would have written the old expiry, none, and the item would never expire)."""
    other = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        changing = other.transaction()
        await changing.start()
        await other.execute(POLICIES_EXCLUSIVE)
        await other.execute(
            "INSERT INTO engram_retention (namespace, ttl, span) VALUES ('user:w', 'P1D', interval '1 day')"
        )
        write = asyncio.create_task(
            pg_engine.store(learning("written meanwhile", namespace="user:w", observed_at=LONG_AGO))
        )
        await asyncio.sleep(0.5)  # the write reaches the lock and waits (were it not to, the test fails below)
        await changing.commit()
        receipt = await write
    finally:
        await other.close()
    assert not await pg_engine.get(GetRequest(ids=[receipt.id])), "expired under the policy it waited for"


async def test_an_erasure_by_filter_leaves_no_expired_copy(pg_engine: PostgresEngine) -> None:
    await expiring(pg_engine, 3)
    report = await pg_engine.forget(ForgetByFilter(filter=Filter(tags_any=["t"]), purge=True))
    assert report.forgotten == 5, "the expired are erased too, but only the live are counted"
    assert await tables_holding(pg_engine, SECRET) == []


async def test_expiry_is_counted_from_the_observation_else_the_storing_as_the_contract_adds(
    pg_engine: PostgresEngine,
) -> None:
    await pg_engine.retention.set(RetentionRequest(namespace="user:w", ttl="P1MT1H"))
    observed = learning("observed at the end of january", namespace="user:w", observed_at="2026-01-31T12:00:00Z")
    unobserved = learning("observed when stored", namespace="user:w")
    receipts = await pg_engine.store_many([observed, unobserved])
    rows = await pg_engine.run(
        Statement("SELECT id, stored_at, expires_at FROM engram_items WHERE id = ANY($1)", ([r.id for r in receipts],))
    )
    expiry = {row["id"]: (row["stored_at"], row["expires_at"]) for row in rows}
    ttl = Ttl.parse("P1MT1H")
    assert (
        expiry[receipts[0].id][1]
        == ttl.after(datetime(2026, 1, 31, 12, tzinfo=UTC))
        == datetime(2026, 2, 28, 13, tzinfo=UTC)
    )
    stored_at, expires_at = expiry[receipts[1].id]
    assert expires_at == ttl.after(stored_at)


async def test_a_write_gives_the_expiry_a_policy_change_would(pg_engine: PostgresEngine) -> None:
    """The write function (migration 0018) repeats the expiry rule of queries/retention.py: every
    item written under nested ttls and a hold has the expiry the rule computes for it."""
    await pg_engine.retention.set(RetentionRequest(namespace="team:a", ttl="P30D"))
    await pg_engine.retention.set(RetentionRequest(namespace="team:a/project:x", ttl="PT36H"))
    await pg_engine.retention.set(RetentionRequest(namespace="", ttl="P1Y"))
    await pg_engine.retention.hold(RetentionTarget(namespace="team:a/project:held"))
    namespaces = [
        "team:a",
        "team:a/project:x",
        "team:a/project:x/user:y",
        "team:a/project:held/user:z",
        "team:ab",
        "user:u",
    ]
    items = [
        learning(f"note {n} at {namespace}", namespace=namespace, **({"observed_at": LONG_AGO} if n % 2 else {}))
        for n, namespace in enumerate(namespaces)
    ]
    await pg_engine.store_many(items)
    await pg_engine.store(learning("at the root", observed_at=LONG_AGO))
    expected = expiry_sql("i.namespace", "coalesce(i.observed_at, i.stored_at)")
    rows = await pg_engine.run(
        Statement(f"SELECT i.namespace, i.expires_at, {expected} AS expected FROM engram_items i ORDER BY i.seq")
    )
    assert len(rows) == 7
    assert all(row["expires_at"] == row["expected"] for row in rows), [dict(row) for row in rows]
    assert sum(row["expires_at"] is None for row in rows) == 1  # the held one
