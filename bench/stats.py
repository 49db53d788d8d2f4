"""Latency samples and their summary."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


def summary(samples_ms: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/mean in milliseconds (linear interpolation between samples)."""
    values = np.asarray(samples_ms, dtype=float)
    if values.size == 0:
        return {"count": 0}
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {
        "count": int(values.size),
        "p50": round(float(p50), 3),
        "p95": round(float(p95), 3),
        "p99": round(float(p99), 3),
        "mean": round(float(values.mean()), 3),
    }


async def timed(call: Callable[[], Awaitable[T]]) -> tuple[float, T]:
    """Run ``call`` once; its wall time in milliseconds and its result."""
    start = time.perf_counter()
    result = await call()
    return (time.perf_counter() - start) * 1000, result


async def measure(
    calls: Sequence[Callable[[], Awaitable[Any]]],
    *,
    warmup: int = 10,
    between: Callable[[], Awaitable[Any]] | None = None,
) -> tuple[dict[str, float], list[Any]]:
    """Run the calls one after another (one in flight), the first ``warmup`` untimed; summary and results.

    ``between``, when given, runs after each timed call, outside its time.
    """
    alone = await measure_paired({"calls": calls}, warmup=warmup, after={"calls": between} if between else None)
    return alone["calls"]


def turn_order(names: Sequence[str], i: int) -> list[str]:
    """Who answers query ``i`` first, second, ...: a Williams design, so that over each ``2 * len(names)``
    queries every system is first as often as any other and right after each other system as often
    as after any other.

    Whoever asks a question right after another finds what that answer read still in the CPU's
    caches (the same pages, for a system on the same data), or evicted (after a search that reads
    a lot): on a kept 100k store the same vector search took 2.2 ms asked first and 1.6 ms asked
    second (through HTTP 2.8 and 2.1; keyword the same; 2026-12-03). A plain rotation of four
    systems put raw SQL right after Engram's same search in three turns of four and never before
    it, and Engram right after LangGraph's widest search where raw SQL never was.
    """
    count = len(names)
    first = [0]  # 0, 1, n-1, 2, n-2, ...: each difference between neighbours once
    low, high = 1, count - 1
    while len(first) < count:
        first.append(low)
        low += 1
        if len(first) < count:
            first.append(high)
            high -= 1
    row = i % (2 * count)
    order = [names[(k + row) % count] for k in first]
    # With an odd count the rows and their mirror images together balance who follows whom.
    return order[::-1] if count % 2 and row >= count else order


async def measure_paired(
    calls: Mapping[str, Sequence[Callable[[], Awaitable[Any]]]],
    *,
    warmup: int = 10,
    after: Mapping[str, Callable[[], Awaitable[Any]]] | None = None,
) -> dict[str, tuple[dict[str, float], list[Any]]]:
    """Each system's i-th call back to back with the others', who goes first rotating with i; per system
    what ``measure`` gives.

    A ratio between two systems is then made of pairs run within milliseconds of each other: this
    VM's pace drifts by minutes, and a case of 200 queries timed after another's can land in another
    pace (2026-12-02, 10k, one database: the same 200 raw vector searches p50 4.0 to 6.5 ms
    from one case to the next, the service's ratio to raw + floor 1.10 to 1.75x that way; paired,
    1.21 to 1.35x). ``after[name]``, when given, runs after each of that system's timed calls,
    outside its time. The order of each turn is ``turn_order``'s.
    """
    names = list(calls)
    length = await _warm_up(calls, warmup)
    after = after or {}
    samples: dict[str, list[float]] = {name: [] for name in names}
    results: dict[str, list[Any]] = {name: [] for name in names}
    for i in range(length):
        for name in turn_order(names, i):
            elapsed, result = await timed(calls[name][i])
            samples[name].append(elapsed)
            results[name].append(result)
            probe = after.get(name)
            if probe is not None:
                await probe()
    return {name: (summary(samples[name]), results[name]) for name in names}


async def measure_in_blocks(
    calls: Mapping[str, Sequence[Callable[[], Awaitable[Any]]]], *, block: int = 10, warmup: int = 10
) -> dict[str, dict[str, float]]:
    """Each system's calls ``block`` at a time, the systems taking turns block by block (who goes
    first alternating); the summary of each system's timed calls.

    For one service at two sizes (the growth cases, run.growth_cases): alternating call by call
    would have each answer find the other store's pages in the CPU's caches, which a service
    answering its own traffic does not; blocks of ten keep a store's own locality and are still
    timed within a second of each other's, however the shared machine's pace drifts over minutes.
    """
    names = list(calls)
    length = await _warm_up(calls, warmup)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for turn, start in enumerate(range(0, length, block)):
        for name in names if turn % 2 == 0 else names[::-1]:
            for call in calls[name][start : start + block]:
                elapsed, _ = await timed(call)
                samples[name].append(elapsed)
    return {name: summary(samples[name]) for name in names}


async def _warm_up(calls: Mapping[str, Sequence[Callable[[], Awaitable[Any]]]], warmup: int) -> int:
    """Each system's first ``warmup`` calls, untimed, in turn; how many calls each system has."""
    length = len(next(iter(calls.values()), []))
    if any(len(c) != length for c in calls.values()):
        raise ValueError("every system needs the same number of calls")
    for i in range(min(warmup, length)):
        for name in calls:
            await calls[name][i]()
    return length


class Probe:
    """A call timed each time it is run (``measure``'s ``between``): the floor in the rhythm of real requests."""

    def __init__(self, call: Callable[[], Awaitable[Any]]) -> None:
        self._call = call
        self.samples: list[float] = []

    async def __call__(self) -> None:
        elapsed, _ = await timed(self._call)
        self.samples.append(elapsed)
