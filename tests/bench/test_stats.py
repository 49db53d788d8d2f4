"""The benchmark's pairing gives no system a seat the others never get (bench/stats.py)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from bench.stats import turn_order


@pytest.mark.parametrize(
    "names", [["engram", "raw"], ["engram", "raw", "langgraph", "langgraph_wide"], list("abc"), list("abcde")]
)
def test_over_each_round_every_system_is_first_and_follows_every_other_as_often(names: list[str]) -> None:
    rounds = [turn_order(names, i) for i in range(2 * len(names))]
    assert all(sorted(order) == sorted(names) for order in rounds)
    firsts = Counter(order[0] for order in rounds)
    assert set(firsts.values()) == {2}
    follows = Counter((a, b) for order in rounds for a, b in itertools.pairwise(order))
    # Each system right after each other one equally often: none always warm from another's
    # answer to the same question, none always cold after the heaviest.
    assert len(set(follows.values())) == 1
    assert set(follows) == {(a, b) for a in names for b in names if a != b}
