"""Score fusion, the two rankings of a hybrid fetch run at once, the ranking's statistics cache."""

from __future__ import annotations

import random

import pytest

from app.engine.fusion import FUSION_DEPTH, VECTOR_WEIGHT, fuse, fusion_depth


def test_fusion_combines_the_keyword_score_over_the_best_with_the_scaled_cosine() -> None:
    seq = {"a": 3, "b": 1, "c": 2, "d": 4}
    keyword = [("a", 8.0), ("b", 4.0)]
    vector = [("c", 0.9), ("a", 0.5), ("d", 0.4), ("b", 0.2)]
    fused = dict(fuse(keyword, vector, seq, weight=0.5))
    # The cosines scaled between the last (0.2 -> 0) and the best (0.9 -> 1).
    assert fused["a"] == pytest.approx(0.5 * 1.0 + 0.5 * 0.3 / 0.7)
    assert fused["b"] == pytest.approx(0.5 * 0.5 + 0.5 * 0.0)
    # Not a keyword match: nothing from that half.
    assert fused["c"] == pytest.approx(0.5 * 1.0)
    assert fused["d"] == pytest.approx(0.5 * 0.2 / 0.7)
    assert [key for key, _ in fuse(keyword, vector, seq, weight=0.5)] == ["a", "c", "b", "d"]
    # Only where a score stands between the ranking's ends counts, not the scale of the scores:
    # an encoder whose cosines crowd into a narrow range weighs as much as one that spreads them.
    doubled = [(key, score * 2) for key, score in keyword]
    crowded = [(key, 0.8 + score / 10) for key, score in vector]
    assert dict(fuse(doubled, crowded, seq, weight=0.5)) == pytest.approx(fused)
    assert fuse([], [], seq) == []
    assert fuse([], [("a", 0.3)], seq) == [("a", 0.5)]  # one score is its ranking's best


def test_a_key_the_vector_ranking_does_not_hold_that_high_takes_nothing_from_it() -> None:
    seq = {f"k{i}": i for i in range(6)}
    vector = [(f"k{i}", 1.0 - i / 10) for i in range(5)]
    fused = dict(fuse([("k5", 1.0)], vector, seq, weight=0.5, depth=3))
    assert fused["k5"] == pytest.approx(0.5 * 1.0)  # as low as the third vector score, scaled to 0
    assert fused["k2"] == pytest.approx(0.0) and fused["k0"] == pytest.approx(0.5)


def test_ties_go_to_the_key_stored_first() -> None:
    seq = {"b": 1, "d": 4}
    assert [key for key, _ in fuse([], [("d", 0.5), ("b", 0.5)], seq)] == ["b", "d"]


def test_the_weights_are_those_documented() -> None:
    seq = {"a": 1, "b": 2}
    fused = dict(fuse([("a", 2.0)], [("b", 0.6), ("c", 0.4), ("a", 0.2)], seq | {"c": 3}))
    assert VECTOR_WEIGHT == 0.5  # docs/tuning.md#hybrid-weight
    assert fused["a"] == pytest.approx((1 - VECTOR_WEIGHT) * 1.0)
    assert fused["b"] == pytest.approx(VECTOR_WEIGHT * 1.0)
    assert fused["c"] == pytest.approx(VECTOR_WEIGHT * 0.5)


def test_a_page_is_cut_from_one_order_whatever_its_depth() -> None:
    """Pages read the rankings to different depths (fusion_depth) and must cut one order: the
    fused keys first (a rank within FUSION_DEPTH), then the others by their best rank. Fused at
    each page's own depth, a key deeper in both rankings moved up once a deeper cut saw it in both,
    and cursors repeated and skipped hits."""
    chance = random.Random(7)
    keys = [f"k{i}" for i in range(400)]
    seq = {key: i for i, key in enumerate(keys)}
    for _ in range(20):
        # Every admitted item in the vector ranking, the items holding a term in the keyword one.
        vector = sorted(((key, chance.uniform(-0.2, 0.9)) for key in keys), key=lambda s: (-s[1], seq[s[0]]))
        matching = chance.sample(keys, chance.randrange(0, 300))
        keyword = sorted(((key, chance.uniform(0.1, 12)) for key in matching), key=lambda s: (-s[1], seq[s[0]]))
        whole = fuse(keyword, vector, seq)
        assert sorted(key for key, _ in whole) == sorted(keys)
        scores = [score for _, score in whole]
        assert scores == sorted(scores, reverse=True)
        for end in (1, 11, 49, 50, 51, 77, 150, 399):
            depth = fusion_depth(end)
            page = fuse(keyword[:depth], vector[:depth], seq)[:end]
            assert page == whole[:end]


def test_a_key_past_the_depth_scores_the_same_whatever_precision_the_deeper_read_found() -> None:
    # A page ending past the depth reads both rankings deeper, and a deeper vector read may come from
    # the exact scan (full precision) where the shallower came from the index (half precision): the
    # same order, cosines a few millionths apart. A key past the depth must keep its score.
    seq = {f"k{i}": i for i in range(120)}
    vector = [(f"k{i}", 0.9 - i / 200) for i in range(120)]
    exact = [(key, score + 3e-6 * (n % 3)) for n, (key, score) in enumerate(vector)]
    # The vector ranking's first 50 in the keyword one too, the lowest fused of them (k40) inside it.
    weights = {"k49": 10.0, "k40": 1.0}
    keyword = sorted(((f"k{i}", weights.get(f"k{i}", 5.0)) for i in range(50)), key=lambda s: (-s[1], seq[s[0]]))
    shallow = dict(fuse(keyword[:84], vector[:84], seq))
    deep = dict(fuse(keyword[:91], exact[:91], seq))
    past = [key for key in shallow if shallow[key] < 0]
    assert past and all(deep[key] == shallow[key] for key in past)


def test_keys_past_the_depth_in_both_follow_by_their_best_rank_below_every_fused_one() -> None:
    seq = {f"k{i}": i for i in range(200)}
    deep = [(f"k{i}", 1.0 - i / 400) for i in range(200)]
    shallow = [(key, 10.0 - n / 100) for n, (key, _) in enumerate(reversed(deep))]
    fused = fuse(shallow, deep, seq)
    scores = dict(fused)
    # k0 is first in the vector ranking and 200th in the keyword one: only its vector score counts.
    assert scores["k0"] == pytest.approx(VECTOR_WEIGHT * 1.0)
    # k100 is 101st and 100th: past the depth in both, it follows the fused keys.
    lowest_fused = min(scores[key] for key, _ in deep[:FUSION_DEPTH] + shallow[:FUSION_DEPTH])
    assert scores["k100"] < lowest_fused
    assert [key for key, _ in fused].index("k100") >= 2 * FUSION_DEPTH
    assert fusion_depth(11) == FUSION_DEPTH and fusion_depth(FUSION_DEPTH + 1) == FUSION_DEPTH + 1
