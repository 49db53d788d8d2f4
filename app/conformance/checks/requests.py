"""Requests (contract introduction, §1, §8, §9): closed and typed bodies, null as unset, blank text,
the limits, and which refusal comes first."""

from __future__ import annotations

import secrets
from typing import Any

from app.conformance.kit import Probe, check, expect, require
from app.conformance.refusals import refused

BLANKS = ["", " ", "\t\n ", "\u3000\u00a0"]
# Zero-width and format characters show nothing, so a text of only them is as blank as spaces.
INVISIBLES = ["\u200b", "\ufeff", "\u200b\u200c\u200d", "\u2060 \ufeff"]


def _unknown_ids(count: int) -> list[str]:
    return [secrets.token_hex(20) for _ in range(count)]


@check("requests")
async def unknown_key_is_a_422_naming_it(probe: Probe) -> None:
    scope = probe.scoped()
    item = probe.learning("closed requests")
    cases: list[tuple[str, Any, str]] = [
        ("/v1/store", {**item, "colour": "red"}, "colour"),
        ("/v1/store", {**item, "meta": {**item["meta"], "colour": "red"}}, "meta.colour"),
        ("/v1/store", {**probe.document("x"), "body": {"text": "x", "colour": "red"}}, "body.colour"),
        ("/v1/store_many", {"items": [item, item, {**item, "colour": "red"}]}, "items[2].colour"),
        ("/v1/fetch", {"query": "x", "mode": "keyword", "limit": 1, "colour": "red"}, "colour"),
        ("/v1/list", {"limit": 1, "filter": {**scope, "colour": "red"}}, "filter.colour"),
        ("/v1/list", {"limit": 1, "filter": {"reach": {**probe.reach(), "colour": "red"}}}, "filter.reach.colour"),
        ("/v1/get", {"ids": _unknown_ids(1), "colour": "red"}, "colour"),
        ("/v1/explore", {"facet": "kind", "limit": 1, "filter": scope, "colour": "red"}, "colour"),
    ]
    for path, body, field in cases:
        refused(await probe.post(path, body), 422, field)
    require(await probe.list_all() == [], "a refused request wrote an item")


@check("requests")
async def wrong_json_type_is_a_422(probe: Probe) -> None:
    item = probe.learning("typed requests")
    cases: list[tuple[str, Any, str]] = [
        ("/v1/fetch", {"query": "x", "mode": "keyword", "limit": "10"}, "limit"),
        ("/v1/fetch", {"query": 5, "mode": "keyword", "limit": 10}, "query"),
        ("/v1/list", {"limit": [1]}, "limit"),
        ("/v1/list", {"limit": 1, "filter": []}, "filter"),
        ("/v1/list", {"limit": 1, "filter": {"reach": {"at": probe.ns(), "inherit": "yes"}}}, "inherit"),
        ("/v1/get", {"ids": "abc"}, "ids"),
        ("/v1/store", {**item, "meta": {**item["meta"], "tags": "one"}}, "meta.tags"),
        ("/v1/store", {**item, "text": ["a", "list"]}, "text"),
        ("/v1/store", {**item, "meta": ["not", "an", "object"]}, "meta"),
        ("/v1/fetch", {"query": "x", "mode": "semantic", "limit": 1}, "mode"),
        ("/v1/explore", {"facet": "colour", "limit": 1}, "facet"),
        ("/v1/store", {**item, "kind": "opinion"}, "kind"),
        ("/v1/store", {**item, "type": "note"}, "type"),
    ]
    for path, body, field in cases:
        refused(await probe.post(path, body), 422, field)


@check("requests")
async def malformed_json_is_a_422(probe: Probe) -> None:
    for body in [b'{"query": ', b"not json", b'{"limit": 1,}', b"\xff\xfe{}", b"[1, 2"]:
        refused(await probe.post("/v1/list", body), 422)
    refused(await probe.post("/v1/store", b""), 422)


@check("requests")
async def null_is_unset_in_an_item(probe: Probe) -> None:
    """An item with optional fields null, at several depths, is the item without them: the same id, a replay."""
    learning = probe.learning("null is unset in a learning")
    document = probe.document("null is unset in a document", title="a title")
    body = probe.document("null is unset in a document's body")
    conversation = {
        "type": "conversation",
        "turns": [{"role": "user", "text": "null is unset in a turn"}, {"role": "assistant", "text": "agreed"}],
        "meta": {"namespace": probe.ns()},
    }
    nulls = {
        "workspace": None,
        "tags": None,
        "source": None,
        "observed_at": None,
        "turns": None,
        "tool_call": None,
    }
    pairs = [
        (learning, {**learning, "evidence": None, "meta": {**learning["meta"], **nulls}}),
        (document, {**document, "mime": None}),
        (body, {**body, "body": {"text": body["body"]["text"], "uri": None}}),
        (
            conversation,
            {**conversation, "turns": [{**t, "at": None, "tool_calls": None} for t in conversation["turns"]]},
        ),
    ]
    for plain, with_nulls in pairs:
        first = expect(await probe.post("/v1/store", plain), 201)
        response = await probe.post("/v1/store", with_nulls)
        require(
            response.status_code == 200 and response.json() == {"id": first["id"], "replayed": True},
            f"a {plain['type']} with nulls answered {response.status_code} {response.text[:200]}, "
            f"not a replay of the same item without them ({first['id']})",
        )


