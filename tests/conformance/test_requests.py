"""The requests checks pass against a faithful service and each catches its fault."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from app.contract.items import Document, StoredItem
from app.contract.requests import StoreReceipt
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.reference import ReferenceEngine
from tests.conformance.faults import Fault, assert_caught
from tests.conformance.middleware import Answer, intercepting, refusal, rewriting
from tests.conformance.support import Wrapper, failed, outcomes_against


def _on_requests(change: Callable[[str, Any], Any]) -> Wrapper:
    return intercepting(lambda path, body: change(path, body) if isinstance(body, dict) else body)


def _walk(value: Any, change: Callable[[dict[str, Any]], None]) -> Any:
    if isinstance(value, dict):
        change(value)
        for inner in value.values():
            _walk(inner, change)
    elif isinstance(value, list):
        for inner in value:
            _walk(inner, change)
    return value


def _ignore_unknown_keys(path: str, body: Any) -> Any:
    return _walk(body, lambda node: node.pop("colour", None))


def _read_numbers_in_strings(path: str, body: Any) -> Any:
    if isinstance(body.get("limit"), str) and body["limit"].isdigit():
        body["limit"] = int(body["limit"])
    return body


def _null_evidence_is_empty(path: str, body: Any) -> Any:
    if "evidence" in body and body["evidence"] is None:
        body["evidence"] = ""
    return body


def _null_filter_is_the_root(path: str, body: Any) -> Any:
    if "filter" in body and body["filter"] is None:
        body["filter"] = {"reach": {}}
    return body


def _null_limit_is_ten(path: str, body: Any) -> Any:
    if "limit" in body and body["limit"] is None:
        body["limit"] = 10
    return body


def _uri_body_is_its_text(path: str, body: Any) -> Any:
    if isinstance(body.get("body"), dict) and "uri" in body["body"]:
        body["body"] = {"text": body["body"]["uri"]}
    return body


def _confidence_clamped(path: str, body: Any) -> Any:
    if isinstance(body.get("confidence"), float):
        body["confidence"] = min(1.0, max(0.0, body["confidence"]))
    return body


def _limits_clamped(path: str, body: Any) -> Any:
    if isinstance(body.get("limit"), int) and body["limit"] > 500:
        body["limit"] = 500
    return body


def _blank_query_first(path: str, body: Any) -> Any:
    if path == "/v1/fetch" and isinstance(body.get("query"), str) and not body["query"].strip():
        return refusal(path, "query must not be blank")
    return body


def _bad_json_is_a_400(answer: Answer) -> None:
    if answer.status == 422 and any(d["field"] == "body" for d in answer.json["details"]):
        answer.status = 400


class StoresBlankDocuments(ReferenceEngine):
    """Tests a document's body for blankness by its length."""

    async def store(self, item: StoredItem) -> StoreReceipt:
        if isinstance(item, Document) and getattr(item.body, "text", None) == " ":
            return (await self._write([item]))[0]
        return await super().store(item)


class SplitsLargeBatches(ReferenceEngine):
    """Writes a batch over the limit as several within it."""

    async def store_many(self, items: list[StoredItem]) -> list[StoreReceipt]:
        receipts: list[StoreReceipt] = []
        for start in range(0, len(items), 100):
            receipts += await super().store_many(items[start : start + 100])
        return receipts


FAULTS = [
    Fault("unknown keys are ignored", "unknown_key_is_a_422_naming_it", wrap=_on_requests(_ignore_unknown_keys)),
    Fault("a number in a string is read", "wrong_json_type_is_a_422", wrap=_on_requests(_read_numbers_in_strings)),
    Fault("bad json is a 400", "malformed_json_is_a_422", wrap=rewriting(_bad_json_is_a_400)),
    Fault("a null evidence is stored empty", "null_is_unset_in_an_item", wrap=_on_requests(_null_evidence_is_empty)),
    Fault("a null filter sees the root only", "null_is_unset_in_a_read", wrap=_on_requests(_null_filter_is_the_root)),
    Fault("a null limit is 10", "required_field_null_is_a_422_naming_it", wrap=_on_requests(_null_limit_is_ten)),
    Fault("a body of one space is stored", "blank_text_is_a_400", StoresBlankDocuments),
    Fault("a uri body is stored as text", "refused_values_are_a_400", wrap=_on_requests(_uri_body_is_its_text)),
    Fault("confidence is clamped to 0..1", "refused_values_are_a_400", wrap=_on_requests(_confidence_clamped)),
    Fault("a limit over the range is clamped", "limits_are_enforced", wrap=_on_requests(_limits_clamped)),
    Fault("a large batch is split", "limits_are_enforced", SplitsLargeBatches),
    Fault(
        "a blank query is refused before the shape",
        "shape_is_checked_before_rules",
        wrap=_on_requests(_blank_query_first),
    ),
]


async def test_a_faithful_service_passes(embedder: WordLlamaEmbedder) -> None:
    outcomes = await outcomes_against(ReferenceEngine(embedder), ["requests"])
    assert failed(outcomes) == []


@pytest.mark.parametrize("fault", FAULTS, ids=str)
async def test_each_fault_is_caught(fault: Fault, embedder: WordLlamaEmbedder) -> None:
    await assert_caught(fault, embedder, "requests")
