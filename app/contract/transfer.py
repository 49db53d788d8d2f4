"""Export and import: a store as NDJSON, one item a line, and a trailer that proves the file whole.

A line is ``{"id", "item", "vector"?, "embedder"?}``: the item as it was stored (what ``store``
took, canonical), its id (the fingerprint, checked again on import), and with
``include_vectors`` the vector and the id of the model that made it. The last line is
``{"trailer": {"count", "sha256"}}``: how many item lines came before it and the SHA-256 of
their bytes, newlines included, so a cut-off or edited dump is detected.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import orjson
from pydantic import Field, ValidationError

from app.contract.errors import EngramError, InvalidRequest, quoted
from app.contract.items import ITEM_ADAPTER, StoredItem
from app.contract.limits import DEFAULT_LIMITS, Limits
from app.contract.meta import Closed, Filter
from app.contract.requests import Answer
from app.embeddings.protocol import Embedder

NDJSON = "application/x-ndjson"


@dataclass(frozen=True, slots=True)
class ExportRow:
    seq: int
    id: str
    item: dict[str, Any]
    vector: list[float] | None = None


@dataclass(frozen=True, slots=True)
class ExportPage:
    """Items in the order they were stored, up to ``ceiling`` (the last item when the export began),
    with the vectors of ``embedder`` when they were asked for."""

    rows: list[ExportRow]
    ceiling: int
    embedder: str


class ExportRequest(Closed):
    """What to export: the items ``filter`` admits (every item by default), with vectors or not."""

    filter: Filter = Field(default_factory=Filter)
    include_vectors: bool = False

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> ExportRequest:
        return self.model_copy(update={"filter": self.filter.checked(limits)})


def item_line(item_id: str, item: dict[str, Any], vector: list[float] | None, embedder: str | None) -> bytes:
    """One exported item as its NDJSON line (newline included)."""
    line: dict[str, Any] = {"id": item_id, "item": item}
    if vector is not None:
        line["vector"] = vector
        line["embedder"] = embedder
    return orjson.dumps(line) + b"\n"


GivenVector = tuple[str, list[float]]
"""A vector that came with an imported item: the id of the model that made it, and its values."""


def kept_vectors(vectors: list[GivenVector | None], embedder: Embedder) -> dict[int, np.ndarray]:
    """The given vectors an engine keeps, by position: those ``embedder`` made (same model, same
    dimension); the others' items are embedded again."""
    return {
        position: np.asarray(vector[1], dtype=np.float32)
        for position, vector in enumerate(vectors)
        if vector is not None and vector[0] == embedder.name and len(vector[1]) == embedder.dimension
    }


class Checksum:
    """The running count and SHA-256 of item lines, as the trailer states them."""

    def __init__(self) -> None:
        self.count = 0
        self._digest = hashlib.sha256()

    def add(self, line: bytes) -> None:
        self.count += 1
        self._digest.update(line)

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    def trailer(self) -> bytes:
        return orjson.dumps({"trailer": {"count": self.count, "sha256": self.sha256}}) + b"\n"


class ImportedLine:
    """An item line read back: the checked item, and its vector when one came with it."""

    __slots__ = ("embedder", "item", "vector")

    def __init__(self, item: StoredItem, vector: list[float] | None, embedder: str | None) -> None:
        self.item = item
        self.vector = vector
        self.embedder = embedder


class TrailerLine:
    __slots__ = ("count", "sha256")

    def __init__(self, count: int, sha256: str) -> None:
        self.count = count
        self.sha256 = sha256


def read_line(raw: bytes, limits: Limits = DEFAULT_LIMITS) -> ImportedLine | TrailerLine:
    """One NDJSON line as an item or the trailer; ``invalid_request`` saying what is wrong with it."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InvalidRequest("the line is not valid json") from None
    if not isinstance(data, dict):
        raise InvalidRequest("a line must be a json object")
    if "trailer" in data:
        trailer = data["trailer"]
        if (
            set(data) != {"trailer"}
            or not isinstance(trailer, dict)
            or not isinstance(trailer.get("count"), int)
            or not isinstance(trailer.get("sha256"), str)
        ):
            raise InvalidRequest('a trailer is {"trailer": {"count": n, "sha256": "..."}}')
        return TrailerLine(trailer["count"], trailer["sha256"])
    unknown = set(data) - {"id", "item", "vector", "embedder"}
    if unknown:
        raise InvalidRequest(f"unknown key {quoted(sorted(unknown)[0])} in the line")
    if not isinstance(data.get("item"), dict):
        raise InvalidRequest("a line needs an item object")
    try:
        item = ITEM_ADAPTER.validate_python(data["item"]).checked(limits)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "item"
        raise InvalidRequest(f"item.{where}: {first['msg'].lower()}") from None
    except EngramError as error:
        raise InvalidRequest(f"item: {error.detail}") from None
    if "id" in data and data["id"] != item.fingerprint():
        raise InvalidRequest("id is not the item's fingerprint: the line was changed")
    vector, embedder = data.get("vector"), data.get("embedder")
    if vector is not None and (
        not isinstance(vector, list)
        or not all(isinstance(x, float | int) and not isinstance(x, bool) for x in vector)
        or not isinstance(embedder, str)
    ):
        raise InvalidRequest("a vector is a list of numbers, with the embedder that made it")
    return ImportedLine(item, vector, embedder)


class RejectedLine(Answer):
    line: int
    code: str
    message: str


class ImportReport(Answer):
    """What an import did: items stored anew, items already held, lines refused, and the trailer."""

    stored: int
    replayed: int
    rejected: list[RejectedLine]
    trailer: Literal["verified", "missing", "mismatch"]
    """``verified``: the trailer matched every item line before it; ``missing``: no trailer came
    (a cut-off dump, or one written by hand); ``mismatch``: lines were lost or changed."""
