"""What the engines need of an embedder."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Embedder(Protocol):
    """Turns texts into unit vectors of a fixed dimension.

    Documents and queries are two calls: retrieval models such as bge or e5 expect each with
    its own instruction prefix, and a query embedded as a document ranks worse.
    """

    @property
    def name(self) -> str:
        """Stable name of the model; vectors of two names are never compared."""
        ...

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: list[str]) -> np.ndarray:
        """One unit vector per stored text, in order: a float32 array of ``len(texts)`` rows.

        An array, not lists of floats: a batch goes to PostgreSQL in binary from it
        (app/engine/postgres/vectors.py)."""
        ...

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        """As ``embed``, for search queries."""
        ...

    async def aclose(self) -> None:
        """Release what the embedder holds open (an endpoint's connections); called once, on shutdown,
        by the engine that owns it. Nothing to do for an in-process model."""
        ...
