"""The ``hybrid`` ranking (contract §5): a convex combination of the keyword and vector scores.

Score fusion, not rank fusion: each item scores ``(1 - VECTOR_WEIGHT) * keyword + VECTOR_WEIGHT *
vector``, each half scaled to 0..1 over its ranking's first ``FUSION_DEPTH``: ``keyword`` is the
item's keyword score over the query's best (how close it comes to the best match), ``vector`` its
cosine's place between the cosine at that depth (0) and the best (1). Ranks throw away how far
apart two items are, so reciprocal rank fusion let the weaker ranking drag the stronger down;
scaled scores keep it (Bruch et al., "An Analysis of Fusion Functions for Hybrid Retrieval", ACM
TOIS 2023: a convex combination of normalised scores beat RRF on every data set). Scaling the
cosines too makes the weight hold across encoders, whose cosines spread over ranges of their own.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

# The vector score's share, chosen on the long-conversation dev split (docs/tuning.md#hybrid-weight).
VECTOR_WEIGHT = 0.5
# How deep each ranking counts in the fusion. A fixed depth, not the page's end: fused at each
# page's own depth, an item deeper in both rankings gained once a deeper cut saw it in both, so the
# order changed from page to page and cursors repeated and skipped hits. 50 keeps a filtered vector
# ranking's re-ranked candidates at their minimum (queries.vector.sketch_candidates).
FUSION_DEPTH = 50
Key = TypeVar("Key", bound=Hashable)
Scored = Sequence[tuple[Key, float]]


def fusion_depth(end: int) -> int:
    """How deep to read each ranking for a hybrid page ending at ``end``."""
    return max(FUSION_DEPTH, end)


def fuse(
    keyword: Scored[Key],
    vector: Scored[Key],
    seq: Mapping[Key, int],
    *,
    weight: float = VECTOR_WEIGHT,
    depth: int = FUSION_DEPTH,
) -> list[tuple[Key, float]]:
    """The keys of both rankings (each best first, with its scores), best first.

    An item either ranking holds within ``depth`` is fused: an item the keyword ranking does not
    hold that high takes 0 from it (it matched less, or not at all), one the vector ranking does
    not hold that high takes 0 too (the cosine at ``depth``, its own being no higher). The keys past
    ``depth`` in both follow by their best rank, scored by that rank alone, below 0 and so below every
    fused key: a key's score is the same on every page, whatever the rankings read past ``depth``
    (a deeper read may find the same cosines at another precision, queries.vector.nearest_sql). So
    the first ``n`` keys are the same however far past ``depth`` the rankings were read, and scores
    never rise. Ties go to the key stored first (lower ``seq``), as in every other ranking.
    """
    top_keyword, top_vector = keyword[:depth], vector[:depth]
    best_keyword = max((score for _, score in top_keyword), default=0.0)
    keyword_part = {key: score / best_keyword for key, score in top_keyword} if best_keyword > 0 else {}
    vector_part = _scaled(top_vector)
    fused = {
        key: (1 - weight) * keyword_part.get(key, 0.0) + weight * vector_part.get(key, 0.0)
        for key in (*dict(top_keyword), *vector_part)
    }
    ranked = sorted(fused.items(), key=lambda scored: (-scored[1], seq[scored[0]]))
    best_rank: dict[Key, int] = {}
    for ranking in (keyword, vector):
        for rank, (key, _) in enumerate(ranking[depth:], start=depth + 1):
            if key not in fused and rank < best_rank.get(key, rank + 1):
                best_rank[key] = rank
    rest = sorted(best_rank.items(), key=lambda ranked_key: (ranked_key[1], seq[ranked_key[0]]))
    # Between -1 and 0, falling with the rank: a fused score is at least 0 (both halves are).
    return ranked + [(key, depth / rank - 1) for key, rank in rest]


def _scaled(ranking: Scored[Key]) -> dict[Key, float]:
    """Each score's place between the ranking's last (0) and its first (1); all 1 when they are equal."""
    if not ranking:
        return {}
    best, floor = ranking[0][1], ranking[-1][1]
    spread = best - floor
    return {key: (score - floor) / spread if spread > 0 else 1.0 for key, score in ranking}
