"""Builds the configured embedder."""

from __future__ import annotations

from app.contract.errors import ConfigError
from app.embeddings.protocol import Embedder

# The dimensions each embedder gives: WordLlama's matryoshka weights truncate cleanly at these only.
DIMENSIONS: dict[str, tuple[int, ...]] = {"wordllama": (64, 128, 256)}


def build_embedder(name: str, dimension: int) -> Embedder:
    if name == "wordllama":
        from app.embeddings.wordllama import WordLlamaEmbedder

        return WordLlamaEmbedder(dimension)
    raise ConfigError(f"unknown embedder {name!r}: the one available is wordllama")
