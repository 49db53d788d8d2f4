"""Ranking metrics against values worked by hand."""

from __future__ import annotations

import math

import pytest

from app.evaluation.metrics import (
    holds_gold,
    mean,
    ndcg_at,
    normalise_answer,
    recall_at,
    reciprocal_rank,
    token_f1,
    word_count,
)

RANKING = ["a", "x", "b", "y", "z", "c"]
GOLD = ["a", "b", "c", "d"]


def test_recall_counts_the_share_of_gold_in_the_top_k() -> None:
    assert recall_at(RANKING, GOLD, 1) == 0.25
    assert recall_at(RANKING, GOLD, 3) == 0.5
    assert recall_at(RANKING, GOLD, 10) == 0.75  # d is never ranked
    assert recall_at([], GOLD, 10) == 0.0


def test_recall_of_repeated_gold_counts_each_item_once() -> None:
    assert recall_at(["a"], ["a", "a", "b"], 1) == 0.5


def test_reciprocal_rank_is_one_over_the_first_gold_rank() -> None:
    assert reciprocal_rank(RANKING, GOLD) == 1.0
    assert reciprocal_rank(["x", "y", "b"], GOLD) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x", "y"], GOLD) == 0.0


def test_ndcg_divides_by_the_ideal_over_min_gold_and_ten() -> None:
    # Gold at ranks 1, 3, 6: gains 1, 1/log2(4)=0.5, 1/log2(7).
    dcg = 1 + 0.5 + 1 / math.log2(7)
    ideal = 1 + 1 / math.log2(3) + 0.5 + 1 / math.log2(5)  # four gold items: ranks 1..4
    assert ndcg_at(RANKING, GOLD) == pytest.approx(dcg / ideal)
    assert ndcg_at(["a", "b"], ["a", "b"]) == 1.0
    assert ndcg_at(["x", "a"], ["a"]) == pytest.approx(1 / math.log2(3))


def test_ndcg_ignores_hits_below_its_depth_and_caps_the_ideal_at_it() -> None:
    ranking = [f"n{i}" for i in range(10)] + ["a"]
    assert ndcg_at(ranking, ["a"]) == 0.0
    gold = [f"g{i}" for i in range(12)]
    assert ndcg_at(gold, gold) == pytest.approx(1.0)


def test_a_question_without_gold_is_refused() -> None:
    with pytest.raises(ValueError):
        recall_at(["a"], [], 1)
    with pytest.raises(ValueError):
        ndcg_at(["a"], [])


def test_mean_of_nothing_is_zero() -> None:
    assert mean([]) == 0.0
    assert mean([1.0, 0.0, 0.5]) == 0.5


def test_answers_are_normalised_without_case_punctuation_or_articles() -> None:
    assert normalise_answer("The 7th of May, 2023!") == "7th of may 2023"
    assert normalise_answer("An apple; a pear") == "apple pear"
    assert normalise_answer("Theatre") == "theatre"  # an article only as a whole word


def test_token_f1_is_the_harmonic_mean_over_token_multisets() -> None:
    assert token_f1("in Lisbon", "Lisbon") == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert token_f1("the Lisbon", "Lisbon") == 1.0
    assert token_f1("red red blue", "red blue green") == pytest.approx(2 / 3)  # one red counts once
    assert token_f1("Porto", "Lisbon") == 0.0
    assert token_f1("", "Lisbon") == 0.0
    assert token_f1("Lisbon", "the") == 0.0  # gold that normalises to nothing


def test_holding_the_gold_answer_means_containing_it_on_word_boundaries() -> None:
    assert holds_gold('"I moved to Lisbon in March 2024" [1]', "Lisbon")
    assert holds_gold("we met on 7 May, 2023.", "7 May 2023")
    assert not holds_gold("on 17 May", "7 May")
    assert not holds_gold("anything", "the")
    assert word_count(" two  words ") == 2
