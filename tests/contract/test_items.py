"""Items (contract §1): the three kinds, their rendered text, validation and fingerprint."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import rfc8785
from pydantic import ValidationError

from app.contract.items import ITEM_ADAPTER, Conversation, Document, Learning, StoreItem
from app.contract.limits import Limits
from tests.contract.support import item, item_id, refused

LEARNING: dict[str, Any] = {
    "type": "learning",
    "text": "prefers tabs over spaces",
    "kind": "preference",
    "confidence": 0.8,
    "meta": {"namespace": "team:acme/agent:writer", "tags": ["style"]},
}
DOCUMENT: dict[str, Any] = {"type": "document", "body": {"text": "Ownership moves values."}}
CONVERSATION: dict[str, Any] = {
    "type": "conversation",
    "turns": [
        {"role": "user", "text": "find the bug", "at": "2024-05-01T12:00:00+02:00"},
        {"role": "assistant", "text": "looking", "tool_calls": [{"name": "search", "id": "c1"}, {"name": "open"}]},
    ],
}


def with_meta(data: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {**data, "meta": {**data.get("meta", {}), **meta}}


def without_meta(data: dict[str, Any], *names: str) -> dict[str, Any]:
    return {**data, "meta": {k: v for k, v in data.get("meta", {}).items() if k not in names}}


# --- rendered text -------------------------------------------------------------------


@pytest.mark.parametrize("title", [None, "", "   ", "\n\t"])
def test_document_without_a_title_renders_its_body(title: str | None) -> None:
    data = {**DOCUMENT, "title": title} if title is not None else DOCUMENT
    assert item(data).render_text() == "Ownership moves values."


def test_document_with_a_title_renders_a_heading() -> None:
    assert item({**DOCUMENT, "title": "Rust"}).render_text() == "# Rust\n\nOwnership moves values."
    # the title is kept as given, not trimmed
    assert item({**DOCUMENT, "title": " Rust "}).render_text() == "#  Rust \n\nOwnership moves values."


def test_conversation_renders_one_line_per_turn_with_tool_calls() -> None:
    assert item(CONVERSATION).render_text() == ("user: find the bug\nassistant: looking [tools: search (c1), open]")


def test_conversation_tool_calls_without_ids_and_empty_lists() -> None:
    conversation = item(
        {
            "type": "conversation",
            "turns": [
                {"role": "system", "text": "be brief", "tool_calls": []},
                {"role": "tool", "text": "3 results", "tool_calls": [{"name": "grep"}, {"name": "ls"}]},
                {"role": "user", "text": "thanks"},
            ],
        }
    )
    assert conversation.render_text() == "system: be brief\ntool: 3 results [tools: grep, ls]\nuser: thanks"


def test_a_single_turn_has_no_trailing_newline() -> None:
    assert item({"type": "conversation", "turns": [{"role": "user", "text": "hi"}]}).render_text() == "user: hi"


def test_learning_renders_its_text() -> None:
    assert item(LEARNING).render_text() == "prefers tabs over spaces"


# --- fingerprint: the worked examples ---------------------------------------------------


def test_worked_example_learning() -> None:
    learning = item(LEARNING)
    assert rfc8785.dumps(learning.canonical()) == (
        b'{"confidence":0.8,"kind":"preference","meta":{"namespace":"team:acme/agent:writer",'
        b'"source":{"kind":"agent"},"tags":["style"]},"text":"prefers tabs over spaces","type":"learning"}'
    )
    assert learning.fingerprint() == "19fc22b957ecd5727c7e03dda8c2e1979528da36"


def test_worked_example_document() -> None:
    document = item(DOCUMENT)
    assert rfc8785.dumps(document.canonical()) == (
        b'{"body":{"text":"Ownership moves values."},"meta":{"source":{"kind":"agent"}},"type":"document"}'
    )
    assert document.fingerprint() == "3dfde0d493051480bc1642e0eca4865c5894fcc3"


@pytest.mark.parametrize("data", [LEARNING, DOCUMENT, CONVERSATION])
def test_an_id_is_40_lowercase_hex(data: dict[str, Any]) -> None:
    fingerprint = item_id(data)
    assert len(fingerprint) == 40
    assert set(fingerprint) <= set("0123456789abcdef")


# --- fingerprint: stability --------------------------------------------------------------


@pytest.mark.parametrize("data", [LEARNING, DOCUMENT, CONVERSATION])
def test_same_item_same_id(data: dict[str, Any]) -> None:
    assert item_id(data) == item_id(json.loads(json.dumps(data)))


def test_key_order_is_irrelevant() -> None:
    reordered = dict(reversed(list(LEARNING.items())))
    reordered["meta"] = dict(reversed(list(LEARNING["meta"].items())))
    assert list(reordered) != list(LEARNING)
    assert item_id(reordered) == item_id(LEARNING)
    from_json = ITEM_ADAPTER.validate_json(json.dumps(reordered)).checked()
    assert from_json.fingerprint() == "19fc22b957ecd5727c7e03dda8c2e1979528da36"


def test_observed_at_is_ignored() -> None:
    base = item_id(LEARNING)
    assert item_id(with_meta(LEARNING, observed_at="2024-05-01T10:00:00Z")) == base
    assert item_id(with_meta(LEARNING, observed_at="1999-12-31T23:59:59.5+05:00")) == base


@pytest.mark.parametrize("root", ["", "root", "  root ", " ", None])
def test_the_root_namespace_is_left_out(root: str | None) -> None:
    data = with_meta(DOCUMENT, namespace=root)
    assert item_id(data) == "3dfde0d493051480bc1642e0eca4865c5894fcc3"
    assert "namespace" not in item(data).canonical()["meta"]


def test_a_trimmed_namespace_equals_the_untrimmed() -> None:
    assert item_id(with_meta(LEARNING, namespace="  team:acme/agent:writer\n")) == item_id(LEARNING)


def test_empty_lists_equal_absent_ones() -> None:
    assert item_id(with_meta(DOCUMENT, tags=[])) == item_id(DOCUMENT)
    with_empty_calls = {
        "type": "conversation",
        "turns": [{"role": "user", "text": "hi", "tool_calls": []}],
    }
    assert item_id(with_empty_calls) == item_id({"type": "conversation", "turns": [{"role": "user", "text": "hi"}]})


def test_the_default_source_equals_the_explicit_one() -> None:
    assert item_id(with_meta(DOCUMENT, source={"kind": "agent"})) == item_id(DOCUMENT)
    assert item_id(with_meta(DOCUMENT, source=None)) == item_id(DOCUMENT)


def test_unset_fields_equal_nulls() -> None:
    assert item_id({**DOCUMENT, "title": None, "mime": None}) == item_id(DOCUMENT)
    assert item_id({**LEARNING, "evidence": None}) == item_id(LEARNING)


def test_turn_timestamps_are_canonicalised_to_utc() -> None:
    def at(stamp: str) -> str:
        return item_id({"type": "conversation", "turns": [{"role": "user", "text": "hi", "at": stamp}]})

    utc = at("2024-05-01T10:00:00Z")
    assert at("2024-05-01T12:00:00+02:00") == utc
    assert at("2024-05-01T05:00:00-05:00") == utc
    assert at("2024-05-01T10:00:00.000Z") == utc
    assert at("2024-05-01T10:00:00+00:00") == utc
    assert at("2024-05-01T10:00:01Z") != utc
    canonical = item(CONVERSATION).canonical()
    assert canonical["turns"][0]["at"] == "2024-05-01T10:00:00Z"


def test_turn_timestamp_fractions_are_canonical() -> None:
    turn = {"role": "user", "text": "hi", "at": "2024-05-01T10:00:00.250000+00:00"}
    canonical = item({"type": "conversation", "turns": [turn]}).canonical()
    assert canonical["turns"][0]["at"] == "2024-05-01T10:00:00.25Z"
    early = {"role": "user", "text": "hi", "at": "0999-01-01T00:00:00.000001+00:00"}
    canonical = item({"type": "conversation", "turns": [early]}).canonical()
    assert canonical["turns"][0]["at"] == "0999-01-01T00:00:00.000001Z"  # YYYY: four digits


def test_confidence_one_and_one_point_zero_are_the_same_id() -> None:
    assert item_id({**LEARNING, "confidence": 1}) == item_id({**LEARNING, "confidence": 1.0})
    assert b'"confidence":1,' in rfc8785.dumps(item({**LEARNING, "confidence": 1.0}).canonical())
    assert item_id({**LEARNING, "confidence": 0}) == item_id({**LEARNING, "confidence": 0.0})


# --- fingerprint: sensitivity ---------------------------------------------------------------


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(with_meta(LEARNING, tags=["style", "tabs"]), id="one more tag"),
        pytest.param(with_meta(LEARNING, tags=["Style"]), id="one tag's case"),
        pytest.param(with_meta(LEARNING, tags=["style", "style"]), id="a repeated tag"),
        pytest.param(without_meta(LEARNING, "tags"), id="no tags"),
        pytest.param({**LEARNING, "text": "prefers tabs over spaces!"}, id="one more character"),
        pytest.param({**LEARNING, "text": "prefers tabs over spaceS"}, id="one character's case"),
        pytest.param(with_meta(LEARNING, namespace="team:acme/agent:reviewer"), id="namespace"),
        pytest.param(with_meta(LEARNING, namespace="team:acme"), id="namespace ancestor"),
        pytest.param(without_meta(LEARNING, "namespace"), id="root namespace"),
        pytest.param({**LEARNING, "confidence": 0.81}, id="confidence"),
        pytest.param({**LEARNING, "kind": "fact"}, id="learning kind"),
        pytest.param({**LEARNING, "evidence": "seen twice"}, id="evidence"),
        pytest.param(with_meta(LEARNING, source={"kind": "agent", "id": "a1"}), id="source id"),
        pytest.param(with_meta(LEARNING, source={"kind": "import"}), id="source kind"),
        pytest.param(with_meta(LEARNING, workspace="w"), id="a meta field"),
    ],
)
def test_any_other_change_is_a_new_id(changed: dict[str, Any]) -> None:
    assert item_id(changed) != item_id(LEARNING)


def test_tag_order_is_part_of_the_item() -> None:
    assert item_id(with_meta(DOCUMENT, tags=["a", "b"])) != item_id(with_meta(DOCUMENT, tags=["b", "a"]))


def test_document_fields_count() -> None:
    base = item_id(DOCUMENT)
    assert item_id({**DOCUMENT, "title": "Rust"}) != base
    assert item_id({**DOCUMENT, "mime": "text/plain"}) != base
    assert item_id({**DOCUMENT, "body": {"text": "Ownership moves values"}}) != base


def test_conversation_turn_details_count() -> None:
    base = item_id(CONVERSATION)
    turns = CONVERSATION["turns"]
    assert item_id({**CONVERSATION, "turns": [turns[0], {**turns[1], "tool_calls": [{"name": "search"}]}]}) != base
    assert item_id({**CONVERSATION, "turns": [turns[0], {**turns[1], "role": "tool"}]}) != base
    assert item_id({**CONVERSATION, "turns": [{k: v for k, v in turns[0].items() if k != "at"}, turns[1]]}) != base
    assert item_id({**CONVERSATION, "turns": [turns[1], turns[0]]}) != base


def test_the_same_text_as_another_kind_is_another_item() -> None:
    as_document = {"type": "document", "body": {"text": LEARNING["text"]}, "meta": LEARNING["meta"]}
    assert item_id(as_document) != item_id(LEARNING)


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", " ", "\n\t  "])
def test_a_blank_document_body_is_refused(text: str) -> None:
    message = refused(item, {"type": "document", "title": "t", "body": {"text": text}})
    assert "body" in message


def test_a_uri_body_is_refused() -> None:
    message = refused(item, {"type": "document", "body": {"uri": "https://example.org/a"}})
    assert "uri" in message


def test_a_conversation_without_turns_is_refused() -> None:
    refused(item, {"type": "conversation", "turns": []})


@pytest.mark.parametrize("text", ["", "  ", "\n"])
def test_a_blank_turn_is_refused_naming_it(text: str) -> None:
    turns = [{"role": "user", "text": "hi"}, {"role": "assistant", "text": text}]
    message = refused(item, {"type": "conversation", "turns": turns})
    assert "turns[1]" in message


@pytest.mark.parametrize("text", ["", " ", "\r\n"])
def test_a_blank_learning_is_refused(text: str) -> None:
    refused(item, {**LEARNING, "text": text})


@pytest.mark.parametrize("confidence", [-0.0001, 1.0001, -1, 2, math.nan, math.inf, -math.inf])
def test_confidence_outside_zero_to_one_is_refused(confidence: float) -> None:
    message = refused(item, {**LEARNING, "confidence": confidence})
    assert "confidence" in message


@pytest.mark.parametrize("confidence", [0, 0.0, 0.5, 1, 1.0])
def test_confidence_bounds_are_inclusive(confidence: float) -> None:
    assert item({**LEARNING, "confidence": confidence}).confidence == confidence


@pytest.mark.parametrize("namespace", ["Team:acme", "team:acme/", "team:a b", "nope", "ws:" + "x" * 129])
def test_a_bad_namespace_is_refused(namespace: str) -> None:
    refused(item, with_meta(DOCUMENT, namespace=namespace))


def test_turns_first_after_last_in_meta_is_refused() -> None:
    refused(item, with_meta(CONVERSATION, turns={"first": 2, "last": 1}))


BAD_TEXT = ["nul \x00 inside", "lone \ud800 surrogate", "\udfff", "\x00"]


@pytest.mark.parametrize("bad", BAD_TEXT)
@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda s: {**DOCUMENT, "body": {"text": s}}, id="document body"),
        pytest.param(lambda s: {**DOCUMENT, "title": s}, id="document title"),
        pytest.param(lambda s: {**DOCUMENT, "mime": s}, id="document mime"),
        pytest.param(lambda s: {**LEARNING, "text": s}, id="learning text"),
        pytest.param(lambda s: {**LEARNING, "evidence": s}, id="learning evidence"),
        pytest.param(lambda s: {"type": "conversation", "turns": [{"role": "user", "text": s}]}, id="turn text"),
        pytest.param(
            lambda s: {"type": "conversation", "turns": [{"role": "tool", "text": "x", "tool_calls": [{"name": s}]}]},
            id="tool call name",
        ),
        pytest.param(lambda s: with_meta(DOCUMENT, workspace=s), id="meta workspace"),
        pytest.param(lambda s: with_meta(DOCUMENT, tags=["ok", s]), id="meta tag"),
        pytest.param(lambda s: with_meta(DOCUMENT, source={"kind": "file", "id": s}), id="meta source id"),
        pytest.param(lambda s: with_meta(DOCUMENT, tool_call={"name": s}), id="meta tool call"),
        pytest.param(lambda s: with_meta(DOCUMENT, file_path=s), id="meta file path"),
    ],
)
def test_nul_and_lone_surrogates_are_refused_in_any_text(build: Any, bad: str) -> None:
    refused(item, build(bad))


def test_configured_limits_are_enforced() -> None:
    small = Limits(max_text_chars=10, max_tags=2, max_tag_chars=3, max_field_chars=4, max_turns=1)
    refused(ITEM_ADAPTER.validate_python({**LEARNING, "text": "x" * 11}).checked, small)
    assert ITEM_ADAPTER.validate_python({**LEARNING, "text": "x" * 10, "meta": {}}).checked(small)
    refused(ITEM_ADAPTER.validate_python(with_meta(DOCUMENT, tags=["a", "b", "c"])).checked, small)
    refused(ITEM_ADAPTER.validate_python(with_meta(DOCUMENT, tags=["abcd"])).checked, small)
    refused(ITEM_ADAPTER.validate_python(with_meta(DOCUMENT, repo="abcde")).checked, small)
    refused(ITEM_ADAPTER.validate_python(CONVERSATION).checked, small)


def test_validate_returns_the_canonical_copy() -> None:
    raw = ITEM_ADAPTER.validate_python(with_meta(LEARNING, namespace=" root ", tags=[]))
    checked = raw.checked()
    assert checked.meta.namespace is None
    assert checked.meta.tags is None
    assert checked.meta.source is not None and checked.meta.source.kind == "agent"
    assert raw.meta.namespace == " root "  # the input is left alone


def test_validate_keeps_the_kind() -> None:
    assert isinstance(item(DOCUMENT), Document)
    assert isinstance(item(CONVERSATION), Conversation)
    assert isinstance(item(LEARNING), Learning)


# --- closed, strict models -------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({**DOCUMENT, "colour": "red"}, id="document"),
        pytest.param({**LEARNING, "colour": "red"}, id="learning"),
        pytest.param({**CONVERSATION, "colour": "red"}, id="conversation"),
        pytest.param(with_meta(DOCUMENT, colour="red"), id="meta"),
        pytest.param({**DOCUMENT, "body": {"text": "x", "colour": "red"}}, id="text body"),
        pytest.param({**DOCUMENT, "body": {"uri": "x", "colour": "red"}}, id="uri body"),
        pytest.param({**DOCUMENT, "body": {"text": "x", "uri": "y"}}, id="text and uri body"),
        pytest.param({"type": "conversation", "turns": [{"role": "user", "text": "x", "colour": "red"}]}, id="turn"),
        pytest.param(
            {"type": "conversation", "turns": [{"role": "tool", "text": "x", "tool_calls": [{"name": "a", "x": 1}]}]},
            id="tool call",
        ),
        pytest.param(with_meta(DOCUMENT, source={"kind": "file", "path": "/a"}), id="source"),
        pytest.param(with_meta(DOCUMENT, turns={"first": 0, "last": 1, "step": 1}), id="turn range"),
        pytest.param(with_meta(DOCUMENT, tool_call={"name": "a", "args": {}}), id="meta tool call"),
    ],
)
def test_an_unknown_key_is_refused_by_the_schema(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        StoreItem.model_validate(data)
    with pytest.raises(ValidationError):
        StoreItem.model_validate_json(json.dumps(data))


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({**LEARNING, "confidence": "0.8"}, id="confidence as a string"),
        pytest.param({**LEARNING, "confidence": True}, id="confidence as a bool"),
        pytest.param({**LEARNING, "text": 5}, id="text as a number"),
        pytest.param({**LEARNING, "kind": "Preference"}, id="unknown learning kind"),
        pytest.param({**LEARNING, "type": "note"}, id="unknown type"),
        pytest.param({k: v for k, v in LEARNING.items() if k != "type"}, id="no type"),
        pytest.param({k: v for k, v in LEARNING.items() if k != "confidence"}, id="no confidence"),
        pytest.param({"type": "document"}, id="no body"),
        pytest.param({"type": "conversation"}, id="no turns"),
        pytest.param({"type": "conversation", "turns": [{"role": "bot", "text": "x"}]}, id="unknown role"),
        pytest.param({"type": "conversation", "turns": [{"role": "user", "text": "x", "at": "yesterday"}]}, id="at"),
        pytest.param(
            {"type": "conversation", "turns": [{"role": "user", "text": "x", "at": "2024-05-01T10:00:00"}]},
            id="at without offset",
        ),
        pytest.param(with_meta(DOCUMENT, tags="style"), id="tags as a string"),
        pytest.param(with_meta(DOCUMENT, tags=[1]), id="a tag as a number"),
        pytest.param(with_meta(DOCUMENT, source={"kind": "web"}), id="unknown source kind"),
        pytest.param(with_meta(DOCUMENT, turns={"first": "1", "last": 2}), id="turn number as a string"),
        pytest.param(with_meta(DOCUMENT, namespace=["team:acme"]), id="namespace as a list"),
        pytest.param({**DOCUMENT, "meta": "root"}, id="meta as a string"),
    ],
)
def test_wrong_types_are_refused_by_the_schema(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        StoreItem.model_validate_json(json.dumps(data))


# Blank is white space or characters that show nothing (format characters, fillers): as blank as " ".
INVISIBLE = ["\u200b", " \u200b\u200c\u200d ", "\ufeff", "\u2060", "\u00ad", "\u180e", "\u202e", "\u3164", "\ufe0f"]


@pytest.mark.parametrize("text", INVISIBLE)
def test_text_of_invisible_characters_is_blank_everywhere_an_item_holds_text(text: str) -> None:
    assert "body" in refused(item, {"type": "document", "body": {"text": text}})
    assert "turns[0]" in refused(item, {"type": "conversation", "turns": [{"role": "user", "text": text}]})
    refused(item, {**LEARNING, "text": text})


@pytest.mark.parametrize("title", INVISIBLE)
def test_a_title_of_invisible_characters_renders_no_heading(title: str) -> None:
    assert item({**DOCUMENT, "title": title}).render_text() == "Ownership moves values."


@pytest.mark.parametrize("text", ["\u200bx", "x\u00ad", "\u3164a", "\U0001f600", "\u0301"])
def test_text_with_anything_visible_is_not_blank(text: str) -> None:
    assert item({**LEARNING, "text": text}).text == text
