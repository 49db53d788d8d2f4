"""The visibility checks pass against a faithful service and each catches its fault: a read served
from a replica one write behind, a forget that lingers until the next write."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from app.contract.items import StoredItem
from app.contract.meta import Filter
from app.contract.namespaces import Reach
from app.contract.requests import (
    ExplorePage,
    ExploreRequest,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    GetRequest,
    Hit,
    ListPage,
    ListRequest,
    RecallAnswer,
    RecallRequest,
    StoreReceipt,
)
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.reference import ReferenceEngine, _Record
from tests.conformance.faults import Fault, assert_caught
from tests.conformance.support import failed, outcomes_against

T = TypeVar("T")


class OneWriteBehind(ReferenceEngine):
    """Serves the reads named in ``lagging`` from a replica that has not applied the last write
    (of a batch only, with ``batches_only``)."""

    def __init__(self, embedder: WordLlamaEmbedder, lagging: set[str], batches_only: bool = False) -> None:
        super().__init__(embedder)
        self._lagging = lagging
        self._batches_only = batches_only
        self._newest: set[str] = set()
        self._reading = ""

    async def store(self, item: StoredItem) -> StoreReceipt:
        receipt = await super().store(item)
        self._newest = set() if self._batches_only or receipt.replayed else {receipt.id}
        return receipt

    async def store_many(self, items: list[StoredItem]) -> list[StoreReceipt]:
        receipts = await super().store_many(items)
        self._newest = {r.id for r in receipts if not r.replayed}
        return receipts

    def _admitted(self, request_filter: Filter) -> list[tuple[str, _Record]]:
        rows = super()._admitted(request_filter)
        return [row for row in rows if row[0] not in self._newest] if self._reading in self._lagging else rows

    async def _as(self, read: str, answer: Awaitable[T]) -> T:
        self._reading = read
        try:
            return await answer
        finally:
            self._reading = ""

    async def get(self, request: GetRequest) -> list[Hit]:
        hits = await super().get(request)
        return [h for h in hits if h.id not in self._newest] if "get" in self._lagging else hits

    async def list(self, request: ListRequest) -> ListPage:
        return await self._as("list", super().list(request))

    async def fetch(self, request: FetchRequest) -> FetchPage:
        return await self._as(request.mode, super().fetch(request))

    async def explore(self, request: ExploreRequest) -> ExplorePage:
        return await self._as("explore", super().explore(request))

    async def recall(self, request: RecallRequest) -> RecallAnswer:
        return await self._as("recall", super().recall(request))


class ForgetLingers(ReferenceEngine):
    """Answers a forget, but its reads see the forgotten items until the next write (of the forgets
    named in ``lingering``: ``ids``, ``filter``, ``within``)."""

    def __init__(self, embedder: WordLlamaEmbedder, lingering: set[str]) -> None:
        super().__init__(embedder)
        self._lingering = lingering
        self._ghosts: dict[str, _Record] = {}

    async def _linger(self, way: str, forgetting: Awaitable[ForgetReport]) -> ForgetReport:
        before = dict(self._records)
        report = await forgetting
        if way in self._lingering:
            self._ghosts = {i: r for i, r in before.items() if i not in self._records}
            self._records.update(self._ghosts)
        return report

    async def _write(self, checked: list[StoredItem]) -> list[StoreReceipt]:
        for item_id in self._ghosts:
            self._records.pop(item_id, None)
        self._ghosts = {}
        return await super()._write(checked)

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        return await self._linger("ids" if hasattr(target, "ids") else "filter", super().forget(target))

    async def forget_within(self, ids: list[str], reach: Reach) -> ForgetReport:
        return await self._linger("within", super().forget_within(ids, reach))


def behind(*reads: str, batches_only: bool = False) -> Callable[[WordLlamaEmbedder], ReferenceEngine]:
    return lambda embedder: OneWriteBehind(embedder, set(reads), batches_only)


def lingering(*ways: str) -> Callable[[WordLlamaEmbedder], Any]:
    return lambda embedder: ForgetLingers(embedder, set(ways))


STORE_SEEN = "a_store_is_seen_by_every_read_at_once"
FAULTS = [
    Fault("get answers from a replica one write behind", STORE_SEEN, behind("get")),
    Fault("list answers from a replica one write behind", STORE_SEEN, behind("list")),
    Fault("the keyword index is one write behind", STORE_SEEN, behind("keyword")),
    Fault("the vector index is one write behind", STORE_SEEN, behind("vector")),
    Fault("hybrid reads an index one write behind", STORE_SEEN, behind("hybrid")),
    Fault("explore counts one write behind", STORE_SEEN, behind("explore")),
    Fault("recall cites one write behind", STORE_SEEN, behind("recall")),
    Fault(
        "a batch is listed only after the next write",
        "a_batch_is_seen_by_every_read_at_once",
        behind("list", batches_only=True),
    ),
    Fault("forgotten ids linger until the next write", "a_forget_is_seen_by_every_read_at_once", lingering("ids")),
    Fault("a forget by filter lingers", "every_way_of_forgetting_is_seen_at_once", lingering("filter")),
    Fault("a forget_within lingers", "every_way_of_forgetting_is_seen_at_once", lingering("within")),
]


async def test_a_faithful_service_passes(embedder: WordLlamaEmbedder) -> None:
    assert failed(await outcomes_against(ReferenceEngine(embedder), ["visibility"])) == []


@pytest.mark.parametrize("fault", FAULTS, ids=str)
async def test_each_fault_is_caught(fault: Fault, embedder: WordLlamaEmbedder) -> None:
    await assert_caught(fault, embedder, "visibility")
