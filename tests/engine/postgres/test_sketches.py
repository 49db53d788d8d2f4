"""A filter that admits few items is ranked by sketches, then by vectors (sketch_sql, migration 0010).

The sketches are filed in ``engram_sketch_postings`` under the keys a filter finds them by
(each tag, each lineage key), beside the indexed vectors; vectors still queued for the index
have none yet and are ranked exactly. An item filed under several of a filter's tags is ranked once.
Every page must be the exact ranking's, scores included, whether a filter is wholly held
by the sketches' keys or not.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from app.contract.meta import Filter
from app.contract.namespaces import Reach
from app.contract.requests import FetchRequest, ForgetByIds
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.options import EngineOptions, SketchOptions
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.statistics import TERM_STATISTICS, TermStatistics
from app.engine.postgres.queries.vector import vector_sql
from app.engine.postgres.ranking import Rankings
from app.engine.postgres.selectivity import ranks_by_sketch
from app.engine.postgres.vectors import query_vector
from tests.engine.postgres.support import analyse, learning
from tests.engine.postgres.test_indexer import quiet_engine
from tests.support.scratch import SKETCHES_OFF

TOPICS = ["harbour tides", "compiler passes", "sourdough starter", "orbital mechanics", "tax filing"]
QUERY = "tides of the harbour"


@pytest.fixture
async def unindexed(database_url: str, embedder: Any) -> AsyncIterator[PostgresEngine]:
    """Writes stay queued until the test moves them."""
    async for engine in quiet_engine(database_url, embedder, 10_000):
        yield engine


async def scalar(engine: PostgresEngine, sql: str) -> Any:
    async with engine.connection() as connection:
        return await connection.fetchval(sql)


async def exact_ranking(engine: PostgresEngine, embedder: Any, request_filter: Filter, depth: int) -> list[Any]:
    (vector,) = await embedder.embed([QUERY])
    pred = filter_predicate(request_filter)
    sql = vector_sql(pred.sql(), exact=True, dimension=embedder.dimension)
    params = {"vec": query_vector(vector), "model": embedder.name, "depth": depth, "offset": 0, **pred.params}
    return [(row["id"], float(row["score"])) for row in await engine.run(Statement.bind(sql, params))]


async def paged(engine: PostgresEngine, request_filter: Filter, pages: int) -> list[list[tuple[str, float]]]:
    found, cursor = [], None
    for _ in range(pages):
        page = await engine.fetch(
            FetchRequest(query=QUERY, mode="vector", filter=request_filter, limit=10, cursor=cursor)  # type: ignore[arg-type]
        )
        found.append([(hit.id, hit.score) for hit in page.hits])
        cursor = page.next_cursor
    assert cursor is None
    return found


async def few_among_many(engine: PostgresEngine) -> None:
    """300 common items at the root and 40 few ones (20 indexed, 20 still queued) in a namespace and its
    child, a quarter of them tagged "pair" too."""
    common = [learning(f"note {n} on {TOPICS[n % 5]}", tags=["common"]) for n in range(300)]
    for start in range(0, 300, 100):
        await engine.store_many(common[start : start + 100])
    few = [
        learning(
            f"few {n}: {TOPICS[n % 5]} and {TOPICS[(n * 3) % 5]}",
            tags=["few", "pair"] if n % 4 == 0 else ["few"],
            namespace="team:a/agent:x" if n % 2 else "team:a",
        )
        for n in range(40)
    ]
    await engine.store_many(few[20:])
    await engine.finish_indexing()
    await engine.store_many(few[:20])  # nobody indexes these: they wait in the backlog
    await analyse(engine)
    assert await engine.vector_backlog() == 20
    assert await scalar(engine, "SELECT count(DISTINCT item_id) FROM engram_sketch_postings") == 320


async def test_a_filter_admitting_few_items_is_ranked_by_sketches_then_exactly(
    unindexed: PostgresEngine, embedder: Any
) -> None:
    """Every admitted sketch, the nearest by full-precision vectors beside the queued ones:
    pages in the exact ranking's order, with exact distances as scores (the walk's are half precision)."""
    await few_among_many(unindexed)
    request_filter = Filter(tags_any=["few"])
    statistics = TermStatistics.of((await unindexed.run(TERM_STATISTICS))[0])
    assert statistics.tags is not None and statistics.tags.share("few") == pytest.approx(40 / 340, rel=0.01)
    assert ranks_by_sketch(request_filter, statistics, SketchOptions())

    exact = await exact_ranking(unindexed, embedder, request_filter, 40)
    pages = await paged(unindexed, request_filter, 4)
    hits = [hit for page in pages for hit in page]
    assert [item_id for item_id, _ in hits] == [item_id for item_id, _ in exact]
    assert [score for _, score in hits] == pytest.approx([score for _, score in exact], abs=1e-12)
    assert [len(page) for page in pages] == [10, 10, 10, 10]


@pytest.mark.parametrize(
    "request_filter, admitted",
    [
        # The sketches hold these wholly.
        (Filter(reach=Reach(at="team:a", inherit=False, descendants=True)), 40),
        (Filter(reach=Reach(at="team:a/agent:x", inherit=False, descendants=True)), 20),
        (Filter(tags_any=["few"], reach=Reach(at="team:a", inherit=False, descendants=True)), 40),
        (Filter(tags_any=["pair"], reach=Reach(at="team:a/agent:x", inherit=False, descendants=True)), 0),
        (Filter(tags_any=["pair"], reach=Reach(at="team:a", inherit=False, descendants=True)), 10),
        # Filed under both tags, a "pair" item is ranked once.
        (Filter(tags_any=["few", "pair"]), 40),
        (Filter(tags_any=["pair", "few"], reach=Reach(at="team:a", inherit=False, descendants=True)), 40),
        # These the items' rows narrow further.
        (Filter(tags_any=["few"], kinds=["learning"]), 40),
        (Filter(reach=Reach(at="team:a", inherit=False)), 20),
        (Filter(reach=Reach(at="team:a/agent:x", inherit=False)), 20),
        (Filter(tags_any=["few"], reach=Reach(at="team:a", inherit=True, descendants=True)), 40),
        (Filter(tags_any=["few"], agent_id="nobody"), 0),
    ],
)
async def test_a_filter_the_sketches_hold_only_in_part_is_ranked_exactly_too(
    unindexed: PostgresEngine, embedder: Any, request_filter: Filter, admitted: int
) -> None:
    await few_among_many(unindexed)
    statistics = TermStatistics.of((await unindexed.run(TERM_STATISTICS))[0])
    assert ranks_by_sketch(request_filter, statistics, SketchOptions())
    exact = await exact_ranking(unindexed, embedder, request_filter, 60)
    assert len(exact) == admitted
    pages = await paged(unindexed, request_filter, max(1, -(-admitted // 10)))
    hits = [hit for page in pages for hit in page]
    assert [item_id for item_id, _ in hits] == [item_id for item_id, _ in exact]
    assert [score for _, score in hits] == pytest.approx([score for _, score in exact], abs=1e-12)


async def test_the_indexer_writes_each_sketch_with_its_items_keys_and_a_forget_takes_it(
    unindexed: PostgresEngine,
) -> None:
    await few_among_many(unindexed)
    assert await scalar(unindexed, SKETCHES_OFF) == 0
    await unindexed.finish_indexing()
    assert await scalar(unindexed, "SELECT count(DISTINCT item_id) FROM engram_sketch_postings") == 340
    assert await scalar(unindexed, SKETCHES_OFF) == 0
    doomed = [learning(f"note {n} on {TOPICS[n % 5]}", tags=["common"]).checked().fingerprint() for n in range(10)]
    report = await unindexed.forget(ForgetByIds(ids=doomed))
    assert report.forgotten == 10
    assert await scalar(unindexed, "SELECT count(DISTINCT item_id) FROM engram_sketch_postings") == 330
    assert await scalar(unindexed, SKETCHES_OFF) == 0


async def test_a_sample_of_the_sketches_bounds_the_distance_their_candidates_are_sorted_within(
    unindexed: PostgresEngine, embedder: Any
) -> None:
    """For a filter ranked by sketches for its share, only the sketches within a distance the first
    ones bound are sorted: the same candidates, so the same pages, whether enough lie within it or
    (a sample that misleads) every admitted sketch is sorted after all."""
    await few_among_many(unindexed)
    (vector,) = await embedder.embed([QUERY])
    wide = Filter(tags_any=["common"])  # 300 admitted, every sketch filed
    share_only = SketchOptions(max_admitted=0, max_share=1.0, max_sparse=10_000, sparse_candidates=40)

    async def ranked(sampled: int, margin: float) -> tuple[list[list[tuple[str, float]]], int | None]:
        sketch = replace(share_only, sampled=sampled, sample_margin=margin)
        rankings = Rankings(
            model=embedder.name,
            dimension=embedder.dimension,
            ts_config="english",
            options=EngineOptions(sketch=sketch),
        )
        pages, within = [], None
        for offset in (0, 10, 20):
            statement, settled = await rankings.vector_statement(
                unindexed.run, vector, wide, filter_predicate(wide), offset, 10
            )
            assert settled and "engram_sketch_postings" in statement.sql
            pages.append([(row["id"], float(row["score"])) for row in await unindexed.run(statement)])
            if offset == 0 and "within AS" in statement.sql:
                explained = Statement("EXPLAIN (ANALYZE, COSTS OFF) " + statement.sql, statement.args)
                plan = [row[0] for row in await unindexed.run(explained)]
                start = next(n for n, line in enumerate(plan) if line.strip() == "CTE within")
                within = int(float(re.search(r"rows=([0-9.]+)", plan[start + 1]).group(1)))  # type: ignore[union-attr]
        return pages, within

    every, none_within = await ranked(sampled=0, margin=1.0)
    assert none_within is None and [len(page) for page in every] == [10, 10, 10]
    enough, within = await ranked(sampled=100, margin=3.0)
    assert enough == every and within == 40  # the first page's 40 candidates, found within the bound
    misled, within = await ranked(sampled=100, margin=0.05)
    assert misled == every and within is not None and within < 40  # too few within: all sorted
