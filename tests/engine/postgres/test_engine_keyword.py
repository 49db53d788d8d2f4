"""Keyword ranking through the engine: BM25-like scores, budgets, top-ups and the terms index."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.contract.meta import Filter
from app.contract.requests import FetchRequest
from app.engine import keywords
from app.engine.keywords import MAX_TERMS, KeywordQuery
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.options import EngineOptions, KeywordOptions
from app.engine.postgres.queries.keyword import keyword_params, plan_keyword
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.statistics import TERM_STATISTICS, TermStatistics
from app.engine.postgres.ranking import Rankings
from tests.engine.postgres.support import EVERY_MATCH, analyse, learning, stored_in_table_order

KEYWORD_POOL = KeywordOptions().pool


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
    matching = [i.checked().fingerprint() for n, i in enumerate(items) if n % 5 >= 1]
    assert len(seen) == len(set(seen)) == len(matching)
    assert set(seen) == set(matching)
    assert scores == sorted(scores, reverse=True)
    first_ten = await pg_engine.fetch(FetchRequest(query="tomato basil water", mode="keyword", limit=10))
    assert [h.id for h in first_ten.hits] == seen[:10]


async def test_keyword_ranking_weighs_a_rare_word_above_common_ones(pg_engine: PostgresEngine) -> None:
    common = [learning(f"deploy notes for the service, entry {n}") for n in range(400)]
    rare = learning("the zeppelin checklist")
    crowded = learning("deploy notes for the service and deploy notes again")
    await stored_in_table_order(pg_engine, common, [rare, crowded])
    page = await pg_engine.fetch(FetchRequest(query="deploy notes service zeppelin", mode="keyword", limit=3))
    assert page.hits[0].id == rare.checked().fingerprint()
    assert page.hits[1].id == crowded.checked().fingerprint()


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
    rare_ids = {i.checked().fingerprint() for i in rare}
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
    both_ids = {i.checked().fingerprint() for i in both}
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
    two_ids = {i.checked().fingerprint() for i in two}
    unbounded = await keyword_page(pg_engine, "quokka wombat garden", limit=10, budget=EVERY_MATCH)
    assert set(unbounded[:3]) == two_ids
    bounded = await keyword_page(pg_engine, "quokka wombat garden", limit=10, budget=60, scored=20)
    assert bounded[:3] == unbounded[:3]


async def test_a_filter_admitting_many_items_scores_the_matches_holding_a_second_word_first(
    pg_engine: PostgresEngine,
) -> None:
    """As without a filter (above), under a filter the statistics bound to more than
    KeywordOptions.broad items: its rarest words' matches run past the budget too."""
    lone = [learning(f"quokka sighting {n}", tags=["wide"]) for n in range(40)]
    both = [learning(f"quokka in the garden, visit {n}", tags=["wide"]) for n in range(4)]
    common = [learning(f"garden soil report {n}", tags=["wide"]) for n in range(300)]
    await stored_in_table_order(pg_engine, lone, both, common)
    both_ids = {i.checked().fingerprint() for i in both}
    wide = Filter(tags_any=["wide"])

    async def first_four(broad: int) -> set[str]:
        options = replace(KeywordOptions(), budget=20, scored=20, middle=20, broad=broad)
        rankings = Rankings(model="unused", dimension=1, ts_config="english", options=EngineOptions(keyword=options))
        rows = await rankings.keyword(
            pg_engine.run, KeywordQuery.parse("quokka garden"), wide, filter_predicate(wide), 0, 10
        )
        return {row["id"] for row in rows[:4]}

    # 344 items admitted: over 300 the matches are held first, else the first 20 in table order
    # are scored, and those are all lone.
    assert await first_four(broad=300) == both_ids
    assert not await first_four(broad=400) & both_ids


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
    quokka, wombat = (learning(f"{w} sighting").checked().fingerprint() for w in ("quokka", "wombat"))
    assert seen[0] == quokka and wombat not in seen
    assert sorted(seen[1:]) == sorted(i.checked().fingerprint() for i in gardens)


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
    rare_ids = {i.checked().fingerprint() for i in rare}
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
    ids = [[i.checked().fingerprint() for i in group] for group in (rare, plain, repeated)]
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
