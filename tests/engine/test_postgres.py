"""What only the PostgreSQL engine must show: races, paging under writers, scale, atomicity."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import asyncpg
import numpy as np
import pytest

from app.contract.errors import EngineFailure
from app.contract.items import ITEM_ADAPTER, StoredItem
from app.contract.meta import Filter
from app.contract.requests import ExploreRequest, FetchRequest, ListRequest
from app.engine import keywords
from app.engine.keywords import MAX_TERMS, KeywordQuery
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.options import EngineOptions, HNSWOptions, KeywordOptions, PoolOptions
from app.engine.postgres.queries.backlog import INDEXER_LOCK_ORDER
from app.engine.postgres.queries.keyword import keyword_params, plan_keyword
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.statistics import TERM_STATISTICS, TermStatistics
from app.engine.postgres.queries.vector import search_breadth, vector_sql
from app.engine.postgres.schema import driver_url
from tests.conftest import truncate

KEYWORD_POOL = KeywordOptions().pool
# One connection a pool, so every statement a test makes is on it.
ONE_CONNECTION = PoolOptions(size=1, overflow=0)


def learning(text_: str, **meta: Any) -> StoredItem:
    return ITEM_ADAPTER.validate_python(
        {"type": "learning", "text": text_, "kind": "fact", "confidence": 0.5, "meta": meta}
    )


async def count_rows(engine: PostgresEngine) -> tuple[int, int]:
    """Items, and vectors wherever they are: in the index or still queued for it."""
    async with engine.connection() as connection:
        items = await connection.fetchval("SELECT count(*) FROM engram_items")
        vectors = await connection.fetchval(
            "SELECT (SELECT count(*) FROM engram_embeddings) + (SELECT count(*) FROM engram_vector_backlog)"
        )
    return int(items or 0), int(vectors or 0)


async def test_concurrent_identical_stores_make_one_row(pg_engine: PostgresEngine) -> None:
    item = learning("the same fact, told twenty times at once")
    receipts = await asyncio.gather(*(pg_engine.store(item) for _ in range(20)))
    assert {r.id for r in receipts} == {item.validate().fingerprint()}
    assert sorted(r.replayed for r in receipts) == [False] + [True] * 19
    assert await count_rows(pg_engine) == (1, 1)


async def test_concurrent_overlapping_batches_make_one_row_each(pg_engine: PostgresEngine) -> None:
    items = [learning(f"overlap {n}") for n in range(30)]
    batches = [items[i : i + 20] for i in range(0, 20, 5)]
    results = await asyncio.gather(*(pg_engine.store_many(b) for b in batches))
    by_id: dict[str, int] = Counter()
    for receipts in results:
        for receipt in receipts:
            by_id[receipt.id] += not receipt.replayed
    assert all(written == 1 for written in by_id.values())
    assert await count_rows(pg_engine) == (len(by_id), len(by_id))


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


NATURAL_QUESTIONS = [
    ("How do I configure the nginx reverse proxy?", "nginx reverse proxy configuration lives in /etc/nginx"),
    ("What was decided about the database migration?", "we decided to run the database migration on sunday"),
    ("Who is responsible for the billing service?", "maria owns the billing service and its alerts"),
    ("Which python version does the project use?", "the project pins python 3.11 in pyproject"),
]


async def test_keyword_fetch_answers_natural_language_questions(pg_engine: PostgresEngine) -> None:
    filler = [learning(f"unrelated note {n} about gardening and tomatoes") for n in range(40)]
    answers = [learning(a) for _, a in NATURAL_QUESTIONS]
    ids = [r.id for r in await pg_engine.store_many(filler + answers)][-len(answers) :]
    for (question, _), expected in zip(NATURAL_QUESTIONS, ids, strict=True):
        page = await pg_engine.fetch(FetchRequest(query=question, mode="keyword", limit=3))
        assert page.hits and page.hits[0].id == expected, question


async def test_selective_filter_in_vector_mode_still_fills_the_page(
    pg_engine: PostgresEngine, database_url: str, embedder: Any
) -> None:
    # An agent filter: no statistics bound it, so it is searched through the index (a tag would
    # be ranked by sketches once the statistics say how few hold it).
    items = [learning(f"common note {n}", agent_id="common") for n in range(2_000)]
    rare = [learning(f"rare note {n}", agent_id="rare") for n in range(15)]
    for start in range(0, len(items), 100):
        await pg_engine.store_many(items[start : start + 100])
    await pg_engine.store_many(rare)
    # Make the planner walk the HNSW index, and the index stop after ef_search candidates
    # (as a scan stops at hnsw.max_scan_tuples on a far larger table): only the exact
    # fallback can then fill the page.
    async with pg_engine.connection() as connection:
        await connection.execute("ALTER DATABASE postgres SET enable_sort = off")
    short_sighted = await PostgresEngine.connect(
        database_url,
        embedder,
        options=EngineOptions(hnsw=HNSWOptions(ef_search=40, ef_search_filtered=40, iterative_scan="off")),
    )
    try:
        for mode in ("vector", "hybrid"):
            page = await short_sighted.fetch(
                FetchRequest(query="note", mode=mode, filter=Filter(agent_id="rare"), limit=10)  # type: ignore[arg-type]
            )
            assert len(page.hits) == 10, mode
            assert all(h.meta.agent_id == "rare" for h in page.hits)
    finally:
        await short_sighted.close()
        async with pg_engine.connection() as connection:
            await connection.execute("ALTER DATABASE postgres RESET enable_sort")


def index_buffers(plan: str) -> int:
    """Shared buffers the HNSW index scan of an EXPLAIN (ANALYZE, BUFFERS) read: how far it walked."""
    lines = plan.splitlines()
    (at,) = [n for n, line in enumerate(lines) if "Index Scan using engram_embeddings_hnsw" in line]
    buffers = next(line for line in lines[at + 1 :] if "Buffers:" in line)
    return sum(int(part.split("=")[1]) for part in buffers.split() if "=" in part)


async def test_a_filtered_search_walks_the_index_wider_for_its_statement_alone(
    database_url: str, embedder: Any
) -> None:
    """The breadth travels inside the statement: the walk follows it, and the connection keeps its own."""
    from app.engine.postgres.vectors import query_vector

    engine = await PostgresEngine.connect(
        database_url,
        embedder,
        options=EngineOptions(pool=ONE_CONNECTION, hnsw=HNSWOptions(ef_search=123, ef_search_filtered=456)),
    )
    try:
        assert (
            search_breadth(
                filter_predicate(Filter(tags_any=["x"])), exact=False, filtered=engine.options.hnsw.ef_search_filtered
            )
            == 456
        )
        assert (
            search_breadth(
                filter_predicate(Filter(kinds=["learning"])),
                exact=False,
                filtered=engine.options.hnsw.ef_search_filtered,
            )
            == 456
        )
        assert (
            search_breadth(filter_predicate(Filter()), exact=False, filtered=engine.options.hnsw.ef_search_filtered)
            is None
        )
        assert (
            search_breadth(
                filter_predicate(Filter(tags_any=["x"])), exact=True, filtered=engine.options.hnsw.ef_search_filtered
            )
            is None
        )
        await truncate(engine)
        for batch in range(3):
            await engine.store_many([learning(f"breadth probe {batch} {n}") for n in range(100)])
        await engine.finish_indexing()
        (vector,) = await embedder.embed(["breadth probe"])
        params = {"vec": query_vector(vector), "model": embedder.name, "depth": 5, "offset": 0}
        walked = {}
        async with engine.connection() as connection, connection.transaction():
            # On a table this small only a planner told to avoid the alternatives picks an index.
            for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
                await connection.execute(f"SET LOCAL {setting} = off")
            for breadth in (5, 400):  # the connection's own is 123, between them
                sql = vector_sql("TRUE", exact=False, dimension=embedder.dimension, breadth=breadth)
                explain = Statement.bind("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
                rows = await connection.fetch(explain.sql, *explain.args)
                walked[breadth] = index_buffers("\n".join(row[0] for row in rows))
        assert walked[400] > 2 * walked[5], walked
        # One pooled connection: what one statement set must not reach the next.
        breadth = "SELECT current_setting('hnsw.ef_search') AS ef"
        widened = vector_sql("TRUE", exact=False, dimension=embedder.dimension, breadth=456)
        assert len(await engine.run(Statement.bind(widened, params))) == 5
        assert (await engine.run(Statement.bind(breadth, {})))[0]["ef"] == "123"
    finally:
        await engine.close()


async def test_rankings_without_a_filter_reuse_one_plan_and_filtered_ones_are_planned_for_their_values(
    database_url: str, embedder: Any
) -> None:
    """A generic plan saves the planning where the values change no estimate, and only there."""
    engine = await PostgresEngine.connect(database_url, embedder, options=EngineOptions(pool=ONE_CONNECTION))
    plans = (
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
        "WHERE statement LIKE '%' || :marker || '%' AND statement NOT LIKE '%' || :other || '%'"
    )
    try:
        await truncate(engine)
        await engine.store_many([learning(f"plan note {i}", tags=["planned"]) for i in range(5)])
        await engine.finish_indexing()
        for _ in range(3):
            for mode in ("keyword", "vector"):
                await engine.fetch(FetchRequest(query="plan note", mode=mode, limit=3))  # type: ignore[arg-type]
                await engine.fetch(
                    FetchRequest(query="plan note", mode=mode, filter=Filter(kinds=["learning"]), limit=3)  # type: ignore[arg-type]
                )
        # Only the unfiltered ranking gathers pairs of rare words; only the filtered one reads kinds
        # (a filter the statistics do not bound: its vector ranking walks the index, never sketches).
        # Each pool keeps its own prepared statements: the unfiltered ones are all on the second.
        for marker, generic in (("pairs AS", True), ("halfvec", True)):
            (unfiltered,) = await engine.run(
                Statement.bind(plans, {"marker": marker, "other": "no such text"}, generic_plan=generic)
            )
            assert (unfiltered["generic_plans"], unfiltered["custom_plans"]) == (3, 0), marker
        for marker, other in (("i.kind = ANY", "halfvec"), ("'hnsw.ef_search'", "tsv")):
            (filtered,) = await engine.run(Statement.bind(plans, {"marker": marker, "other": other}))
            assert (filtered["generic_plans"], filtered["custom_plans"]) == (0, 3), marker
            assert not await engine.run(Statement.bind(plans, {"marker": marker, "other": other}, generic_plan=True)), (
                marker
            )
        setting = "SELECT current_setting('plan_cache_mode') AS m"
        assert (await engine.run(Statement.bind(setting, {})))[0]["m"] == "force_custom_plan"
        assert (await engine.run(Statement.bind(setting, {}, generic_plan=True)))[0]["m"] == "force_generic_plan"
    finally:
        await engine.close()


@contextlib.asynccontextmanager
async def failing_insert(engine: PostgresEngine, table: str, column: str, value: str) -> AsyncIterator[None]:
    """Make PostgreSQL refuse to insert into ``table`` a row whose ``column`` is ``value``."""
    async with engine.connection() as connection, connection.transaction():
        await connection.execute(
            "CREATE FUNCTION engram_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN IF NEW.{column} = '{value}' THEN RAISE EXCEPTION 'injected failure'; END IF; "
            "RETURN NEW; END $$"
        )
        await connection.execute(
            f"CREATE TRIGGER engram_test_fail BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION engram_test_fail()"
        )
    try:
        yield
    finally:
        async with engine.connection() as connection, connection.transaction():
            await connection.execute(f"DROP TRIGGER engram_test_fail ON {table}")
            await connection.execute("DROP FUNCTION engram_test_fail()")


async def test_a_failed_store_many_write_leaves_nothing_half_written(pg_engine: PostgresEngine) -> None:
    batch = [learning(f"batch item {n}") for n in range(5)]
    doomed = batch[3].validate().fingerprint()
    async with failing_insert(pg_engine, "engram_vector_backlog", "item_id", doomed):
        with pytest.raises(EngineFailure) as caught:
            await pg_engine.store_many(batch)
        assert "injected" not in caught.value.message and "INSERT" not in caught.value.message
        assert await count_rows(pg_engine) == (0, 0)
    receipts = await pg_engine.store_many(batch)
    assert not any(r.replayed for r in receipts)
    assert await count_rows(pg_engine) == (5, 5)


async def test_keyword_paging_past_the_ranking_pool_is_one_order(pg_engine: PostgresEngine) -> None:

    words = ["garden", "tomato", "basil", "soil", "water"]
    items = [learning(" ".join(words[: 1 + n % 5]) + f" entry {n}") for n in range(KEYWORD_POOL + 60)]
    for start in range(0, len(items), 100):
        await pg_engine.store_many(items[start : start + 100])
    seen: list[str] = []
    scores: list[float] = []
    cursor = None
    while True:
        page = await pg_engine.fetch(FetchRequest(query="tomato basil water", mode="keyword", limit=70, cursor=cursor))
        seen += [h.id for h in page.hits]
        scores += [h.score for h in page.hits]
        cursor = page.next_cursor
        if cursor is None:
            break
    matching = [i.validate().fingerprint() for n, i in enumerate(items) if n % 5 >= 1]
    assert len(seen) == len(set(seen)) == len(matching)
    assert set(seen) == set(matching)
    assert scores == sorted(scores, reverse=True)
    first_ten = await pg_engine.fetch(FetchRequest(query="tomato basil water", mode="keyword", limit=10))
    assert [h.id for h in first_ten.hits] == seen[:10]


async def analyse(pg_engine: PostgresEngine) -> None:
    """Gather the statistics keyword ranking reads its word frequencies from."""
    async with pg_engine.connection() as connection:
        await connection.execute("ANALYZE engram_items")
    pg_engine.forget_term_statistics()


# A keyword budget no estimate reaches: every match is scored.
EVERY_MATCH = 2**31 - 1


async def stored_in_table_order(pg_engine: PostgresEngine, *groups: list[StoredItem]) -> None:
    """Each group stored after the one before it, in batches of 100, the table rewritten in the order
    they were stored (each pooled connection's inserts fill its own free pages, so two batches'
    rows may interleave), then the statistics gathered."""
    for group in groups:
        for start in range(0, len(group), 100):
            await pg_engine.store_many(group[start : start + 100])
    async with pg_engine.connection() as connection:
        await connection.execute("CLUSTER engram_items USING engram_items_seq")
    await analyse(pg_engine)


async def test_keyword_ranking_weighs_a_rare_word_above_common_ones(pg_engine: PostgresEngine) -> None:
    common = [learning(f"deploy notes for the service, entry {n}") for n in range(400)]
    rare = learning("the zeppelin checklist")
    crowded = learning("deploy notes for the service and deploy notes again")
    await stored_in_table_order(pg_engine, common, [rare, crowded])
    page = await pg_engine.fetch(FetchRequest(query="deploy notes service zeppelin", mode="keyword", limit=3))
    assert page.hits[0].id == rare.validate().fingerprint()
    assert page.hits[1].id == crowded.validate().fingerprint()


async def keyword_statement(
    pg_engine: PostgresEngine, query: str, limit: int, request_filter: Filter | None = None, **budgets: int
) -> Statement:
    """The engine's keyword statement for a first page of ``limit``; ``budgets`` (budget, scored,
    middle) replace KeywordOptions' defaults."""
    keywords = KeywordQuery.parse(query)
    (stats,) = await pg_engine.run(TERM_STATISTICS)
    pred = filter_predicate(request_filter or Filter())
    return plan_keyword(
        keywords,
        pred,
        offset=0,
        count=limit,
        statistics=TermStatistics.of(stats),
        ts_config="english",
        options=replace(KeywordOptions(), **budgets),
    )


