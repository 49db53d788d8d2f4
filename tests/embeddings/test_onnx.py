"""The bundled sentence transformers: offline, verified, unit vectors that read a sentence."""

from __future__ import annotations

import hashlib
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


async def test_queries_run_on_a_session_whose_threads_sleep_and_get_the_same_vectors(minilm: OnnxEmbedder) -> None:
    """Spinning threads after a query's run held the cores PostgreSQL searched on; a query's vector is
    the one the stored-text session would make for the same prefixed text."""
    question = "Where does the user live now?"
    (from_query_session,) = await minilm.embed_queries([question])
    (from_document_session,) = minilm.encode([question], minilm._query_prefix)
    assert np.abs(from_query_session - from_document_session).max() < 1e-5
    options = minilm._query_model.model.model.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert minilm._model.model.model is not minilm._query_model.model.model
