"""Reciprocal rank fusion: the ``hybrid`` ranking (contract §5) from a keyword and a vector ranking."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

RRF_K = 60
Key = TypeVar("Key", bound=Hashable)


def fuse(rankings: Iterable[Sequence[Key]], seq: Mapping[Key, int], k: int = RRF_K) -> list[tuple[Key, float]]:
    """Each key with the sum of ``1 / (k + rank)`` over the rankings it is in, best first.

    Ties go to the key stored first (lower ``seq``), as in every other ranking.
    """
    scores: dict[Key, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda scored: (-scored[1], seq[scored[0]]))