async def keyword_plan(pg_engine: PostgresEngine, query: str, request_filter: Filter, *settings: str) -> list[str]:
    """The lines of EXPLAIN for the engine's keyword statement, under ``settings``."""
    statement = await keyword_statement(pg_engine, query, 5, request_filter)
    async with pg_engine.connection() as connection, connection.transaction():
        for setting in settings:
            await connection.execute(setting)
        return [row[0] for row in await connection.fetch("EXPLAIN " + statement.sql, *statement.args)]


async def keyword_page(
    pg_engine: PostgresEngine,
    query: str,
    limit: int,
    budget: int,
    middle: int | None = None,
    request_filter: Filter | None = None,
    scored: int | None = None,
) -> list[str]:
    """The engine's keyword statement with a chosen budget (the default one covers a small test table)."""
    statement = await keyword_statement(
        pg_engine, query, limit, request_filter, budget=budget, scored=scored or budget, middle=middle or budget
    )
    return [row["id"] for row in await pg_engine.run(statement)]


async def test_keyword_score_is_the_idf_weighted_rank_summed_over_the_operands_an_item_holds(
    pg_engine: PostgresEngine,
) -> None:
    """The score written out per operand sums what a subquery over ``terms`` sums: a phrase
    counts only where its words stand together, an all-stop-word operand adds nothing."""
    from app.engine.postgres.queries.keyword import _KEYWORD_TERMS

    texts = [f"garden soil report {n}" for n in range(40)] + [
        "soil garden, the report turned over twice: soil soil",
        "the garden soil report names a quokka",
        "quokka",
    ]
    await stored_in_table_order(pg_engine, [learning(t) for t in texts])
    (stats,) = await pg_engine.run(TERM_STATISTICS)
    definition = f"""
        WITH {_KEYWORD_TERMS}
        SELECT i.id, (SELECT sum(t.idf * ts_rank(i.tsv, t.tq)) FROM terms t WHERE i.tsv @@ t.tq) AS score
        FROM engram_items i
    """
    for query in ('quokka "garden soil" report soil', 'the quokka "garden soil" report soil'):
        page = await pg_engine.fetch(FetchRequest(query=query, mode="keyword", limit=50))
        assert len(page.hits) == len(texts)
        params = keyword_params("english", KeywordQuery.parse(query), 50, TermStatistics.of(stats), KeywordOptions())
        expected = {row["id"]: row["score"] for row in await pg_engine.run(Statement.bind(definition, params))}
        assert {hit.id: hit.score for hit in page.hits} == expected
        assert len(set(expected.values())) > 3