@check("requests")
async def null_is_unset_in_a_read(probe: Probe) -> None:
    """Reads with optional fields null (filter, cursor, reach fields, scan_limit) answer as without them."""
    word = "nullread" + "".join(secrets.choice("bcdfghjkmnpqrstvwxz") for _ in range(8))
    stored = await probe.store(probe.learning(f"the {word} item"))
    reach_nulls = {"at": probe.ns(), "inherit": None, "descendants": None}
    pairs: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("/v1/list", {"limit": 5, "filter": {"reach": {"at": probe.ns()}}}, {"cursor": None}),
        ("/v1/list", {"limit": 5, "filter": {"reach": {"at": probe.ns()}}}, {"filter": {"reach": reach_nulls}}),
        ("/v1/list", {"limit": 5, "filter": probe.scoped()}, {"filter": {**probe.scoped(), "tags_any": None}}),
        ("/v1/get", {"ids": [stored]}, {"reach": None}),
        ("/v1/fetch", {"query": word, "mode": "keyword", "limit": 5}, {"filter": None, "cursor": None}),
        ("/v1/recall", {"question": word, "limit": 1, "filter": probe.scoped()}, {"instructions": None}),
        ("/v1/explore", {"facet": "kind", "limit": 5, "filter": probe.scoped()}, {"scan_limit": None}),
    ]
    for path, plain, nulls in pairs:
        without = await probe.call(path, plain)
        answer = await probe.call(path, {**plain, **nulls})
        if path == "/v1/recall":  # an answer a language model writes may differ from call to call
            without, answer = without["citations"], answer["citations"]
        require(answer == without, f"{path} with {nulls} answered {answer}, without them {without}")
    # A null in meta at the top refuses as its absence does: by the rules (400), not by the shape.
    blank = probe.document(" ")
    del blank["meta"]
    refused(await probe.post("/v1/store", {**blank, "meta": None}), 400)
    forgotten = await probe.call("/v1/forget", {"ids": [stored], "filter": None})
    require(forgotten.get("forgotten") == 1, f"forget with filter null answered {forgotten}")


@check("requests")
async def required_field_null_is_a_422_naming_it(probe: Probe) -> None:
    item = probe.learning("required fields")
    cases: list[tuple[str, Any, str]] = [
        ("/v1/store", {**item, "text": None}, "text"),
        ("/v1/store", {**item, "confidence": None}, "confidence"),
        ("/v1/store", {**probe.document("x"), "body": None}, "body"),
        ("/v1/store_many", {"items": None}, "items"),
        ("/v1/fetch", {"query": None, "mode": "keyword", "limit": 1}, "query"),
        ("/v1/fetch", {"query": "x", "mode": None, "limit": 1}, "mode"),
        ("/v1/list", {"limit": None}, "limit"),
        ("/v1/get", {"ids": None}, "ids"),
        ("/v1/forget_within", {"ids": _unknown_ids(1), "reach": None}, "reach"),
        ("/v1/explore", {"facet": None, "limit": 1}, "facet"),
    ]
    for path, body, field in cases:
        refused(await probe.post(path, body), 422, field)


def _blank_items(probe: Probe, text: str) -> list[dict[str, Any]]:
    return [
        probe.document(text),
        probe.learning(text),
        {"type": "conversation", "turns": [{"role": "user", "text": text}], "meta": {"namespace": probe.ns()}},
        {
            "type": "conversation",
            "turns": [{"role": "user", "text": "fine"}, {"role": "assistant", "text": text}],
            "meta": {"namespace": probe.ns()},
        },
    ]


async def _refuses_blanks(probe: Probe, texts: list[str]) -> None:
    for text in texts:
        for item in _blank_items(probe, text):
            refused(await probe.post("/v1/store", item), 400)
        refused(await probe.post("/v1/fetch", {"query": text, "mode": "keyword", "limit": 1}), 400)
        refused(await probe.post("/v1/recall", {"question": text, "limit": 1}), 400)
        refused(await probe.post("/v1/get", {"ids": [text]}), 400)
    require(await probe.list_all() == [], "a blank item was stored")


@check("requests")
async def blank_text_is_a_400(probe: Probe) -> None:
    await _refuses_blanks(probe, BLANKS)
    empty = {"type": "conversation", "turns": [], "meta": {"namespace": probe.ns()}}
    refused(await probe.post("/v1/store", empty), 400)


