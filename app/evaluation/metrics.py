"""Metrics for one question: which of its gold items a ranking found, and how high; how close an answer came.

Pure functions over ids and text, so a ranking or an answer kept in a details file can be scored again offline.
"""

from __future__ import annotations

import math
import re
from collections import Counter
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


# Answer metrics: an answer's text against a gold answer's text.

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = re.compile(r"[^\w\s]")


def normalise_answer(text: str) -> str:
    """LoCoMo's normalisation (Maharana et al., ACL 2024, after SQuAD): lowercase, punctuation and the
    articles a/an/the removed, whitespace collapsed, so "The 7th of May," and "7th of may" compare equal."""
    text = _PUNCTUATION.sub(" ", text.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(prediction: str, gold: str) -> float:
    """F1 of the normalised tokens as multisets: the harmonic mean of the share of the answer's tokens
    that are gold's (precision) and the share of gold's tokens the answer holds (recall)."""
    predicted, wanted = normalise_answer(prediction).split(), normalise_answer(gold).split()
    common = sum((Counter(predicted) & Counter(wanted)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(wanted)
    return 2 * precision * recall / (precision + recall)


def holds_gold(prediction: str, gold: str) -> bool:
    """The normalised gold answer occurs in the normalised answer, on word boundaries; a gold answer that
    normalises to nothing is never held (nothing would be measured)."""
    wanted = normalise_answer(gold)
    return bool(wanted) and f" {wanted} " in f" {normalise_answer(prediction)} "


def word_count(text: str) -> int:
    return len(text.split())
