"""An embedder around another: it answers to the inner one's name and dimension and closes it.

The memo (memo.py) and the measurement (measured.py) each change how texts reach the encoder and
nothing else, so what they pass through is written once here.
"""

from __future__ import annotations

from app.embeddings.protocol import Embedder


class WrappedEmbedder:
    def __init__(self, inner: Embedder) -> None:
        self._inner = inner

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    @property
    def inner(self) -> Embedder:
        return self._inner

    async def aclose(self) -> None:
        await self._inner.aclose()
