"""What the engines need of an embedder."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Embedder(Protocol):
    """Turns texts into unit vectors of a fixed dimension."""

    @property
    def name(self) -> str:
        """Stable name of the model; vectors of two names are never compared."""
        ...

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: list[str]) -> np.ndarray:
        """One unit vector per text, in order: a float32 array of ``len(texts)`` rows.

        An array, not lists of floats: a batch goes to PostgreSQL in binary from it
        (app/engine/postgres/vectors.py), and 25,600 Python floats made and read back
        cost ~0.6 ms of a 100-item store (twentieth session)."""
        ...
