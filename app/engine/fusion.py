"""Reciprocal rank fusion: the ``hybrid`` ranking (contract §5) from a keyword and a vector ranking."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

RRF_K = 60
# How deep each ranking counts in the fusion. A fixed depth, not the page's end: fused at each
# page's own depth, an item deeper in both rankings gained once a deeper cut saw it in both, so the
# order changed from page to page and cursors repeated and skipped hits. 50 keeps a filtered vector
# ranking's re-ranked candidates at their minimum (statements.sketch_candidates).
FUSION_DEPTH = 50
Key = TypeVar("Key", bound=Hashable)


def fusion_depth(end: int) -> int:
    """How deep to read each ranking for a hybrid page ending at ``end``."""
    return max(FUSION_DEPTH, end)


def fuse(
    rankings: Iterable[Sequence[Key]], seq: Mapping[Key, int], k: int = RRF_K, depth: int = FUSION_DEPTH
) -> list[tuple[Key, float]]:
    """Each key with the sum of ``1 / (k + rank)`` over the rankings that hold it within ``depth``,
    best first; then the keys no ranking holds that high, each scored by its best rank.

    The order of the first ``n`` keys is the same whatever the rankings' length beyond ``n`` and
    ``depth`` (each key after the fused ones has a rank at most its position, so all are read), and
    scores never rise: a fused key has a rank within ``depth``, a later one none. Ties go to the key
    stored first (lower ``seq``), as in every other ranking.
    """
    scores: dict[Key, float] = {}
    best: dict[Key, int] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            if rank <= depth:
                scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
            elif rank < best.get(key, rank + 1):
                best[key] = rank
    fused = sorted(scores.items(), key=lambda scored: (-scored[1], seq[scored[0]]))
    rest = sorted(((key, rank) for key, rank in best.items() if key not in scores), key=lambda r: (r[1], seq[r[0]]))
    return fused + [(key, 1.0 / (k + rank)) for key, rank in rest]
