"""Ranking metrics for one question: which of its gold items a ranking found, and how high.

Pure functions over ids, so a ranking kept in a details file can be scored again offline.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

NDCG_DEPTH = 10


def recall_at(ranking: Sequence[str], gold: Collection[str], k: int) -> float:
    """The share of the gold items found in the top ``k``."""
    if not gold:
        raise ValueError("a question without gold items has no recall")
    top = set(ranking[:k])
    return sum(1 for g in set(gold) if g in top) / len(set(gold))


def reciprocal_rank(ranking: Sequence[str], gold: Collection[str]) -> float:
    """1 / the rank of the first gold item; 0 when the ranking read holds none."""
    wanted = set(gold)
    for rank, item in enumerate(ranking, start=1):
        if item in wanted:
            return 1.0 / rank
    return 0.0


def ndcg_at(ranking: Sequence[str], gold: Collection[str], k: int = NDCG_DEPTH) -> float:
    """Binary-relevance nDCG: the gain of the top ``k`` over the best possible, ``min(|gold|, k)`` hits first."""
    wanted = set(gold)
    if not wanted:
        raise ValueError("a question without gold items has no nDCG")
    seen: set[str] = set()
    gain = 0.0
    for position, item in enumerate(ranking[:k]):
        if item in wanted and item not in seen:
            seen.add(item)
            gain += 1.0 / math.log2(position + 2)
    ideal = sum(1.0 / math.log2(position + 2) for position in range(min(len(wanted), k)))
    return gain / ideal


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
