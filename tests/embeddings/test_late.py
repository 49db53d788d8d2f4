"""Late interaction: token vectors that read a sentence word by word, scored by MaxSim."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

from app.embeddings.late import (
    COLBERT_SMALL,
    LEVELS,
    LOWEST_PRIORITY,
    LateInteraction,
    maxsim,
    packed,
    stored_maxsim,
    unpacked,
)


@pytest.fixture(scope="module")
def late() -> LateInteraction:
    return LateInteraction(threads=2)


def test_an_item_is_a_unit_vector_per_word_piece_without_its_punctuation(late: LateInteraction) -> None:
    (plain, marked) = late.items(["I moved to Lisbon in March", "I moved to Lisbon, in March!"])
    assert plain.dtype == marked.dtype == np.float32
    assert plain.shape == (2 + 6 + 1, COLBERT_SMALL.dimension)  # [CLS] [D], six words, [SEP]
    assert marked.shape == plain.shape  # the comma and the "!" are left out
    assert np.allclose(np.linalg.norm(plain.astype(np.float32), axis=1), 1.0, atol=1e-5)


def test_a_long_item_keeps_its_first_pieces_and_never_fails(late: LateInteraction) -> None:
    (long,) = late.items(["word " * 1_000])
    assert long.shape == (COLBERT_SMALL.item_tokens, COLBERT_SMALL.dimension)
    assert late.items([]) == []


def test_an_items_vectors_are_the_same_alone_or_beside_others(late: LateInteraction) -> None:
    texts = ["Deploys happen on Thursdays only.", "🙂", "The billing service moved to the new cluster last week."]
    together = late.items(texts)
    for text, vectors in zip(texts, together, strict=True):
        (alone,) = late.items([text])
        assert np.array_equal(alone, vectors)


def test_a_question_has_a_vector_a_position_up_to_its_limit_and_no_padding(late: LateInteraction) -> None:
    short, long = late.question("Where does the user live?"), late.question("where " * 100)
    assert short.shape == (2 + 6 + 1, COLBERT_SMALL.dimension)  # [CLS] [Q], six word pieces, [SEP]
    assert long.shape == (COLBERT_SMALL.question_tokens, COLBERT_SMALL.dimension)
    assert short.dtype == np.float32
    assert np.allclose(np.linalg.norm(short, axis=1), 1.0, atol=2e-3)  # float16 precision


def test_a_question_asked_again_is_remembered_and_scores_alike(late: LateInteraction) -> None:
    text = "Which city did the user move to?"
    assert late.remembered(text) is None  # never asked: made by the model, not remembered
    first = late.question(text)
    assert np.array_equal(first, first.astype(np.float16).astype(np.float32))  # made now, as remembered
    remembered = late.remembered(text)
    assert remembered is not None and np.array_equal(remembered, first)
    assert np.array_equal(late.question(text), first)


def test_maxsim_ranks_the_item_that_answers_the_question_first(late: LateInteraction) -> None:
    question = late.question("Where does the user live now?")
    items = late.items(["Remember: deploys happen on Thursdays", "I moved to Lisbon in March 2024", "ok"])
    scores = maxsim(question, items)
    assert scores.shape == (3,) and scores.dtype == np.float32
    assert int(np.argmax(scores)) == 1
    by_hand = [float((question @ item.astype(np.float32).T).max(axis=1).sum()) for item in items]
    assert np.allclose(scores, by_hand, rtol=1e-5)
    assert maxsim(question, []).shape == (0,)


def test_stored_token_vectors_are_four_bits_a_component_and_come_back_within_half_a_step(
    late: LateInteraction,
) -> None:
    (vectors,) = late.items(["Thread context travels with the turn."])
    blob = packed(vectors)
    rows, dimension = vectors.shape
    assert len(blob) == rows * (dimension // 2 + 4)  # two components a byte and a float32 scale a row
    back = unpacked(blob, dimension)
    assert back.shape == vectors.shape and back.dtype == np.float32
    steps = np.abs(vectors).max(axis=1, keepdims=True) / LEVELS
    assert np.all(np.abs(back - vectors) <= steps / 2 + 1e-7)  # each component within half a step
    assert np.allclose(unpacked(packed(back), dimension), back, rtol=1e-6)  # stored again, unchanged


def test_an_odd_dimension_is_padded_to_a_whole_byte_and_read_back() -> None:
    rng = np.random.default_rng(7)
    items = [rng.standard_normal((count, 13)).astype(np.float32) for count in (2, 5)]
    question = rng.standard_normal((3, 13)).astype(np.float32)
    blobs = [packed(item) for item in items]
    assert [len(blob) for blob in blobs] == [2 * (4 + 7), 5 * (4 + 7)]
    stored = [unpacked(blob, 13) for blob in blobs]
    for back, item in zip(stored, items, strict=True):
        assert np.all(np.abs(back - item) <= np.abs(item).max(axis=1, keepdims=True) / LEVELS / 2 + 1e-6)
    assert np.allclose(stored_maxsim(question, blobs, 13), maxsim(question, stored), rtol=1e-5)


def test_maxsim_over_stored_vectors_keeps_the_order_of_the_exact_ones(late: LateInteraction) -> None:
    question = late.question("Which city did the user move to, and when?")
    texts = ["I moved to Lisbon in March 2024", "We moved the meeting to March", "Lisbon has trams", "ok then"]
    exact = late.items(texts)
    stored = [unpacked(packed(item), late.dimension) for item in exact]
    # The order; the scores move by up to a tenth (a component under half a step is stored as 0).
    assert np.array_equal(np.argsort(-maxsim(question, exact)), np.argsort(-maxsim(question, stored)))


def test_maxsim_scores_stored_vectors_as_they_are_packed_as_it_scores_them_unpacked(late: LateInteraction) -> None:
    question = late.question("Which city did the user move to, and when?")
    texts = ["I moved to Lisbon in March 2024", "We moved the meeting to March", "Lisbon has trams", "ok then"]
    blobs = [packed(item) for item in late.items(texts)]
    unpacked_scores = maxsim(question, [unpacked(blob, late.dimension) for blob in blobs])
    scores = stored_maxsim(question, blobs, late.dimension)
    assert scores.dtype == np.float32 and np.allclose(scores, unpacked_scores, rtol=1e-5)
    assert np.array_equal(np.argsort(-scores), np.argsort(-unpacked_scores))
    assert stored_maxsim(question, [blobs[2]], late.dimension) == pytest.approx(unpacked_scores[2], rel=1e-5)
    assert stored_maxsim(question, [], late.dimension).shape == (0,)


def test_the_writers_texts_are_encoded_at_the_lowest_cpu_priority_and_a_reads_are_not(late: LateInteraction) -> None:
    def priority() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    assert sys.platform == "linux"  # where the service runs in CI and in its image
    own = priority()
    assert {late._lanes.submit(priority).result() for _ in range(4)} == {LOWEST_PRIORITY}
    late.question("Where does the user live?")  # on the caller's thread, untouched
    assert priority() == own < LOWEST_PRIORITY
    assert late._waited_for.submit(priority).result() == own  # what a read waits for: the usual priority
    assert np.array_equal(late.items(["Lisbon"], waited_for=True)[0], late.items(["Lisbon"])[0])
