"""The embedders a deployment chooses from (ENGRAM_EMBEDDER), and how each is built."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.contract.errors import ConfigError
from app.embeddings.measured import MeasuredEmbedder
from app.embeddings.memo import RememberingEmbedder
from app.embeddings.onnx import BUNDLED_MODEL
from app.embeddings.protocol import Embedder
from app.embeddings.wordllama import DIMENSIONS as WORDLLAMA_DIMENSIONS

if TYPE_CHECKING:
    from app.settings import Settings


@dataclass(frozen=True)
class Choice:
    """What settings must say for an embedder: the dimensions it can give (None: whatever its model gives)."""

    dimensions: tuple[int, ...] | None
    default_dimension: int | None
    needs_model: bool = False
    needs_url: bool = False


EMBEDDERS: dict[str, Choice] = {
    "bge-small": Choice(dimensions=(384,), default_dimension=384),
    "minilm": Choice(dimensions=(384,), default_dimension=384),
    "wordllama": Choice(dimensions=WORDLLAMA_DIMENSIONS, default_dimension=max(WORDLLAMA_DIMENSIONS)),
    "fastembed": Choice(dimensions=None, default_dimension=None, needs_model=True),
    "openai": Choice(dimensions=None, default_dimension=None, needs_model=True, needs_url=True),
}

# The embedders whose weights install with the service, by their ENGRAM_EMBEDDER name.
_BUNDLED_BY_CHOICE = {"bge-small": BUNDLED_MODEL, "minilm": "all-minilm-l6-v2"}


def build_embedder(settings: Settings) -> Embedder:
    """The configured embedder, loaded; a model that gives another dimension than configured is refused."""
    embedder: Embedder
    if settings.embedder == "wordllama":
        from app.embeddings.wordllama import WordLlamaEmbedder

        embedder = WordLlamaEmbedder(settings.embedding_dim) if settings.embedding_dim else WordLlamaEmbedder()
    elif settings.embedder in ("minilm", "bge-small", "fastembed"):
        from app.embeddings.onnx import OnnxEmbedder

        embedder = OnnxEmbedder(
            _BUNDLED_BY_CHOICE.get(settings.embedder, str(settings.embedding_model)),
            threads=settings.embedding_threads,
            cache_dir=settings.data_dir / "models",
            query_prefix=settings.embedding_query_prefix,
            document_prefix=settings.embedding_document_prefix,
        )
    elif settings.embedder == "openai":
        from app.embeddings.openai import OpenAIEmbedder

        embedder = OpenAIEmbedder.from_settings(settings)
    else:
        raise ConfigError(f"unknown embedder {settings.embedder!r}: one of {', '.join(EMBEDDERS)}")
    if settings.embedding_dim is not None and embedder.dimension != settings.embedding_dim:
        given = f"{embedder.name} gives {embedder.dimension}"
        raise ConfigError(f"ENGRAM_EMBEDDING_DIM is {settings.embedding_dim} but {given} dimensions")
    return RememberingEmbedder(MeasuredEmbedder(embedder))
