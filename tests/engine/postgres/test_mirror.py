"""Filter keys' sketches scanned in the service's memory (mirror.py, migration 0021).

The copies pick the candidates the sketch statement would, so the pages are the statement's; every
ranking also ranks the postings filed since a copy was read, by this engine or another, so nothing
stored is missed; a forgotten item leaves the pages at once, and they stay full.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import numpy as np
import pytest

from app.contract.meta import Filter
from app.contract.namespaces import Reach
from app.contract.requests import ForgetByIds
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.mirror import SketchMirror, nearest, query_sketch, sketch_words
from app.engine.postgres.options import EngineOptions, MirrorOptions
from app.engine.postgres.queries.mirror import plan_filed_since
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.ranking import Rankings
from app.engine.postgres.schema import driver_url
from app.engine.postgres.vectors import query_vector
from tests.engine.postgres.support import learning
from tests.engine.postgres.test_indexer import quiet_engine
from tests.engine.postgres.test_sketches import QUERY, few_among_many

# The stores here are small: every key is copied, however few its postings.
IN_MEMORY = EngineOptions(mirror=MirrorOptions(budget_mb=64, fold_s=0.0, floor=0))


@pytest.fixture
async def unindexed(database_url: str, embedder: Any) -> AsyncIterator[PostgresEngine]:
    async for engine in quiet_engine(database_url, embedder, 10_000):
        yield engine


def rankings(embedder: Any, options: EngineOptions) -> Rankings:
    return Rankings(model=embedder.name, dimension=embedder.dimension, ts_config="english", options=options)


async def pages(
    engine: PostgresEngine, ranked: Rankings, vector: np.ndarray, request_filter: Filter, count: int = 3
) -> list[list[tuple[str, float]]]:
    pred = filter_predicate(request_filter)
    await ranked.vector(engine.run, vector, request_filter, pred, 0, 10)  # the statement's, as a copy is read
    await ranked.copies_read()
    found = []
    for offset in range(0, 10 * count, 10):
        rows = await ranked.vector(engine.run, vector, request_filter, pred, offset, 10)
        found.append([(row["id"], round(float(row["score"]), 9)) for row in rows])
    return found


def columns(*sketches: int) -> np.ndarray:
    """One-word sketches as nearest takes them: a column each."""
    return np.array([sketches], dtype=np.uint64)


def test_the_nearest_sketches_are_taken_by_distance_then_seq_each_item_once() -> None:
    sketches = columns(0b1111, 0b0000, 0b0001, 0b0011, 0b0001)
    seqs = np.array([5, 9, 7, 3, 2])
    query = np.zeros(1, dtype=np.uint64)
    # distances 4, 0, 1, 2, 1: seq 9 first, then 2 and 7 (ties by seq), then 3
    assert seqs[nearest(sketches, seqs, query, 4)].tolist() == [9, 2, 7, 3]
    twice = np.array([9, 9, 7, 3, 2])  # an item filed under two keys is one candidate
    assert twice[nearest(sketches, twice, query, 3)].tolist() == [9, 2, 7]
    # Seen twice among the nearest, an item leaves its place to the next: three distinct still.
    doubled = columns(0, 0, 1, 3, 3)
    seqs = np.array([4, 4, 6, 8, 5])
    assert seqs[nearest(doubled, seqs, query, 3)].tolist() == [4, 6, 5]


async def test_a_sketch_read_from_postgresql_is_the_one_made_in_memory(unindexed: PostgresEngine) -> None:
    vector = np.random.default_rng(3).standard_normal(200).astype(np.float32)
    statement = Statement("SELECT varbit_send(binary_quantize(CAST($1 AS vector))) AS sketch", (query_vector(vector),))
    (row,) = await unindexed.run(statement)
    assert sketch_words(row["sketch"], 1)[:, 0].tolist() == query_sketch(vector).tolist()


@pytest.mark.parametrize(
    "request_filter",
    [
        Filter(tags_any=["few"]),
        Filter(tags_any=["few", "pair"]),
        Filter(reach=Reach(at="team:a", inherit=False, descendants=True)),
        # Not held wholly by the keys: the statement ranks these, as without copies.
        Filter(tags_any=["few"], kinds=["learning"]),
        Filter(tags_any=["pair"], reach=Reach(at="team:a", inherit=False, descendants=True)),
    ],
)
async def test_the_copies_give_the_pages_the_statement_gives(
    unindexed: PostgresEngine, embedder: Any, request_filter: Filter
) -> None:
    await few_among_many(unindexed)
    (vector,) = await embedder.embed([QUERY])
    scanned = await pages(unindexed, rankings(embedder, EngineOptions()), vector, request_filter, 5)
    assert await pages(unindexed, rankings(embedder, IN_MEMORY), vector, request_filter, 5) == scanned


@pytest.mark.parametrize("fold_s", [0.0, 3600.0])  # folded into the copy, or ranked beside it
async def test_what_is_stored_after_the_copy_is_found_and_what_is_forgotten_is_not(
    unindexed: PostgresEngine, database_url: str, embedder: Any, fold_s: float
) -> None:
    await few_among_many(unindexed)
    (vector,) = await embedder.embed([QUERY])
    tagged = Filter(tags_any=["few"])
    in_memory = rankings(embedder, EngineOptions(mirror=MirrorOptions(budget_mb=64, fold_s=fold_s, floor=0)))
    statement = rankings(embedder, EngineOptions())
    await pages(unindexed, in_memory, vector, tagged)  # the copy is read

    # Stored by another engine (another process) and moved into the index: the copy has none of them.
    other = await PostgresEngine.connect(database_url, embedder, options=EngineOptions())
    try:
        near = [learning(f"tides of the harbour, {n}", tags=["few"]) for n in range(12)]
        await other.store_many(near)
        await other.finish_indexing()
    finally:
        await other.close()
    first = await pages(unindexed, in_memory, vector, tagged)
    assert first == await pages(unindexed, statement, vector, tagged)
    assert {item.checked().fingerprint() for item in near} <= {item_id for item_id, _ in first[0] + first[1]}

    doomed = [item_id for item_id, _ in first[0][:5]]
    assert (await unindexed.forget(ForgetByIds(ids=doomed))).forgotten == 5
    after = await pages(unindexed, in_memory, vector, tagged)
    assert after == await pages(unindexed, statement, vector, tagged)
    assert not set(doomed) & {item_id for page in after for item_id, _ in page}
    assert [len(page) for page in after] == [10, 10, 10]


async def test_copies_over_the_budget_are_left_to_the_statement(unindexed: PostgresEngine, embedder: Any) -> None:
    await few_among_many(unindexed)
    (vector,) = await embedder.embed([QUERY])
    tiny = rankings(embedder, EngineOptions(mirror=MirrorOptions(budget_mb=0.001, floor=0)))  # type: ignore[arg-type]
    tagged = Filter(tags_any=["common"])
    assert await pages(unindexed, tiny, vector, tagged) == await pages(
        unindexed, rankings(embedder, EngineOptions()), vector, tagged
    )


async def test_keys_under_the_floor_are_left_to_the_statement(unindexed: PostgresEngine, embedder: Any) -> None:
    """A key of few postings is scanned by the statement as fast as a copy would serve it: none is held,
    and the key is not read again on every ask."""
    await few_among_many(unindexed)
    (vector,) = await embedder.embed([QUERY])
    reads = 0

    async def counted(statement: Statement) -> list[Any]:
        nonlocal reads
        reads += statement.family == "mirror"
        return await unindexed.run(statement)

    mirror = SketchMirror(MirrorOptions(budget_mb=64, floor=21))  # "few" has 20 postings indexed
    for _ in range(3):
        assert await mirror.choose(counted, ["t:few"], vector, 40) is None
        await mirror.read()
    assert (reads, mirror.held_keys, mirror.held_bytes) == (1, 0, 0)
    at_the_floor = SketchMirror(MirrorOptions(budget_mb=64, floor=20))
    await at_the_floor.choose(unindexed.run, ["t:few"], vector, 40)
    await at_the_floor.read()
    assert (await at_the_floor.choose(unindexed.run, ["t:few"], vector, 40)) is not None
    await mirror.close()
    await at_the_floor.close()


async def filed_since(engine: PostgresEngine, key: str, snapshot: str) -> tuple[list[int], list[dict[str, Any]]]:
    """The seqs of ``key``'s postings a copy as of ``snapshot`` lacks, and the plan's nodes as run
    without sequential scans: a test's few hundred postings may be read whole, as the planner may
    choose with statistics of a table that small (seen once in a full run), where what is asked is
    whether the index bounds what the statement reads."""
    statement = plan_filed_since([key], [snapshot])
    rows = await engine.run(statement)
    async with engine.connection() as connection, connection.transaction():
        await connection.execute("SET LOCAL enable_seqscan = off")
        explained = await connection.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + statement.sql, *statement.args)

    def nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
        return [node] + [below for child in node.get("Plans", []) for below in nodes(child)]

    return sorted(row["seq"] for row in rows if row["seq"] is not None), nodes(explained[0]["Plan"])  # json decoded


async def test_a_transaction_left_open_elsewhere_does_not_make_the_copies_read_what_they_hold(
    unindexed: PostgresEngine, database_url: str
) -> None:
    """A session that wrote and stays open holds back every snapshot's xmin; what a copy lacks is
    still read alone (the postings filed since its snapshot's xmax, or by the transactions running
    then), not every posting filed after that session began."""
    idle = await asyncpg.connect(driver_url(database_url))
    try:
        await idle.execute("BEGIN")
        await idle.fetchval("SELECT pg_current_xact_id()")
        await few_among_many(unindexed)  # the postings are filed after the idle session's transaction
        (snapshot,) = await unindexed.run(Statement("SELECT pg_current_snapshot()::text AS s"))
        seqs, plan = await filed_since(unindexed, "t:few", snapshot["s"])
        assert seqs == []
        postings = ("Relation Name", "Index Name")
        read = [node for node in plan if any(str(node.get(of)).startswith("engram_sketch_postings") for of in postings)]
        shown = [(node["Node Type"], node["Actual Rows"], node.get("Rows Removed by Filter")) for node in read]
        assert read and all(node["Actual Rows"] == node.get("Rows Removed by Filter", 0) == 0 for node in read), shown
    finally:
        await idle.close()


async def test_postings_filed_by_a_transaction_running_when_the_copy_was_read_are_found(
    unindexed: PostgresEngine, database_url: str
) -> None:
    await few_among_many(unindexed)
    running = await asyncpg.connect(driver_url(database_url))
    try:
        await running.execute("BEGIN")
        await running.fetchval("SELECT pg_current_xact_id()")
        await unindexed.run(Statement("SELECT pg_current_xact_id()"))  # a later one ends: the first is in the xip list
        (snapshot,) = await unindexed.run(Statement("SELECT pg_current_snapshot()::text AS s"))
        assert snapshot["s"].split(":")[2]
        await running.execute(
            "INSERT INTO engram_sketch_postings (key, seq, item_id, sketch) SELECT 't:late', seq, item_id, sketch"
            " FROM engram_sketch_postings WHERE key = 't:common' ORDER BY seq LIMIT 3"
        )
        await running.execute("COMMIT")
    finally:
        await running.close()
    seqs, _ = await filed_since(unindexed, "t:late", snapshot["s"])
    assert len(seqs) == 3
    (now,) = await unindexed.run(Statement("SELECT pg_current_snapshot()::text AS s"))
    assert (await filed_since(unindexed, "t:late", now["s"]))[0] == []


async def test_copies_of_another_width_are_dropped_not_scanned(unindexed: PostgresEngine, embedder: Any) -> None:
    """Sketches of another model's dimension (before ``engram reembed`` re-filed them) are not compared
    with a question's: the statement ranks, and the copy is read again when next asked."""
    await few_among_many(unindexed)
    mirror = SketchMirror(MirrorOptions(budget_mb=64, floor=0))
    (vector,) = await embedder.embed([QUERY])
    assert await mirror.choose(unindexed.run, ["t:few"], vector, 40) is None  # read in the background
    await mirror.read()
    chosen = await mirror.choose(unindexed.run, ["t:few"], vector, 40)
    assert chosen is not None and len(chosen.ids) == chosen.scanned == 20  # the indexed half; the rest wait
    assert mirror.held_bytes > 0
    wider = np.concatenate([vector, vector])
    assert await mirror.choose(unindexed.run, ["t:few"], wider, 40) is None
    assert mirror.held_bytes == 0
    await mirror.close()