async def test_keyword_budget_scores_the_rare_words_matches_and_still_fills_the_page(
    pg_engine: PostgresEngine,
) -> None:
    common = [learning(f"garden soil report {n}") for n in range(300)]
    rare = [learning(f"garden quokka sighting {n}") for n in range(3)]
    await stored_in_table_order(pg_engine, common, rare)
    rare_ids = {i.validate().fingerprint() for i in rare}
    # A budget below the common word's frequency: only "quokka" matches are scored,
    # and the page is topped up from the other matches.
    bounded = await keyword_page(pg_engine, "garden quokka", limit=40, budget=10)
    unbounded = await keyword_page(pg_engine, "garden quokka", limit=40, budget=EVERY_MATCH)
    assert len(bounded) == len(unbounded) == 40
    assert set(bounded[:3]) == set(unbounded[:3]) == rare_ids
    assert len(set(bounded)) == 40


async def test_keyword_scores_the_matches_holding_a_second_word_first_when_they_run_past_what_is_scored(
    pg_engine: PostgresEngine,
) -> None:
    # "quokka" is the rare word; its 40 lone matches come first in the table, the 4 that also
    # hold "garden" last. Scoring 20 of the 44 in table order would never see those 4.
    lone = [learning(f"quokka sighting {n}") for n in range(40)]
    both = [learning(f"quokka in the garden, visit {n}") for n in range(4)]
    common = [learning(f"garden soil report {n}") for n in range(300)]
    await stored_in_table_order(pg_engine, lone, both, common)
    both_ids = {i.validate().fingerprint() for i in both}
    unbounded = await keyword_page(pg_engine, "quokka garden", limit=10, budget=EVERY_MATCH)
    assert set(unbounded[:4]) == both_ids
    # Only "quokka" within the budget; 20 of its matches scored, the pool topped up from "garden".
    bounded = await keyword_page(pg_engine, "quokka garden", limit=10, budget=60, scored=20)
    assert bounded[:4] == unbounded[:4]


