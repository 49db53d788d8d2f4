"""The bundled sentence transformers: offline, verified, unit vectors that read a sentence."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import numpy as np
import pytest

from app.contract.errors import ConfigError
from app.embeddings.onnx import BUNDLED, BUNDLED_DIMENSION, SUB_BATCH, OnnxEmbedder, bundled_weights, verified
from app.embeddings.prefixes import prefixes_for


@pytest.fixture(scope="module", params=sorted(BUNDLED))
def minilm(request: pytest.FixtureRequest) -> OnnxEmbedder:
    """Each bundled model in turn (the name is the default's history: every test holds for each)."""
    return OnnxEmbedder(request.param)


def test_a_weights_file_whose_digest_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    weights = tmp_path / "model.onnx"
    weights.write_bytes(b"the weights as published")
    pinned = hashlib.sha256(b"the weights as published").hexdigest()
    assert verified(weights, pinned) == weights
    weights.write_bytes(b"the weights as published, changed by one upload")
    with pytest.raises(ConfigError, match="sha256 differs"):
        verified(weights, pinned)
    for model in BUNDLED:
        assert bundled_weights(model).is_file()


def test_the_default_is_bge_small_and_each_bundled_model_keeps_its_name_beside_its_vectors() -> None:
    assert OnnxEmbedder().name == "bge-small-en-v1.5"
    assert OnnxEmbedder("all-minilm-l6-v2").name == "all-minilm-l6-v2"


async def test_vectors_are_unit_length_in_order_and_the_same_alone_or_in_a_batch(minilm: OnnxEmbedder) -> None:
    texts = ["I moved to Lisbon in March 2024.", "Deploys happen on Thursdays only.", "word " * 600, "🙂"]
    together = await minilm.embed(texts)
    assert together.shape == (4, BUNDLED_DIMENSION) and minilm.dimension == BUNDLED_DIMENSION
    assert together.dtype == np.float32
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    for text, row in zip(texts, together, strict=True):
        (alone,) = await minilm.embed([text])
        assert np.allclose(alone, row, atol=1e-4)  # padding to a batch's longest changes nothing real
    assert (await minilm.embed([])).shape == (0, minilm.dimension)


def test_length_sorted_runs_give_each_text_the_vector_one_padded_run_gives_in_the_callers_order(
    minilm: OnnxEmbedder,
) -> None:
    """``encode`` runs the texts shortest first in runs of SUB_BATCH and puts the rows back: the same
    vectors (within 1e-4) in the same order as one model run over the whole batch, as before."""
    words = ["deploy", "the", "billing", "service", "after", "the", "migration", "passes", "review", "on", "friday"]
    texts = [" ".join(words[: 1 + (i * 7) % len(words)]) * (1 + i % 4) for i in range(3 * SUB_BATCH + 5)]
    assert len({len(t) for t in texts}) > SUB_BATCH  # lengths that the sort must reorder
    if BUNDLED.get(minilm.name) and BUNDLED[minilm.name].runs_alone:
        one_run = np.stack([next(iter(minilm._model.embed([text]))) for text in texts])
    else:
        one_run = np.stack(list(minilm._model.embed(texts, batch_size=len(texts))))
    sorted_runs = minilm.encode(texts)
    assert sorted_runs.shape == one_run.shape and sorted_runs.dtype == np.float32
    assert np.abs(sorted_runs - one_run).max() < 1e-4
    for position in (0, 1, len(texts) // 2, len(texts) - 1):
        assert np.abs(minilm.encode([texts[position]])[0] - sorted_runs[position]).max() < 1e-4


async def test_it_reads_the_meaning_of_a_question(minilm: OnnxEmbedder) -> None:
    (question,) = await minilm.embed_queries(["Where does the user live now?"])
    moved, deploys = await minilm.embed(["I moved to Lisbon in March 2024", "Remember: deploys happen on Thursdays"])
    assert question @ moved > question @ deploys + 0.05


def test_retrieval_models_get_their_instruction_prefixes() -> None:
    assert prefixes_for("BAAI/bge-small-en-v1.5")[0].startswith("Represent this sentence")
    assert prefixes_for("intfloat/multilingual-e5-small") == ("query: ", "passage: ")
    assert prefixes_for("sentence-transformers/all-MiniLM-L6-v2") == ("", "")


async def test_a_bundled_model_encodes_queries_on_its_one_single_threaded_session(minilm: OnnxEmbedder) -> None:
    """A query runs on the stored texts' session, of one thread: no thread of its own spins on the cores
    PostgreSQL then searches on (they did, and slowed the search); the vector is the one the same
    prefixed text gets as a stored text."""
    question = "Where does the user live now?"
    (from_query,) = await minilm.embed_queries([question])
    (as_stored,) = minilm.encode([question], minilm._query_prefix)
    assert np.array_equal(from_query, as_stored)
    assert minilm._query_model is minilm._model
    assert minilm._model.model.model.get_session_options().intra_op_num_threads == 1


def test_stored_texts_run_in_lanes_at_once_on_a_single_threaded_session_with_the_vectors_of_one_lane() -> None:
    """A batch's model runs are tasks for ``threads`` lanes, which run them at the same time (a lane
    that ran alone would leave the barrier waiting), on a session of one thread; the vectors, in
    the caller's order, are the ones a single lane makes."""
    words = ["deploy", "the", "billing", "service", "after", "the", "migration", "passes", "review"]
    texts = [" ".join(words[: 1 + (i * 5) % len(words)]) * (1 + i % 3) for i in range(2 * SUB_BATCH + 3)]
    one_lane = OnnxEmbedder("all-minilm-l6-v2", threads=1).encode(texts)
    lanes = OnnxEmbedder("all-minilm-l6-v2", threads=2)
    assert lanes._model.model.model.get_session_options().intra_op_num_threads == 1
    both_running = threading.Barrier(2, timeout=10)
    runner = lanes._model.model
    run_alone = runner.onnx_embed
    met: set[int] = set()

    def meeting_the_other_lane(documents: list[str], **kwargs: object) -> object:
        if threading.get_ident() not in met:
            met.add(threading.get_ident())
            both_running.wait()  # BrokenBarrierError unless the other lane is running at the same time
        return run_alone(documents, **kwargs)

    runner.onnx_embed = meeting_the_other_lane
    try:
        in_lanes = lanes.encode(texts)
    finally:
        del runner.onnx_embed
    assert len(met) == 2
    assert np.array_equal(in_lanes, one_lane)
