"""Reads on a real streaming replica: each client sees its own writes, the rest may lag, nothing breaks.

One primary and its replica (``pg_basebackup -R`` of it, tests/support/replica.py) for the run.
A replica whose replay is paused (``pg_wal_replay_pause()``) stands for one that lags: what it has
not replayed, a read without a position does not see, and a read with the position gets from the
primary once the wait is over. Which server answered each read statement is read from the
``engram_read_statements_total`` counter the router keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator

import pytest
from prometheus_client import REGISTRY

from app.contract.access import Access
from app.contract.errors import ConfigError
from app.contract.meta import Filter
from app.contract.namespaces import Reach
from app.contract.requests import ExploreRequest, FetchRequest, GetRequest, ListRequest, RecallRequest
from app.contract.transfer import ExportRequest
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine import consistency, transfer
from app.engine.postgres.engine import PostgresEngine
from app.engine.scoped import ScopedEngine
from app.engine.transfer import export_lines
from tests.engine.postgres.support import learning
from tests.support.engines import truncate
from tests.support.replica import Primary, Replica, catch_up, connect_reading_replica

# Long enough that the replica answers whenever it streams; a paused one never catches up.
WAIT_MS = 2_000


@pytest.fixture
async def engine(primary: Primary, replica: Replica, embedder: WordLlamaEmbedder) -> AsyncIterator[PostgresEngine]:
    connected = await connect_reading_replica(primary, replica, embedder, wait_ms=WAIT_MS)
    await truncate(connected)
    catch_up(primary, replica)
    yield connected
    await connected.close()


def served(server: str, reason: str) -> float:
    """Read statements answered by ``server`` for ``reason`` so far."""
    return REGISTRY.get_sample_value("engram_read_statements_total", {"server": server, "reason": reason}) or 0.0


@contextlib.contextmanager
def delayed(replica: Replica) -> Iterator[None]:
    """The replica applies no commit younger than an hour (``recovery_min_apply_delay``), restarts included."""
    replica.psql("ALTER SYSTEM SET recovery_min_apply_delay = '1h';")
    replica.psql("SELECT pg_reload_conf();")
    try:
        yield
    finally:
        if not replica.running():
            replica.start()
        replica.psql("ALTER SYSTEM RESET recovery_min_apply_delay;")
        replica.psql("SELECT pg_reload_conf();")


async def stored(engine: PostgresEngine, text: str, **meta: object) -> tuple[str, int]:
    """Store one item as a request would; its id and the position its write answered."""
    with consistency.positions() as request:
        receipt = await engine.store(learning(text, **meta))
    assert request.wrote is not None, "a write with a replica answers its position"
    return receipt.id, request.wrote


async def get(engine: PostgresEngine, item_id: str, position: int | None = None) -> list[str]:
    with consistency.positions(position):
        return [hit.id for hit in await engine.get(GetRequest(ids=[item_id]))]


async def test_a_read_that_presents_its_write_position_sees_the_write_at_once(
    engine: PostgresEngine, replica: Replica
) -> None:
    before = served("replica", "caught_up")
    item_id, position = await stored(engine, "the harbour opens at dawn")
    assert await get(engine, item_id, position) == [item_id]
    assert served("replica", "caught_up") == before + 1, "the replica, having replayed the write, answered"
    assert replica.replayed() >= position


async def test_a_lagging_replica_serves_reads_without_a_position_as_it_is(
    engine: PostgresEngine, primary: Primary, replica: Replica
) -> None:
    with replica.paused():
        item_id, position = await stored(engine, "the violin is in the attic")
        assert await get(engine, item_id) == [], "a read without a position gets the replica as it is"
        before = served("primary", "behind")
        assert await get(engine, item_id, position) == [item_id], "with the position, the primary answers"
        assert served("primary", "behind") == before + 1
        assert replica.replayed() < position, "the replica never had it"
    catch_up(primary, replica)
    assert await get(engine, item_id) == [item_id], "once replayed, the replica has it"


async def test_a_read_with_a_position_waits_for_the_replica_within_the_bound(
    engine: PostgresEngine, replica: Replica
) -> None:
    with replica.paused():
        item_id, position = await stored(engine, "the glacier moves slowly")
        before = (served("replica", "caught_up"), served("primary", "behind"))
        read = asyncio.create_task(get(engine, item_id, position))
        await asyncio.sleep(0.2)  # the read is waiting: the replica has not replayed the write
        assert not read.done()
        await asyncio.to_thread(replica.resume_replay)
        assert await read == [item_id]
    assert (served("replica", "caught_up"), served("primary", "behind")) == (before[0] + 1, before[1])


async def test_each_read_route_reads_the_replica_and_each_write_the_primary(
    engine: PostgresEngine, primary: Primary, replica: Replica
) -> None:
    """With replay paused, what the reads do not see proves the replica answered them; the writes
    succeed, so the primary took them (a standby refuses every write)."""
    old_id, _ = await stored(engine, "compiler warnings about the orchard", tags=["old"])
    catch_up(primary, replica)
    with replica.paused():
        new_id, position = await stored(engine, "compiler errors about the orchard", tags=["new"])
        replica_before = served("replica", "caught_up")

        async def everything() -> dict[str, set[str] | int]:
            hits = await engine.fetch(FetchRequest(query="compiler orchard", mode="keyword", limit=10))
            answer = await engine.recall(RecallRequest(question="compiler orchard", limit=10))
            listed = await engine.list(ListRequest(limit=100))
            got = await engine.get(GetRequest(ids=[old_id, new_id]))
            explored = await engine.explore(ExploreRequest(facet="tag", limit=10))
            exported = [line async for line in export_lines(engine, ExportRequest())]
            return {
                "fetch": {h.id for h in hits.hits},
                "recall": {c.id for c in answer.citations},
                "list": {h.id for h in listed.items},
                "get": {h.id for h in got},
                "explore": explored.total,
                "export": len(exported) - 1,  # the trailer
            }

        with consistency.positions():
            stale = await everything()
        assert stale == {
            "fetch": {old_id},
            "recall": {old_id},
            "list": {old_id},
            "get": {old_id},
            "explore": 1,
            "export": 1,
        }
        assert served("replica", "caught_up") > replica_before
        with consistency.positions(position):
            fresh = await everything()
        assert fresh == {
            "fetch": {old_id, new_id},
            "recall": {old_id, new_id},
            "list": {old_id, new_id},
            "get": {old_id, new_id},
            "explore": 2,
            "export": 2,
        }


async def test_list_cursors_hold_across_the_primary_and_the_replica(
    engine: PostgresEngine, primary: Primary, replica: Replica
) -> None:
    first = [r.id for r in await engine.store_many([learning(f"present from the start {n}") for n in range(5)])]
    catch_up(primary, replica)
    with replica.paused():
        with consistency.positions() as request:
            later = [r.id for r in await engine.store_many([learning(f"written while paused {n}") for n in range(5)])]
        # The first page from the primary (the position presented, the replica behind): the next
        # pages, asked with no position at all, must still hold the rows the primary had.
        with consistency.positions(request.wrote):
            page = await engine.list(ListRequest(limit=3))
        seen = [h.id for h in page.items]
        cursor = page.next_cursor
        while cursor is not None:
            with consistency.positions():
                page = await engine.list(ListRequest(limit=3, cursor=cursor))
            seen += [h.id for h in page.items]
            cursor = page.next_cursor
        assert seen == first + later
        # A first page from the replica, continued on the primary once the replica is away: the
        # listing is of what the first page's server held (what came later is a later listing's).
        with consistency.positions():
            page = await engine.list(ListRequest(limit=3))
        assert [h.id for h in page.items] == first[:3]
    replica.stop()
    with consistency.positions():
        rest = await engine.list(ListRequest(limit=100, cursor=page.next_cursor))
    assert [h.id for h in rest.items] == first[3:]


async def test_an_export_is_read_where_its_first_page_was(
    primary: Primary, replica: Replica, embedder: WordLlamaEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its first page from the primary (the replica away), the rest once a replica that lags is back:
    the later pages still hold what the first page's server held."""
    monkeypatch.setattr(transfer, "EXPORT_PAGE", 1)
    engine = await connect_reading_replica(primary, replica, embedder, wait_ms=WAIT_MS, retry_s=0.2)
    try:
        await truncate(engine)
        first_id, _ = await stored(engine, "stored before the replica lagged")
        catch_up(primary, replica)
        with delayed(replica):
            later = [(await stored(engine, f"stored while it lags {n}"))[0] for n in range(2)]
            replica.stop()
            with consistency.positions():
                lines = export_lines(engine, ExportRequest())
                exported = [await anext(lines)]
                replica.start()
                await asyncio.sleep(0.3)  # past retry_s: the replica is asked again
                exported += [line async for line in lines]
    finally:
        await engine.close()
    ids = [json.loads(line)["id"] for line in exported[:-1]]
    assert ids == [first_id, *later]


