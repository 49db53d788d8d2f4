"""An embedder whose encoder calls are counted and timed (engram_embedder_* in docs/operations.md).

It sits under the memo (memo.py), so what it measures is the encoder's own work: a vector
remembered from lately costs microseconds and is not a call.
"""

from __future__ import annotations

import numpy as np

from app.embeddings.wrapped import WrappedEmbedder
from app.telemetry.metrics import encoder_call


class MeasuredEmbedder(WrappedEmbedder):
    """``inner``, each ``embed`` counted as documents and each ``embed_queries`` as queries."""

    async def embed(self, texts: list[str]) -> np.ndarray:
        with encoder_call("documents", len(texts)):
            return await self._inner.embed(texts)

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        with encoder_call("queries", len(texts)):
            return await self._inner.embed_queries(texts)
