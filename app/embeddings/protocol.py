"""What the engines need of an embedder."""

from __future__ import annotations

from typing import Protocol


class Embedder(Protocol):
    """Turns texts into unit vectors of a fixed dimension."""

    @property
    def name(self) -> str:
        """Stable name of the model; vectors of two names are never compared."""
        ...

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text, in order."""
        ...