async def test_a_read_that_decides_a_write_reads_the_primary(engine: PostgresEngine, replica: Replica) -> None:
    """A scoped key's forget finds its ids first: on a replica behind the write it would find none."""
    with replica.paused():
        item_id, _ = await stored(engine, "a note of team a", namespace="team:a")
        scoped = ScopedEngine(engine, Access(role="admin", reach=Reach(at="team:a", descendants=True)))
        before = served("primary", "decides_a_write")
        with consistency.positions():
            report = await scoped.forget_within([item_id], Reach(at="team:a", descendants=True))
        assert report.forgotten == 1
        assert served("primary", "decides_a_write") == before + 1


async def test_replica_down_reads_go_to_the_primary_and_return_to_it_after(
    primary: Primary, replica: Replica, embedder: WordLlamaEmbedder
) -> None:
    engine = await connect_reading_replica(primary, replica, embedder, wait_ms=WAIT_MS, retry_s=0.2)
    try:
        await truncate(engine)
        item_id, position = await stored(engine, "the telescope points north", tags=["sky"])
        assert (await engine.health()).state == "ok"
        replica.stop()
        before = served("primary", "replica_down")
        with consistency.positions():
            assert [h.id for h in (await engine.list(ListRequest(limit=100))).items] == [item_id]
            explored = await engine.explore(ExploreRequest(facet="tag", filter=Filter(tags_any=["sky"]), limit=10))
            assert explored.total == 1
        assert await get(engine, item_id, position) == [item_id]
        assert served("primary", "replica_down") >= before + 3
        health = await engine.health()
        assert health.state == "degraded" and health.reason is not None and "replica" in health.reason
        replica.start()
        catch_up(primary, replica)
        await asyncio.sleep(0.3)  # past retry_s: the replica is asked again
        before = served("replica", "caught_up")
        assert await get(engine, item_id) == [item_id]
        assert served("replica", "caught_up") == before + 1
        assert (await engine.health()).state == "ok"
    finally:
        await engine.close()


