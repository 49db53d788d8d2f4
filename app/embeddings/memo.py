"""An embedder that remembers the vectors it made lately, so a text seen again is not encoded again.

Agents store the same sentence under new meta (another tag, a later ``observed_at``), which is a
new item with the same text; and a client paging a fetch sends its query again with each cursor.
A transformer spends milliseconds on each; a lookup costs microseconds.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable

import numpy as np

from app.embeddings.protocol import Embedder
from app.embeddings.wrapped import WrappedEmbedder

# Vectors kept per kind (stored texts, queries): 10,000 of 384 float32 are ~15 MB.
REMEMBERED = 10_000
Encode = Callable[[list[str]], Awaitable[np.ndarray]]


class Recent:
    """The last ``size`` texts' vectors, least recently used forgotten first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    def get(self, text: str) -> np.ndarray | None:
        vector = self._vectors.get(text)
        if vector is not None:
            self._vectors.move_to_end(text)
        return vector

    def put(self, text: str, vector: np.ndarray) -> None:
        self._vectors[text] = vector
        self._vectors.move_to_end(text)
        while len(self._vectors) > self._size:
            self._vectors.popitem(last=False)


class RememberingEmbedder(WrappedEmbedder):
    """``inner``, asked only for the texts it has not embedded lately (in one call, in order)."""

    def __init__(self, inner: Embedder, size: int = REMEMBERED) -> None:
        super().__init__(inner)
        self._documents = Recent(size)
        self._queries = Recent(size)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self._through(texts, self._documents, self._inner.embed)

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        return await self._through(texts, self._queries, self._inner.embed_queries)

    async def _through(self, texts: list[str], recent: Recent, encode: Encode) -> np.ndarray:
        known = {text: vector for text in texts if (vector := recent.get(text)) is not None}
        missing = list(dict.fromkeys(text for text in texts if text not in known))
        if missing:
            for text, vector in zip(missing, await encode(missing), strict=True):
                # A copy: a row of the encoder's batch would keep the whole batch alive.
                known[text] = vector.copy()
                recent.put(text, known[text])
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        return np.stack([known[text] for text in texts])