async def test_keyword_scores_the_matches_holding_two_rare_words_before_those_holding_one(
    pg_engine: PostgresEngine,
) -> None:
    # "quokka" and "wombat" are both rare; 40 items hold one of them and the common "garden"
    # (first in the table), 3 hold both rare words and no other (last).
    one = [learning(f"{animal} in the garden, visit {n}") for n in range(20) for animal in ("quokka", "wombat")]
    two = [learning(f"quokka meets wombat {n}") for n in range(3)]
    common = [learning(f"garden soil report {n}") for n in range(300)]
    await stored_in_table_order(pg_engine, one, two, common)
    two_ids = {i.validate().fingerprint() for i in two}
    unbounded = await keyword_page(pg_engine, "quokka wombat garden", limit=10, budget=EVERY_MATCH)
    assert set(unbounded[:3]) == two_ids
    bounded = await keyword_page(pg_engine, "quokka wombat garden", limit=10, budget=60, scored=20)
    assert bounded[:3] == unbounded[:3]


async def test_keyword_query_of_stop_words_only_matches_nothing(pg_engine: PostgresEngine) -> None:
    await pg_engine.store_many([learning(f"the garden of the house {n}") for n in range(30)])
    await analyse(pg_engine)
    for query in ("the of and", '"of the"', "the garden"):
        for request_filter in (Filter(), Filter(kinds=["learning"])):
            page = await pg_engine.fetch(FetchRequest(query=query, mode="keyword", limit=5, filter=request_filter))
            assert len(page.hits) == (5 if "garden" in query else 0), (query, request_filter)


