"""The keyword ranking's statement (no database): its shape for each case, and its bounds."""

from __future__ import annotations

import re

from app.contract.meta import Filter
from app.engine.keywords import MAX_TERMS, KeywordQuery
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.options import KeywordOptions
from app.engine.postgres.queries.keyword import keyword_params, plan_keyword
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.statistics import TermStatistics

STATS = TermStatistics(elems="{garden,soil}", freqs="{0.5,0.25,0.25,0.5,0}", items=1_000.0)


def plan(query: str, request_filter: Filter | None = None, *, offset: int = 0, count: int = 11) -> Statement:
    return plan_keyword(
        KeywordQuery.parse(query),
        filter_predicate(request_filter or Filter()),
        offset=offset,
        count=count,
        statistics=STATS,
        ts_config="english",
        options=KeywordOptions(),
    )


def placeholders(statement: Statement) -> set[int]:
    return {int(n) for n in re.findall(r"\$(\d+)", statement.sql)}


def test_every_name_is_bound_and_every_placeholder_has_its_argument() -> None:
    for statement in (plan("garden soil quokka"), plan("garden", Filter(tags_any=["t"])), plan("garden", offset=400)):
        assert not re.search(r"(?<!:):[A-Za-z_]", statement.sql)
        assert placeholders(statement) == set(range(1, len(statement.args) + 1))


def test_an_unfiltered_ranking_scores_the_fullest_matches_first_on_a_generic_plan() -> None:
    statement = plan("garden soil quokka")
    assert statement.generic_plan
    assert "pairs AS" in statement.sql
    filtered = plan("garden soil quokka", Filter(tags_any=["t"]))
    assert not filtered.generic_plan
    assert "pairs AS" not in filtered.sql
    assert "tags &&" in filtered.sql


def test_a_page_past_the_pool_continues_with_the_other_matches() -> None:
    pool = KeywordOptions().pool
    assert "whole AS" not in plan("garden", count=pool).sql
    deep = plan("garden", offset=pool, count=10)
    assert "whole AS" in deep.sql and "rest AS" in deep.sql


def test_the_score_adds_one_term_per_operand_up_to_the_most_counted() -> None:
    few = plan("garden soil quokka").sql
    assert few.count("ts_rank(i.tsv, w.tq[") == 3
    many = plan(" ".join(f"word{n}" for n in range(MAX_TERMS + 5))).sql
    assert many.count("ts_rank(i.tsv, w.tq[") == MAX_TERMS


def test_the_bounds_never_leave_a_page_short() -> None:
    keywords = KeywordQuery.parse("garden quokka")
    options = KeywordOptions(pool=300, budget=10, scored=5, middle=5, settled=100)
    params = keyword_params("english", keywords, 40, STATS, options)
    assert (params["budget"], params["scored"], params["pool"], params["settled"]) == (10, 5, 300, 100)
    assert params["middle"] == 10  # never below the budget
    assert params["topup"] == 300  # never below the pool
    assert params["ranked"] == 300
    assert keyword_params("english", keywords, 500, STATS, options)["ranked"] == 500
    assert params["elems"] == STATS.elems and params["items"] == STATS.items


def test_page_count_offset_and_configuration_are_arguments() -> None:
    statement = plan("garden", offset=20, count=11)
    assert "LIMIT $" in statement.sql and "OFFSET $" in statement.sql
    assert 20 in statement.args and 11 in statement.args and "english" in statement.args
