"""The remembering embedder: a text seen lately is not encoded again, and its vector is the same."""

from __future__ import annotations

import numpy as np

from app.embeddings.memo import RememberingEmbedder
from app.embeddings.wordllama import WordLlamaEmbedder


class Recording(WordLlamaEmbedder):
    """WordLlama, recording what it was asked to encode."""

    def __init__(self) -> None:
        super().__init__(64)
        self.asked: list[list[str]] = []

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.asked.append(list(texts))
        return await super().embed(texts)


async def test_only_the_texts_not_seen_lately_are_encoded_in_one_call_and_the_vectors_are_the_same() -> None:
    inner = Recording()
    memo = RememberingEmbedder(inner, size=3)
    first = await memo.embed(["a fact", "another fact", "a fact"])
    assert inner.asked == [["a fact", "another fact"]]
    again = await memo.embed(["another fact", "a third", "a fact"])
    assert inner.asked[1:] == [["a third"]]
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[2], first[0])
    assert np.array_equal(again, await inner.embed(["another fact", "a third", "a fact"]))
    assert again.dtype == np.float32 and (await memo.embed([])).shape == (0, 64)


async def test_the_least_recently_used_is_forgotten_and_queries_are_kept_apart() -> None:
    inner = Recording()
    memo = RememberingEmbedder(inner, size=2)
    await memo.embed(["one", "two"])
    await memo.embed(["one"])  # "two" is now the least recently used
    await memo.embed(["three"])
    inner.asked.clear()
    await memo.embed(["one", "two"])
    assert inner.asked == [["two"]]
    await memo.embed_queries(["one"])  # a query is encoded as a query, whatever the documents held
    assert memo.name == inner.name and memo.dimension == 64