async def test_keyword_terms_are_the_first_that_are_not_stop_words_on_every_page(pg_engine: PostgresEngine) -> None:
    """The query keeps its first MAX_TERMS operands that are not stop words, however many stop words
    come first, and a page past the pool (its matches read by the whole query) keeps the same ones."""
    gardens = [learning(f"garden entry {n}") for n in range(KEYWORD_POOL + 20)]
    await stored_in_table_order(pg_engine, gardens, [learning("quokka sighting"), learning("wombat sighting")])
    stop_words = sorted(keywords.STOP_WORDS)[: MAX_TERMS + 8]
    fillers = [f"filler{n}" for n in range(MAX_TERMS - 2)]
    # quokka is the 32nd word that is not a stop word, wombat the 33rd.
    query = " ".join([*stop_words, "garden", *fillers, "quokka", "wombat"])
    seen: list[str] = []
    cursor = None
    while True:
        page = await pg_engine.fetch(FetchRequest(query=query, mode="keyword", limit=100, cursor=cursor))
        seen += [h.id for h in page.hits]
        if (cursor := page.next_cursor) is None:
            break
    quokka, wombat = (learning(f"{w} sighting").validate().fingerprint() for w in ("quokka", "wombat"))
    assert seen[0] == quokka and wombat not in seen
    assert sorted(seen[1:]) == sorted(i.validate().fingerprint() for i in gardens)


async def test_runs_the_parser_reads_as_one_token_are_searched_without_their_words(pg_engine: PostgresEngine) -> None:
    """KeywordQuery's guess at PostgreSQL's parser (ts_debug): an email, a host or file name, a path, a
    version, a float or a URL is one operand alone; the words of another run are operands beside it."""
    one = ["alice@example.com", "first.last@corp.example.org", "main.py", "my-file.txt", "test_hostile.py"]
    one += ["www.example.com", "app.engine.keywords", "3.11.4", "192.168.0.1", "3.11", "-2.5", "1.5e3", "v2.0"]
    one += ["/etc/nginx/nginx.conf", "/usr/bin", "src/app/main.py", "https://example.com/a/b", "http://x.org"]
    several = ["co-operation", "o'reilly", "key:value", "tabs,spaces", "1,000", "2024-01-05", "12:30", "café.py"]
    several += ["gpt-4o", "foo..bar", "c:\\temp\\x"]
    for run in one + several:
        rows = await pg_engine.run(
            Statement.bind("SELECT alias FROM ts_debug('english', :run) WHERE alias <> 'blank'", {"run": run})
        )
        aliases = [row["alias"] for row in rows]
        assert (len(aliases) == 1 or aliases[0] == "protocol") == (run in one), (run, aliases)
        texts = KeywordQuery.parse(run).texts
        assert texts[0] == run and (len(texts) == 1) == (run in one), (run, texts)


@pytest.mark.parametrize(
    "request_filter",
    [
        Filter(tags_any=["few"]),
        Filter.model_validate({"reach": {"at": "team:few", "inherit": False, "descendants": True}}),
    ],
    ids=["tag", "subtree"],
)
async def test_the_commonest_words_top_up_is_gated_before_it_reads_a_row(
    pg_engine: PostgresEngine, request_filter: Filter
) -> None:
    """The top-up reads the filter's items for the commonest words' matches. Whether it runs at all
    (the pool short, commonest words in the query) must be decided once, before any row: as a join
    condition, a question of stop words under a 17k-item subtree read all of them (134 ms at 100k),
    in whichever join order the planner chose. One-Time Filters are that decision."""
    await pg_engine.store_many([learning(f"garden note {n}", namespace="team:few", tags=["few"]) for n in range(20)])
    plan = await keyword_plan(pg_engine, "the garden", request_filter)
    gates = [line for line in plan if "One-Time Filter" in line]
    assert any("< '300'::bigint) AND (InitPlan" in line for line in gates), "\n".join(gates)