async def test_a_start_with_a_replica_already_down_serves_from_the_primary(
    primary: Primary, replica: Replica, embedder: WordLlamaEmbedder
) -> None:
    replica.stop()
    engine = await connect_reading_replica(primary, replica, embedder, wait_ms=WAIT_MS)
    try:
        await truncate(engine)
        item_id, position = await stored(engine, "the bakery opens early")
        assert await get(engine, item_id) == [item_id]
        assert await get(engine, item_id, position) == [item_id]
        assert (await engine.health()).state == "degraded"
    finally:
        await engine.close()


async def test_a_read_url_of_another_database_stops_the_start(primary: Primary, embedder: WordLlamaEmbedder) -> None:
    primary.psql("DROP DATABASE IF EXISTS elsewhere;")
    primary.psql("CREATE DATABASE elsewhere;")
    elsewhere = primary.url.replace("/postgres?", "/elsewhere?")
    with pytest.raises(ConfigError, match="not a streaming replica"):
        await PostgresEngine.connect(primary.url, embedder, read_url=elsewhere)


async def test_without_a_replica_writes_answer_no_position(pg_engine: PostgresEngine) -> None:
    """Every read sees every write on one server: no position to carry, no statement spent on one."""
    with consistency.positions() as request:
        await pg_engine.store(learning("one server only"))
    assert request.wrote is None


async def test_stores_written_together_each_answer_the_position(engine: PostgresEngine) -> None:
    """Concurrent stores share one commit (combiner.py): each request still answers its position."""
    answers = await asyncio.gather(*(stored(engine, f"told together {n}") for n in range(8)))
    positions = {position for _, position in answers}
    assert len({item_id for item_id, _ in answers}) == 8 and None not in positions
