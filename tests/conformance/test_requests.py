"""The requests checks pass against a faithful service and each catches its fault.

Two of the contract's rules are not yet the app's: ``null`` for a document body's ``uri``, and a
text of zero-width or format characters only being blank. ``holding_pending_rules`` holds the
app to them from outside, so the faithful service here is the app as it will be; the faults are
put around that.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from app.contract.items import Document, StoredItem
from app.contract.requests import StoreReceipt
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.reference import ReferenceEngine
from tests.conformance.middleware import Answer, intercepting, refusal, rewriting
from tests.conformance.support import PENDING, Wrapper, failed, failing_names, outcomes_against


def _invisible(text: Any) -> bool:
    """Blank by the contract once format characters count: only white space and zero-width marks."""
    return isinstance(text, str) and bool(text) and all(c.isspace() or unicodedata.category(c) == "Cf" for c in text)


def _texts(path: str, body: dict[str, Any]) -> list[Any]:
    items: Any = {"/v1/store": [body], "/v1/store_many": body.get("items")}.get(path)
    found = [body.get("query"), body.get("question"), *(body.get("ids") or [])]
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            text_body = item.get("body")
            found += [item.get("text"), text_body.get("text") if isinstance(text_body, dict) else None]
            found += [t.get("text") for t in item.get("turns") or [] if isinstance(t, dict)]
    return found


def _pending_rules(path: str, body: Any) -> Any:
    if not isinstance(body, dict):
        return body
    if any(_invisible(text) and text.strip() for text in _texts(path, body)):
        return refusal(path, "text must not be blank")
    if isinstance(body.get("body"), dict) and body["body"].get("uri", "") is None:
        body["body"].pop("uri")
    return body


holding_pending_rules = intercepting(_pending_rules)


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


@dataclass(frozen=True)
class Fault:
    name: str
    caught_by: str
    wrap: Wrapper | None = None
    engine: Callable[[WordLlamaEmbedder], ReferenceEngine] = ReferenceEngine


FAULTS = [
    Fault("unknown keys are ignored", "unknown_key_is_a_422_naming_it", _on_requests(_ignore_unknown_keys)),
    Fault("a number in a string is read", "wrong_json_type_is_a_422", _on_requests(_read_numbers_in_strings)),
    Fault("bad json is a 400", "malformed_json_is_a_422", rewriting(_bad_json_is_a_400)),
    Fault("a null evidence is stored empty", "null_is_unset_in_an_item", _on_requests(_null_evidence_is_empty)),
    Fault("a null filter sees the root only", "null_is_unset_in_a_read", _on_requests(_null_filter_is_the_root)),
    Fault("a null limit is 10", "required_field_null_is_a_422_naming_it", _on_requests(_null_limit_is_ten)),
    Fault("a body of one space is stored", "blank_text_is_a_400", engine=StoresBlankDocuments),
    Fault("a uri body is stored as text", "refused_values_are_a_400", _on_requests(_uri_body_is_its_text)),
    Fault("confidence is clamped to 0..1", "refused_values_are_a_400", _on_requests(_confidence_clamped)),
    Fault("a limit over the range is clamped", "limits_are_enforced", _on_requests(_limits_clamped)),
    Fault("a large batch is split", "limits_are_enforced", engine=SplitsLargeBatches),
    Fault(
        "a blank query is refused before the shape", "shape_is_checked_before_rules", _on_requests(_blank_query_first)
    ),
]


async def test_a_faithful_service_passes(embedder: WordLlamaEmbedder) -> None:
    outcomes = await outcomes_against(ReferenceEngine(embedder), ["requests"], wrap=holding_pending_rules)
    assert failed(outcomes) == []


async def test_without_the_pending_rules_only_their_checks_fail(embedder: WordLlamaEmbedder) -> None:
    outcomes = await outcomes_against(ReferenceEngine(embedder), ["requests"])
    assert {o.path for o in outcomes if not o.passed} <= set(PENDING)


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
async def test_each_fault_is_caught(fault: Fault, embedder: WordLlamaEmbedder) -> None:
    faulty = fault.wrap

    def wrap(app: Any) -> Any:
        held = holding_pending_rules(app)
        return faulty(held) if faulty else held

    outcomes = await outcomes_against(fault.engine(embedder), ["requests"], wrap=wrap)
    assert fault.caught_by in failing_names(outcomes), failed(outcomes)