async def test_keyword_top_up_takes_the_middle_words_before_the_commonest(pg_engine: PostgresEngine) -> None:
    rare = [learning(f"quokka garden report {n}", tags=["few"]) for n in range(3)]
    middle = [learning(f"garden entry {n}", tags=["few"] if n < 5 else []) for n in range(400)]
    common = [learning(f"report line {n}", tags=["few"] if n < 100 else []) for n in range(800)]
    everything = rare + middle + common
    await stored_in_table_order(pg_engine, everything)
    rare_ids = {i.validate().fingerprint() for i in rare}
    query, unbounded = "quokka garden report", EVERY_MATCH
    # Only "quokka" within the budget, "garden" within the middle: the middle words' 400
    # matches fill the pool, and the page is the one scoring every match gives.
    bounded = await keyword_page(pg_engine, query, limit=40, budget=10, middle=1_000)
    assert bounded == await keyword_page(pg_engine, query, limit=40, budget=unbounded)
    assert set(bounded[:3]) == rare_ids
    # A filter leaves 5 middle matches: the commonest word's matches fill the page.
    few = Filter(tags_any=["few"])
    bounded = await keyword_page(pg_engine, query, limit=40, budget=10, middle=1_000, request_filter=few)
    assert bounded == await keyword_page(pg_engine, query, limit=40, budget=unbounded, request_filter=few)
    assert len(bounded) == len(set(bounded)) == 40
    assert set(bounded[:3]) == rare_ids


async def test_keyword_commonest_words_fill_only_what_the_pool_lacks_once_the_first_ranks_are_settled(
    pg_engine: PostgresEngine,
) -> None:
    rare = [learning(f"quokka sighting {n}") for n in range(120)]
    plain = [learning(f"report line {n}") for n in range(250)]
    repeated = [learning(f"report report report line {n}") for n in range(150)]
    await stored_in_table_order(pg_engine, rare, plain, repeated)
    ids = [[i.validate().fingerprint() for i in group] for group in (rare, plain, repeated)]
    query, pool = "quokka report", KEYWORD_POOL
    # "quokka" alone is within the budget: its 120 matches settle the first ranks (more than
    # KEYWORD_SETTLED), so "report", the commonest, only fills the pool's other 180, read in
    # table order; scoring all of its 400 matches would have put the repeated ones there.
    bounded = await keyword_page(pg_engine, query, limit=pool, budget=10, scored=1_000)
    unbounded = await keyword_page(pg_engine, query, limit=pool, budget=EVERY_MATCH)
    assert len(set(bounded)) == pool
    assert set(bounded[:120]) == set(unbounded[:120]) == set(ids[0])
    assert bounded[120:] == ids[1][:180]
    assert set(unbounded[120:270]) == set(ids[2])


async def test_stored_vectors_are_the_embedders_float32_vectors_exactly(
    pg_engine: PostgresEngine, embedder: Any
) -> None:
    texts = [f"exact vector {n} of a note about precision" for n in range(30)]
    await pg_engine.store_many([learning(t) for t in texts])
    rows = await pg_engine.run(
        Statement(
            "SELECT i.text, e.embedding::text AS v FROM engram_items i JOIN "
            "(SELECT item_id, embedding FROM engram_embeddings UNION ALL "
            "SELECT item_id, embedding FROM engram_vector_backlog) e ON e.item_id = i.id"
        )
    )
    stored = {row["text"]: np.array(json.loads(row["v"]), dtype=np.float32) for row in rows}
    expected = np.asarray(await embedder.embed(texts), dtype=np.float32)
    for text_, vector in zip(texts, expected, strict=True):
        assert stored[text_].tobytes() == vector.tobytes(), text_


async def test_vector_search_walks_the_half_precision_index(pg_engine: PostgresEngine, embedder: Any) -> None:
    """The statement's distance must be the index's expression, cast and dimension included, or no index serves it."""
    from app.engine.postgres.vectors import query_vector

    await pg_engine.store_many([learning(f"index probe {n}") for n in range(20)])
    (vector,) = await embedder.embed(["index probe"])
    params = {"vec": query_vector(vector), "model": embedder.name, "depth": 5, "offset": 0}
    async with pg_engine.connection() as connection, connection.transaction():
        # On a table this small only a planner told to avoid the alternatives picks an index.
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            await connection.execute(f"SET LOCAL {setting} = off")
        for exact, uses_index in ((False, True), (True, False)):
            sql = vector_sql("TRUE", exact=exact, dimension=embedder.dimension)
            explain = Statement.bind("EXPLAIN " + sql, params)
            plan = "\n".join(row[0] for row in await connection.fetch(explain.sql, *explain.args))
            assert ("engram_embeddings_hnsw" in plan) is uses_index, plan


