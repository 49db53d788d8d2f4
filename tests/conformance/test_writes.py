"""The writes checks pass against a faithful service and each catches its fault."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from app.contract.errors import InvalidRequest
from app.contract.items import StoredItem
from app.contract.namespaces import Reach
from app.contract.requests import ForgetByFilter, ForgetByIds, ForgetReport, ForgetTarget, GetRequest, Hit, StoreReceipt
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.reference import ReferenceEngine
from tests.conformance.faults import Fault, assert_caught
from tests.conformance.middleware import Answer, intercepting, rewriting
from tests.conformance.support import failed, outcomes_against


class ReplayWritesAgain(ReferenceEngine):
    """Answers every store as written."""

    async def store(self, item: StoredItem) -> StoreReceipt:
        return (await super().store(item)).model_copy(update={"replayed": False})


class TagsAsASet(ReferenceEngine):
    """Sorts and deduplicates tags before it keeps (and fingerprints) an item."""

    async def store(self, item: StoredItem) -> StoreReceipt:
        tags = sorted(set(item.meta.tags or [])) or None
        return await super().store(item.model_copy(update={"meta": item.meta.model_copy(update={"tags": tags})}))


class TagsLeftOut(ReferenceEngine):
    """Keeps an item without its tags, so two items that differ by a tag are one."""

    async def store(self, item: StoredItem) -> StoreReceipt:
        return await super().store(item.model_copy(update={"meta": item.meta.model_copy(update={"tags": None})}))


class BatchRepeatsWritten(ReferenceEngine):
    """Answers a repeat inside a batch as written, when the batch wrote its first copy."""

    async def store_many(self, items: list[StoredItem]) -> list[StoreReceipt]:
        held = set(self._records)
        receipts = await super().store_many(items)
        return [r.model_copy(update={"replayed": r.id in held}) for r in receipts]


class BatchItemByItem(ReferenceEngine):
    """Writes a batch one item at a time, so the items before an invalid one stay."""

    async def store_many(self, items: list[StoredItem]) -> list[StoreReceipt]:
        receipts = []
        for index, item in enumerate(items):
            try:
                receipts.append(await self.store(item))
            except InvalidRequest as error:
                raise InvalidRequest(f"items[{index}]: {error.detail}") from None
        return receipts


class CheckThenWrite(ReferenceEngine):
    """Asks whether an item is held, then writes it after a round trip, outside any lock."""

    async def store(self, item: StoredItem) -> StoreReceipt:
        held = item.checked(self._limits).fingerprint() in self._records
        await asyncio.sleep(0)
        return (await super().store(item)).model_copy(update={"replayed": held})


class ForgetCountsAsked(ReferenceEngine):
    """Counts every id it was asked to forget."""

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        await super().forget(target)
        return ForgetReport(forgotten=len(target.ids)) if isinstance(target, ForgetByIds) else ForgetReport(forgotten=0)


class ForgetObeysEmptyFilters(ReferenceEngine):
    """Forgets everything for a filter that constrains nothing."""

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        if isinstance(target, ForgetByFilter) and target.filter.is_empty():
            count = len(self._records)
            self._records.clear()
            return ForgetReport(forgotten=count)
        return await super().forget(target)


class ForgetWithinEverywhere(ReferenceEngine):
    """Forgets the ids wherever they are."""

    async def forget_within(self, ids: list[str], reach: Reach) -> ForgetReport:
        return await self.forget(ForgetByIds(ids=ids))


class GetRepeats(ReferenceEngine):
    """Answers an id asked twice twice."""

    async def get(self, request: GetRequest) -> list[Hit]:
        hits = {h.id: h for h in await super().get(request)}
        return [hits[i] for i in request.ids if i in hits]


class GetIgnoresReach(ReferenceEngine):
    async def get(self, request: GetRequest) -> list[Hit]:
        return await super().get(request.model_copy(update={"reach": None}))


def _receipts_by_id(answer: Answer) -> None:
    if answer.path == "/v1/store_many" and answer.status == 200:
        answer.json = {"receipts": sorted(answer.json["receipts"], key=lambda r: r["id"])}


def _both_targets_take_ids(path: str, body: Any) -> Any:
    if path == "/v1/forget" and isinstance(body, dict) and {"ids", "filter"} <= set(body):
        del body["filter"]
    return body


def _confidence_as_float32(answer: Answer) -> None:
    if answer.path == "/v1/get" and answer.status == 200:
        hits = answer.json["hits"]
        for hit in hits:
            if "confidence" in hit:
                hit["confidence"] = struct.unpack("f", struct.pack("f", hit["confidence"]))[0]
        answer.json = {"hits": hits}


FAULTS = [
    Fault("a replay answers written", "store_writes_then_replays", ReplayWritesAgain),
    Fault("tags are a set", "ids_are_fingerprints", TagsAsASet),
    Fault("tags are not part of an item", "one_change_is_another_item", TagsLeftOut),
    Fault("receipts come sorted by id", "store_many_answers_in_item_order", wrap=rewriting(_receipts_by_id)),
    Fault("a repeat in a batch answers written", "store_many_answers_in_item_order", BatchRepeatsWritten),
    Fault("a batch is written item by item", "store_many_is_all_or_nothing", BatchItemByItem),
    Fault("concurrent stores all answer written", "concurrent_identical_writes_make_one_item", CheckThenWrite),
    Fault("forget counts the ids asked", "forget_by_ids_counts_what_it_removed", ForgetCountsAsked),
    Fault("an empty filter forgets everything", "forget_by_filter_needs_a_constraint", ForgetObeysEmptyFilters),
    Fault(
        "ids and filter together forget by ids",
        "forget_takes_exactly_one_target",
        wrap=intercepting(_both_targets_take_ids),
    ),
    Fault("forget_within forgets anywhere", "forget_within_stays_within", ForgetWithinEverywhere),
    Fault("get answers an id asked twice twice", "get_answers_in_the_order_asked", GetRepeats),
    Fault("get ignores reach", "get_leaves_out_what_reach_does_not_admit", GetIgnoresReach),
    Fault(
        "confidence reads back as a float32", "stored_item_reads_back_as_stored", wrap=rewriting(_confidence_as_float32)
    ),
]


async def test_a_faithful_service_passes(embedder: WordLlamaEmbedder) -> None:
    assert failed(await outcomes_against(ReferenceEngine(embedder), ["writes"])) == []


@pytest.mark.parametrize("fault", FAULTS, ids=str)
async def test_each_fault_is_caught(fault: Fault, embedder: WordLlamaEmbedder) -> None:
    await assert_caught(fault, embedder, "writes")
