"""Builds the configured embedder."""

from __future__ import annotations

from app.contract.errors import ConfigError
from app.embeddings.protocol import Embedder


def build_embedder(name: str, dimension: int) -> Embedder:
    if name == "wordllama":
        from app.embeddings.wordllama import WordLlamaEmbedder

        return WordLlamaEmbedder(dimension)
    raise ConfigError(f"unknown embedder {name!r}: the one available is wordllama")