@pytest.mark.parametrize(
    ("request_filter", "key"),
    [
        (Filter(tags_any=["probe"]), "tags &&"),
        (Filter.model_validate({"reach": {"at": "team:probe", "inherit": False, "descendants": True}}), "lineage @>"),
    ],
    ids=["tag", "subtree"],
)
async def test_a_filtered_keyword_ranking_finds_words_and_filter_in_one_scan_of_the_terms_index(
    pg_engine: PostgresEngine, request_filter: Filter, key: str
) -> None:
    """Words and filter as keys of one GIN scan (migration 0006), not two bitmaps as long as their posting lists."""
    # A tenth of the items hold the words, a third are admitted; the statistics say so.
    items = [
        learning(f"{'terms' if n % 10 == 0 else 'other'} note {n}", **admitted)
        for n in range(300)
        for admitted in [{"namespace": "team:probe/agent:a1", "tags": ["probe"]} if n % 3 == 0 else {}]
    ]
    for start in range(0, len(items), 100):
        await pg_engine.store_many(items[start : start + 100])
    await analyse(pg_engine)
    # On a table this small only a planner told to avoid a scan of it picks an index.
    plan = await keyword_plan(pg_engine, "terms", request_filter, "SET LOCAL enable_seqscan = off")
    # The rarest words' matches and the middle words' (the commonest are read through the filter alone).
    words = [line for line in plan if "Index Cond" in line and "tsv @@" in line]
    assert len(words) == 2 and all(key in line for line in words), "\n".join(plan)
    assert not any("BitmapAnd" in line for line in plan), "\n".join(plan)
    assert all("engram_items_terms" in line for line in plan if "Bitmap Index Scan" in line), "\n".join(plan)


class WrappedEmbedder:
    """The real embedder, passed through; a subclass watches or spoils what it embeds for stored texts."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def name(self) -> str:
        return str(self._inner.name)

    @property
    def dimension(self) -> int:
        return int(self._inner.dimension)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self._inner.embed(texts)

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        return await self._inner.embed_queries(texts)

    async def aclose(self) -> None:
        return None


class SlowOrFailingEmbedder(WrappedEmbedder):
    """The real embedder behind a delay, failing for any text holding ``poison``."""

    def __init__(self, inner: Any, delay_s: float = 0.0) -> None:
        super().__init__(inner)
        self._delay_s = delay_s
        self.finished = 0

    async def embed(self, texts: list[str]) -> np.ndarray:
        await asyncio.sleep(self._delay_s)
        if any("poison" in t for t in texts):
            raise RuntimeError("embedder failed")
        vectors = await self._inner.embed(texts)
        self.finished += 1
        return vectors


async def test_an_embedder_failure_writes_nothing(pg_engine: PostgresEngine, database_url: str, embedder: Any) -> None:
    """A batch whose embedding fails is not written at all, and can be written again."""
    failing = await PostgresEngine.connect(database_url, SlowOrFailingEmbedder(embedder, delay_s=0.2))
    try:
        with pytest.raises(EngineFailure):  # sanitised: the embedder's own message stays in the log
            await failing.store_many([learning(f"fine item {n}") for n in range(3)] + [learning("poison item")])
        assert await count_rows(pg_engine) == (0, 0)
        receipts = await failing.store_many([learning(f"fine item {n}") for n in range(3)])
        assert [r.replayed for r in receipts] == [False] * 3
        assert await count_rows(pg_engine) == (3, 3)
    finally:
        await failing.close()


async def test_an_insert_failure_after_the_batch_is_embedded_writes_nothing(
    pg_engine: PostgresEngine, database_url: str, embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The batch is embedded before its items are inserted: an insert failing undoes all, vectors too."""
    batch = [learning(f"batch item {n}") for n in range(4)]
    doomed = batch[2].validate().fingerprint()
    slow = SlowOrFailingEmbedder(embedder, delay_s=0.3)
    failing = await PostgresEngine.connect(database_url, slow)
    try:
        async with failing_insert(pg_engine, "engram_items", "id", doomed):
            with pytest.raises(EngineFailure):
                await failing.store_many(batch)
        assert slow.finished == 1
        assert await count_rows(pg_engine) == (0, 0)
    finally:
        await failing.close()


async def _pooled_backend_pid(engine: PostgresEngine) -> int:
    async with engine.connection() as connection:
        return int(connection.get_server_pid())


