"""Text embedders: the protocol and its providers."""

from app.embeddings.protocol import Embedder

__all__ = ["Embedder"]
