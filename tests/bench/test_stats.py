"""The benchmark's pairing gives no system a seat the others never get (bench/stats.py)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Awaitable, Callable

import pytest

from bench.stats import measure_in_blocks, turn_order


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


async def test_two_sizes_take_turns_block_by_block_each_call_timed_once_after_the_warmup() -> None:
    calls: list[tuple[str, int]] = []

    def recorder(name: str, i: int) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            calls.append((name, i))

        return call

    measured = await measure_in_blocks(
        {name: [recorder(name, i) for i in range(25)] for name in ("small", "large")}, block=10, warmup=3
    )
    assert {name: figures["count"] for name, figures in measured.items()} == {"small": 25, "large": 25}
    warmup, timed = calls[:6], calls[6:]
    assert warmup == [("small", 0), ("large", 0), ("small", 1), ("large", 1), ("small", 2), ("large", 2)]
    # Ten of one, ten of the other, who goes first alternating; each call once, in its own order.
    runs = [(name, len(list(group))) for name, group in itertools.groupby(timed, key=lambda c: c[0])]
    assert runs == [("small", 10), ("large", 20), ("small", 15), ("large", 5)]
    for name in ("small", "large"):
        assert [i for n, i in timed if n == name] == list(range(25))


async def test_blocks_need_as_many_calls_from_every_system() -> None:
    async def call() -> None:
        return None

    with pytest.raises(ValueError, match="same number of calls"):
        await measure_in_blocks({"small": [call] * 3, "large": [call] * 2})