async def test_a_read_costs_one_statement_and_no_ping(database_url: str, embedder: Any) -> None:
    """One round trip a read: no pre-ping (the pool checks for closed connections without asking
    the server), and a statement's own settings (a generic plan, a wider walk) cost none."""
    # One connection a pool, so every statement is seen: the vector indexer's own go aside.
    engine = await PostgresEngine.connect(database_url, embedder, options=EngineOptions(pool=ONE_CONNECTION))
    try:
        # Enough for a page from the index alone: fewer and the vector search also scans exactly.
        await engine.store_many([learning(f"one statement per read {n}", tags=["seen"]) for n in range(6)])
        await engine.finish_indexing()

        async def read() -> None:
            await engine.fetch(FetchRequest(query="statement", mode="keyword", limit=3))
            tagged = Filter(tags_any=["seen"])
            await engine.fetch(FetchRequest(query="statement", mode="vector", filter=tagged, limit=3))
            await engine.list(ListRequest(limit=3))

        await read()  # the word statistics read, the vector types introspected: once a connection
        statements: dict[str, list[str]] = {"custom": [], "generic": []}
        for name, generic_plan in (("custom", False), ("generic", True)):
            async with engine.connection(generic_plan=generic_plan) as connection:
                connection.add_query_logger(lambda record, seen=statements[name]: seen.append(record.query))
        await read()
    finally:
        await engine.close()
    # The indexer's workers poll on the first pool's connection.
    indexer = (INDEXER_LOCK_ORDER, "FOR KEY SHARE", "BEGIN", "COMMIT")
    reads = {name: [s for s in seen if not any(word in s for word in indexer)] for name, seen in statements.items()}
    assert [len(reads["custom"]), len(reads["generic"])] == [2, 1], statements
    assert not [s for seen in statements.values() for s in seen if s.lstrip().upper().startswith("SET")]
    assert not [s for s in statements["generic"] if s.lstrip().upper().startswith(("BEGIN", "COMMIT"))]


async def test_connections_the_server_closed_are_replaced_not_used(
    pg_engine: PostgresEngine, database_url: str
) -> None:
    """A restart or a terminated backend leaves dead connections in the pool: the next requests still succeed."""
    await pg_engine.store(learning("before the backend went away"))
    pid = await _pooled_backend_pid(pg_engine)
    other = await asyncpg.connect(driver_url(database_url))
    try:
        assert await other.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await other.close()
    # asyncpg learns of the closed socket from the event loop.
    for _ in range(100):
        await asyncio.sleep(0.01)
        if await _pooled_backend_pid(pg_engine) != pid:
            break
    page = await pg_engine.fetch(FetchRequest(query="backend", mode="keyword", limit=3))
    assert [hit.text for hit in page.hits] == ["before the backend went away"]
    receipt = await pg_engine.store(learning("after the backend went away"))
    assert not receipt.replayed


class CountingEmbedder(WrappedEmbedder):
    """The real embedder, recording every stored text it is asked to embed."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.texts: list[str] = []

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        return await self._inner.embed(texts)


async def test_a_text_is_embedded_once_and_a_replay_not_at_all(database_url: str, embedder: Any) -> None:
    counting = CountingEmbedder(embedder)
    engine = await PostgresEngine.connect(database_url, counting)
    try:
        await truncate(engine)
        same_text = [learning("one fact", tags=["a"]), learning("one fact", tags=["b"]), learning("another")]
        receipts = await engine.store_many([*same_text, same_text[0]])
        assert [r.replayed for r in receipts] == [False, False, False, True]
        assert sorted(counting.texts) == ["another", "one fact"]
        counting.texts.clear()
        await engine.store_many(same_text)
        await engine.store(same_text[2])
        assert counting.texts == []
        assert await count_rows(engine) == (3, 3)
    finally:
        await engine.close()


async def test_an_item_of_a_thread_is_embedded_after_the_item_stored_before_it(
    database_url: str, embedder: Any
) -> None:
    def turn(text_: str, thread: str, namespace: str = "user:ana") -> StoredItem:
        meta = {"thread_id": thread, "namespace": namespace}
        return ITEM_ADAPTER.validate_python(
            {"type": "conversation", "turns": [{"role": "user", "text": text_}], "meta": meta}
        )

    counting = CountingEmbedder(embedder)
    engine = await PostgresEngine.connect(database_url, counting)
    try:
        await truncate(engine)
        await engine.store(turn("Did you go to the pottery class?", "s1"))
        await engine.store_many([turn("Yes, last Tuesday!", "s1"), turn("Other talk", "s2"), turn("It was fun", "s1")])
        # Another namespace's thread of the same name is another thread.
        await engine.store(turn("Unrelated", "s1", namespace="user:bob"))
        assert counting.texts == [
            "user: Did you go to the pottery class?",
            "user: Did you go to the pottery class?\nuser: Yes, last Tuesday!",
            "user: Other talk",
            "user: Did you go to the pottery class?\nuser: Yes, last Tuesday!\nuser: It was fun",
            "user: Unrelated",
        ]
        # The vector kept is the one of the text in context; the stored text is the item's own.
        (expected,) = await embedder.embed([counting.texts[1]])
        page = await engine.fetch(FetchRequest(query="Yes, last Tuesday!", mode="keyword", limit=1))
        assert page.hits[0].text == "user: Yes, last Tuesday!"
        (kept,) = await engine.run(
            Statement(
                "SELECT coalesce(e.embedding, b.embedding)::text AS v FROM engram_items i "
                "LEFT JOIN engram_embeddings e ON e.item_id = i.id "
                "LEFT JOIN engram_vector_backlog b ON b.item_id = i.id WHERE i.id = $1",
                (page.hits[0].id,),
            )
        )
        assert np.allclose(np.array(json.loads(kept["v"]), dtype=np.float32), expected, atol=1e-6)
    finally:
        await engine.close()
