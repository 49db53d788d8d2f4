"""The embedder pools WordLlama's vectors itself; they must stay WordLlama's, bit for bit."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest
from safetensors import safe_open
from tokenizers import Tokenizer
from wordllama.inference import WordLlamaInference

from app.embeddings.wordllama import _TOKENIZER, _WEIGHTS, WordLlamaEmbedder
from bench.corpus import build_corpus

# Texts a tokenizer and a pooling can get wrong: nothing, only spaces, a word it may not know,
# one letter, emoji, one very long text beside short ones (WordLlama pads to the longest).
EDGES = ["", "   ", "zzzzqqqxj", "a", "🙂 🙂", "word " * 2_000, "Fix the flaky test in CI.", "\n\t"]


def wordllama_reference(dimension: int) -> WordLlamaInference:
    package = resources.files("wordllama")
    tokenizer = Tokenizer.from_file(str(package / "tokenizers" / _TOKENIZER))
    with safe_open(str(package / "weights" / _WEIGHTS), framework="np", device="cpu") as weights:
        table = weights.get_tensor("embedding.weight")[:, :dimension]
    return WordLlamaInference(table, tokenizer)


@pytest.mark.parametrize("dimension", [64, 128, 256])
def test_the_pooled_vectors_are_wordllamas_own(dimension: int) -> None:
    texts = [item.text for item in build_corpus(300)] + EDGES
    ours = WordLlamaEmbedder(dimension)
    theirs = wordllama_reference(dimension)
    for start in range(0, len(texts), 100):
        batch = texts[start : start + 100]
        expected = np.asarray(theirs.embed(batch, norm=False), dtype=np.float32)
        assert np.array_equal(ours.pooled(batch), expected)


def test_a_text_embeds_the_same_alone_and_in_any_batch() -> None:
    embedder = WordLlamaEmbedder()
    texts = [item.text for item in build_corpus(50)] + EDGES
    together = embedder.embed_sync(texts)
    assert together.dtype == np.float32
    assert np.array_equal(np.stack([embedder.embed_sync([text])[0] for text in texts]), together)
    assert np.array_equal(embedder.embed_sync(texts[::-1]), together[::-1])


def test_vectors_are_unit_length_and_a_text_without_tokens_gets_the_fixed_vector() -> None:
    embedder = WordLlamaEmbedder(128)
    vectors = np.asarray(embedder.embed_sync(["", "Deploy the service behind a proxy.", "   "]))
    assert vectors.shape == (3, 128)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(vectors[0], np.full(128, 1 / np.sqrt(128), dtype=np.float32))
    assert not np.array_equal(vectors[1], vectors[0])
    assert embedder.embed_sync([]).shape == (0, 128)
