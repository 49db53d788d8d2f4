"""Re-scoring a ranking's first hits by late interaction: scaled scores, combined, places kept."""

from __future__ import annotations

from app.contract.requests import Hit
from app.engine.interaction import rescored, scaled


def hit(number: int, score: float) -> Hit:
    return Hit(id=f"id{number}", kind="learning", text=f"text {number}", meta={}, score=score)


def test_scaled_puts_the_lowest_at_zero_and_the_highest_at_one() -> None:
    assert scaled([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert scaled([5.0, 5.0]) == [1.0, 1.0]


def test_the_first_hits_take_the_combined_order_and_every_place_keeps_its_score() -> None:
    hits = [hit(0, 0.9), hit(1, 0.8), hit(2, 0.7), hit(3, 0.1)]
    # MaxSim puts id2 far ahead: at weight 0.7, 0.3 * 0.0 + 0.7 * 1.0 beats id0's 0.3 * 1.0 + 0.7 * 0.0.
    order = rescored(hits, {"id0": 10.0, "id1": 12.0, "id2": 20.0}, weight=0.7, depth=3)
    assert [h.id for h in order] == ["id2", "id0", "id1", "id3"]  # id0 0.30, id1 0.15 + 0.14
    assert [h.score for h in order] == [0.9, 0.8, 0.7, 0.1]  # scores still fall down the ranking
    assert order[3] == hits[3]  # past the depth: untouched


def test_weight_zero_keeps_the_first_order_and_a_hit_without_token_vectors_keeps_its_standing() -> None:
    hits = [hit(0, 0.9), hit(1, 0.5), hit(2, 0.1)]
    assert rescored(hits, {"id0": 1.0, "id1": 9.0, "id2": 5.0}, weight=0.0, depth=3) == hits
    # id0 has no token vectors yet: its place score (1.0) stands in for MaxSim, so it stays first.
    order = rescored(hits, {"id1": 9.0, "id2": 5.0}, weight=0.5, depth=3)
    assert [h.id for h in order] == ["id0", "id1", "id2"]
    assert rescored(hits[:1], {}, weight=0.5, depth=3) == hits[:1]
