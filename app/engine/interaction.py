"""A ranking's first hits re-scored by late interaction (app/embeddings/late.py): each hit's place
score and its MaxSim score, each scaled over the hits re-scored, combined by a weight.

Scaled, because the two scores live on unrelated scales (a cosine or a fused score; a sum of up to 32
cosines); over the hits re-scored, because that is the set the combination orders. A hit given
no MaxSim score counts its scaled place score for both: it keeps its standing among the others
instead of falling to the end (the engine gives every re-scored hit one: a read makes the token
vectors the writer has not made yet).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.contract.requests import Hit


def scaled(values: Sequence[float]) -> list[float]:
    """Each value between the lowest (0) and the highest (1); all 1 when they are equal."""
    low, high = min(values), max(values)
    if high == low:
        return [1.0] * len(values)
    return [(value - low) / (high - low) for value in values]


def rescored(hits: list[Hit], maxsim: Mapping[str, float], weight: float, depth: int) -> list[Hit]:
    """``hits`` (best first) with the first ``depth`` ordered by ``(1 - weight)`` times their scaled
    score plus ``weight`` times their scaled MaxSim (``maxsim`` by hit id; a hit without one counts
    its scaled score). Each place keeps its score, so scores still fall down the ranking; ties keep
    the first order."""
    head, tail = hits[:depth], hits[depth:]
    if len(head) < 2:
        return hits
    places = scaled([hit.score for hit in head])
    known = [maxsim[hit.id] for hit in head if hit.id in maxsim]
    judged = iter(scaled(known)) if known else iter(())
    late = [next(judged) if hit.id in maxsim else place for hit, place in zip(head, places, strict=True)]
    combined = [(1 - weight) * place + weight * score for place, score in zip(places, late, strict=True)]
    order = sorted(range(len(head)), key=lambda place: (-combined[place], place))
    return [head[place].model_copy(update={"score": head[rank].score}) for rank, place in enumerate(order)] + tail