@check("requests")
async def invisible_text_is_blank(probe: Probe) -> None:
    await _refuses_blanks(probe, INVISIBLES)


@check("requests")
async def refused_values_are_a_400(probe: Probe) -> None:
    uri = {"type": "document", "body": {"uri": "https://example.com/a"}, "meta": {"namespace": probe.ns()}}
    cases = [
        uri,
        {**probe.learning("too sure"), "confidence": 1.5},
        {**probe.learning("too unsure"), "confidence": -0.1},
        probe.learning("a bad namespace", below="galaxy:far"),
        probe.learning("turns backwards", turns={"first": 3, "last": 1}),
    ]
    for item in cases:
        refused(await probe.post("/v1/store", item), 400)
    backwards = probe.scoped(turns={"first": 3, "last": 1})
    refused(await probe.post("/v1/list", {"limit": 1, "filter": backwards}), 400)
    require(await probe.list_all() == [], "a refused item was stored")


@check("requests")
async def limits_are_enforced(probe: Probe) -> None:
    """Contract §9: just outside each range is a 400, its ends are served."""
    scope = probe.scoped()
    item = probe.learning("limits")
    outside: list[tuple[str, dict[str, Any]]] = [
        ("/v1/fetch", {"query": "x", "mode": "keyword", "limit": 0, "filter": scope}),
        ("/v1/fetch", {"query": "x", "mode": "keyword", "limit": 1001, "filter": scope}),
        ("/v1/recall", {"question": "x", "limit": 0, "filter": scope}),
        ("/v1/recall", {"question": "x", "limit": 1001, "filter": scope}),
        ("/v1/list", {"limit": 0, "filter": scope}),
        ("/v1/list", {"limit": 1001, "filter": scope}),
        ("/v1/store_many", {"items": []}),
        ("/v1/store_many", {"items": [probe.learning(f"limits {n}") for n in range(101)]}),
        ("/v1/get", {"ids": _unknown_ids(201)}),
        ("/v1/get", {"ids": []}),
        ("/v1/forget", {"ids": _unknown_ids(1001)}),
        ("/v1/forget", {"ids": []}),
        ("/v1/forget_within", {"ids": _unknown_ids(1001), "reach": probe.reach()}),
        ("/v1/explore", {"facet": "kind", "limit": 0, "filter": scope}),
        ("/v1/explore", {"facet": "kind", "limit": 501, "filter": scope}),
        ("/v1/explore", {"facet": "kind", "limit": 1, "scan_limit": 0, "filter": scope}),
        ("/v1/explore", {"facet": "kind", "limit": 1, "scan_limit": 50001, "filter": scope}),
    ]
    for path, body in outside:
        refused(await probe.post(path, body), 400)
    require(await probe.list_all() == [], "a refused batch was written")
    ends: list[tuple[str, dict[str, Any]]] = [
        ("/v1/fetch", {"query": "x", "mode": "keyword", "limit": 1000, "filter": scope}),
        ("/v1/recall", {"question": "x", "limit": 1000, "filter": scope}),
        ("/v1/list", {"limit": 1000, "filter": scope}),
        ("/v1/store_many", {"items": [item] * 100}),
        ("/v1/get", {"ids": _unknown_ids(200)}),
        ("/v1/forget", {"ids": _unknown_ids(1000)}),
        ("/v1/forget_within", {"ids": _unknown_ids(1000), "reach": probe.reach()}),
        ("/v1/explore", {"facet": "kind", "limit": 500, "scan_limit": 50000, "filter": scope}),
        ("/v1/explore", {"facet": "kind", "limit": 1, "scan_limit": 1, "filter": scope}),
    ]
    for path, body in ends:
        await probe.call(path, body)


@check("requests")
async def shape_is_checked_before_rules(probe: Probe) -> None:
    """Contract §8: a body that breaks both the schema and a rule is refused for its shape (422)."""
    scope = probe.scoped()
    cases: list[tuple[str, Any, str]] = [
        ("/v1/fetch", {"query": " ", "mode": "keyword", "limit": 0, "colour": 1}, "colour"),
        ("/v1/fetch", {"query": " ", "mode": "semantic", "limit": 1}, "mode"),
        ("/v1/list", {"limit": 0, "filter": {**scope, "kinds": "learning"}}, "filter.kinds"),
        ("/v1/store", {**probe.learning(" "), "confidence": "high"}, "confidence"),
        ("/v1/store_many", {"items": [probe.learning(" "), {**probe.learning("x"), "colour": 1}]}, "items[1]"),
        ("/v1/get", {"ids": [], "reach": {"at": 7}}, "reach.at"),
        ("/v1/explore", {"facet": "colour", "limit": 0, "filter": scope}, "facet"),
    ]
    for path, body, field in cases:
        refused(await probe.post(path, body), 422, field)
