"""Every route over the wire (httpx against the ASGI app, PostgreSQL engine): answers and typed errors."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from tests.support.engines import ClientFactory

LEARNING = {
    "type": "learning",
    "text": "prefers tabs over spaces",
    "kind": "preference",
    "confidence": 0.8,
    "meta": {"namespace": "team:acme/agent:writer", "tags": ["style"]},
}
DOCUMENT = {
    "type": "document",
    "title": "Rust",
    "body": {"text": "Ownership moves values."},
    "mime": "text/markdown",
    "meta": {"folder": "/notes/rust", "observed_at": "2026-10-04T09:30:00.120+02:00"},
}
CONVERSATION = {
    "type": "conversation",
    "turns": [
        {"role": "user", "text": "which editor do I use?", "at": "2026-10-04T09:30:00Z"},
        {"role": "assistant", "text": "vim, with tabs", "tool_calls": [{"name": "lookup", "id": "x1"}, {"name": "t"}]},
    ],
    "meta": {"thread_id": "t-9"},
}


def no_nulls(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, dict):
        return all(no_nulls(v) for v in value.values())
    if isinstance(value, list):
        return all(no_nulls(v) for v in value)
    return True


def assert_envelope(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code
    assert body["request_id"] == response.headers["X-Request-ID"]
    assert isinstance(body["retryable"], bool)
    assert not body["message"].endswith((".", "!", ";", ":"))
    prefixes = {
        "invalid_request": "invalid request: ",
        "unauthorized": "unauthorized: ",
        "not_found": "not found: ",
        "method_not_allowed": "method not allowed: ",
        "payload_too_large": "payload too large: ",
        "unsupported": "unsupported: ",
    }
    assert body["message"].startswith(prefixes[code])
    return body  # type: ignore[no-any-return]


async def store_all(client: httpx.AsyncClient) -> list[str]:
    response = await client.post("/v1/store_many", json={"items": [LEARNING, DOCUMENT, CONVERSATION]})
    assert response.status_code == 200, response.text
    return [r["id"] for r in response.json()["receipts"]]


# Descriptors.


async def test_engine_descriptor(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/engine")
    assert response.status_code == 200
    body = response.json()
    assert body["fetch_modes"] == ["keyword", "vector", "hybrid"]
    assert set(body) >= {"id", "label", "description", "hosted", "needs_endpoint", "needs_key", "fetch_modes"}


async def test_health_ok(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/health")
    assert response.status_code == 200
    assert response.json() == {"state": "ok"}


async def test_error_catalogue_lists_exactly_the_contract_codes(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/errors")
    assert response.status_code == 200
    entries = {e["code"]: e for e in response.json()["errors"]}
    assert set(entries) == {
        "invalid_request",
        "unauthorized",
        "forbidden",
        "not_found",
        "method_not_allowed",
        "conflict",
        "payload_too_large",
        "unavailable",
        "unsupported",
        "engine",
        "config",
    }
    assert entries["invalid_request"]["http_status"] == 400
    assert entries["unavailable"] == {**entries["unavailable"], "http_status": 503, "retryable": True}
    assert all(e["description"] for e in entries.values())
    assert [e["retryable"] for e in entries.values()].count(True) == 1


# Store.


async def test_store_answers_201_then_200_replayed(client: httpx.AsyncClient) -> None:
    first = await client.post("/v1/store", json=LEARNING)
    assert first.status_code == 201
    assert first.json() == {"id": "19fc22b957ecd5727c7e03dda8c2e1979528da36", "replayed": False}
    again = await client.post("/v1/store", json=LEARNING)
    assert again.status_code == 200
    assert again.json() == {"id": first.json()["id"], "replayed": True}


async def test_store_many_receipts_in_order(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/store_many", json={"items": [LEARNING, DOCUMENT, LEARNING]})
    assert response.status_code == 200
    receipts = response.json()["receipts"]
    assert [r["replayed"] for r in receipts] == [False, False, True]
    assert receipts[0]["id"] == receipts[2]["id"]


async def test_store_many_invalid_item_names_its_index_and_writes_nothing(client: httpx.AsyncClient) -> None:
    bad = {**LEARNING, "confidence": 1.5}
    response = await client.post("/v1/store_many", json={"items": [DOCUMENT, bad]})
    body = assert_envelope(response, 400, "invalid_request")
    assert "items[1]" in body["message"]
    listed = await client.post("/v1/list", json={"limit": 10})
    assert listed.json()["items"] == []


@pytest.mark.parametrize("count", [0, 101])
async def test_store_many_size_bounds(client: httpx.AsyncClient, count: int) -> None:
    items = [{**LEARNING, "text": f"fact {n}"} for n in range(count)]
    assert_envelope(await client.post("/v1/store_many", json={"items": items}), 400, "invalid_request")


@pytest.mark.parametrize(
    "item",
    [
        {"type": "document", "body": {"text": "  "}},
        {"type": "document", "body": {"uri": "https://example.com/x"}},
        {"type": "conversation", "turns": []},
        {"type": "conversation", "turns": [{"role": "user", "text": ""}]},
        {"type": "learning", "text": "", "kind": "fact", "confidence": 0.5},
        {"type": "learning", "text": "x", "kind": "fact", "confidence": -0.1},
        {"type": "learning", "text": "x", "kind": "fact", "confidence": 0.5, "meta": {"namespace": "Team:acme"}},
        {
            "type": "learning",
            "text": "x",
            "kind": "fact",
            "confidence": 0.5,
            "meta": {"turns": {"first": 2, "last": 0}},
        },
        {"type": "learning", "text": "nul \u0000 here", "kind": "fact", "confidence": 0.5},
    ],
)
async def test_store_refusals_are_400(client: httpx.AsyncClient, item: dict[str, Any]) -> None:
    envelope = assert_envelope(await client.post("/v1/store", json=item), 400, "invalid_request")
    assert "items[" not in envelope["message"]  # one item was sent, not a batch
    many = assert_envelope(await client.post("/v1/store_many", json={"items": [item]}), 400, "invalid_request")
    assert many["message"] == envelope["message"].replace("invalid request: ", "invalid request: items[0]: ")


async def test_nan_confidence_is_400(client: httpx.AsyncClient) -> None:
    body = '{"type":"learning","text":"x","kind":"fact","confidence":NaN}'
    response = await client.post("/v1/store", content=body, headers={"content-type": "application/json"})
    assert_envelope(response, 400, "invalid_request")


async def test_lone_surrogate_is_400(client: httpx.AsyncClient) -> None:
    body = '{"type":"learning","text":"bad \\ud800 text","kind":"fact","confidence":0.5}'
    response = await client.post("/v1/store", content=body, headers={"content-type": "application/json"})
    assert_envelope(response, 400, "invalid_request")


async def test_items_read_back_exactly_and_without_nulls(client: httpx.AsyncClient) -> None:
    ids = await store_all(client)
    response = await client.post("/v1/get", json={"ids": ids})
    hits = response.json()["hits"]
    assert no_nulls(response.json())
    learning, document, conversation = hits
    assert learning["confidence"] == 0.8 and learning["score"] == 0.0
    assert learning["meta"] == {"namespace": "team:acme/agent:writer", "source": {"kind": "agent"}, "tags": ["style"]}
    assert document["text"] == "# Rust\n\nOwnership moves values."
    assert document["meta"]["observed_at"] == "2026-10-04T07:30:00.12Z"
    assert "confidence" not in document
    assert conversation["text"] == ("user: which editor do I use?\nassistant: vim, with tabs [tools: lookup (x1), t]")


async def test_null_in_a_request_means_unset(client: httpx.AsyncClient) -> None:
    with_nulls = {**LEARNING, "evidence": None, "meta": {**LEARNING["meta"], "workspace": None}}  # type: ignore[dict-item]
    response = await client.post("/v1/store", json=with_nulls)
    assert response.status_code == 201
    assert response.json()["id"] == "19fc22b957ecd5727c7e03dda8c2e1979528da36"


# Fetch, recall, list, get.


@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
async def test_fetch_each_mode(client: httpx.AsyncClient, mode: str) -> None:
    ids = await store_all(client)
    response = await client.post("/v1/fetch", json={"query": "tabs", "mode": mode, "limit": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["hits"][0]["id"] in (ids[0], ids[2])
    assert all({"id", "kind", "text", "meta", "score"} <= set(h) for h in body["hits"])
    assert no_nulls(body)


async def test_keyword_fetch_finds_an_email_and_a_word_after_many_stop_words(client: httpx.AsyncClient) -> None:
    ids = await store_all(client)
    email = await client.post("/v1/store", json={**LEARNING, "text": "contact alice@example.com about it"})
    stop_words = "a an and are as at be by do does did for from has have how i in is it its me my of on or our that"
    for query, expected in [("alice@example.com", email.json()["id"]), (f"{stop_words} the their ownership", ids[1])]:
        response = await client.post("/v1/fetch", json={"query": query, "mode": "keyword", "limit": 5})
        assert response.status_code == 200, response.text
        assert [h["id"] for h in response.json()["hits"]] == [expected]


async def test_fetch_pages_with_cursor(client: httpx.AsyncClient) -> None:
    ids = await store_all(client)
    seen: list[str] = []
    request: dict[str, Any] = {"query": "anything", "mode": "vector", "limit": 2}
    while True:
        body = (await client.post("/v1/fetch", json=request)).json()
        seen += [h["id"] for h in body["hits"]]
        if "next_cursor" not in body:
            break
        request["cursor"] = body["next_cursor"]
    assert sorted(seen) == sorted(ids)


async def test_bad_cursor_is_400(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/fetch", json={"query": "x", "mode": "vector", "limit": 2, "cursor": "abc"})
    assert_envelope(response, 400, "invalid_request")
    response = await client.post("/v1/list", json={"limit": 2, "cursor": "abc.def"})
    assert_envelope(response, 400, "invalid_request")


async def test_an_empty_or_respelled_cursor_is_400_not_a_restart(client: httpx.AsyncClient) -> None:
    await store_all(client)
    fetch = {"query": "anything", "mode": "vector", "limit": 1}
    for route, request in (("/v1/fetch", fetch), ("/v1/list", {"limit": 1})):
        issued = (await client.post(route, json=request)).json()["next_cursor"]
        assert (await client.post(route, json={**request, "cursor": issued})).status_code == 200
        body, tag = issued.split(".")
        respelled = [
            "",
            f"{body}.{tag}=",  # base64 padding the service never writes
            f"{body}.{tag.replace('-', '+').replace('_', '/')}" if {"-", "_"} & set(tag) else f"{body}=.{tag}",
        ]
        for cursor in respelled:
            assert_envelope(await client.post(route, json={**request, "cursor": cursor}), 400, "invalid_request")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "mode": "semantic", "limit": 1}, "mode"),
        ({"query": "x", "mode": "keyword"}, "limit"),
        ({"query": "x", "mode": "keyword", "limit": "5"}, "limit"),
        ({"query": "x", "mode": "keyword", "limit": 5, "colour": "red"}, "colour"),
        ({"query": "x", "mode": "keyword", "limit": 5, "filter": {"kinds": ["memo"]}}, "filter.kinds[0]"),
        ({"query": 5, "mode": "keyword", "limit": 5}, "query"),
        ({"query": "x", "mode": "keyword", "limit": 5, "Colour": "red"}, "Colour"),
    ],
)
async def test_fetch_shape_errors_are_422_naming_the_field(
    client: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    envelope = assert_envelope(await client.post("/v1/fetch", json=body), 422, "invalid_request")
    assert field in [d["field"] for d in envelope["details"]]


@pytest.mark.parametrize(
    ("route", "body", "fields"),
    [
        # The item's own `body` field, not dropped as if it were the request's; only the member it fits.
        ("/v1/store", {"type": "document", "body": {"text": 5}}, ["body.text"]),
        ("/v1/store", {**LEARNING, "kind": "opinion"}, ["kind"]),  # no union tag in the path
        ("/v1/store", {**LEARNING, "type": "memo"}, ["type"]),
        ("/v1/store", {**LEARNING, "Extra": 1}, ["Extra"]),
        ("/v1/store", {**LEARNING, "meta": {"observed_at": 1700000000}}, ["meta.observed_at"]),
        ("/v1/store_many", {"items": [LEARNING, {**LEARNING, "bad": 1}]}, ["items[1].bad"]),
        ("/v1/forget", {"ids": 5}, ["ids"]),
    ],
)
async def test_shape_errors_name_the_fields_as_the_client_wrote_them(
    client: httpx.AsyncClient, route: str, body: dict[str, Any], fields: list[str]
) -> None:
    envelope = assert_envelope(await client.post(route, json=body), 422, "invalid_request")
    assert [d["field"] for d in envelope["details"]] == fields


async def test_a_quoted_value_keeps_its_case_in_a_422(client: httpx.AsyncClient) -> None:
    envelope = assert_envelope(
        await client.post("/v1/store", json={**LEARNING, "type": "MEMO"}), 422, "invalid_request"
    )
    [detail] = envelope["details"]
    assert "'MEMO'" in detail["problem"] and detail["problem"].startswith("input tag")


@pytest.mark.parametrize(
    "body",
    [
        {"query": " ", "mode": "keyword", "limit": 1},
        {"query": "x", "mode": "keyword", "limit": 0},
        {"query": "x", "mode": "keyword", "limit": 1001},
        {"query": "x", "mode": "keyword", "limit": 1, "filter": {"reach": {"at": "nope"}}},
        {"query": "x", "mode": "keyword", "limit": 1, "filter": {"turns": {"first": 3, "last": 1}}},
    ],
)
async def test_fetch_contract_refusals_are_400(client: httpx.AsyncClient, body: dict[str, Any]) -> None:
    assert_envelope(await client.post("/v1/fetch", json=body), 400, "invalid_request")


@pytest.mark.parametrize(
    ("route", "body", "named"),
    [
        ("/v1/fetch", {"query": "\u200b", "mode": "keyword", "limit": 1}, "query"),
        ("/v1/recall", {"question": "\ufeff \u2060", "limit": 1}, "question"),
        ("/v1/store", {"type": "document", "body": {"text": "\u00ad"}}, "body"),
        ("/v1/store", {"type": "conversation", "turns": [{"role": "user", "text": "\u200c\u200d"}]}, "turns[0]"),
        ("/v1/store", {**LEARNING, "text": "\u200b\n"}, "learning"),
        ("/v1/get", {"ids": ["\u200b"]}, "ids[0]"),
        ("/v1/forget", {"ids": ["\ufeff"]}, "ids[0]"),
    ],
)
async def test_invisible_characters_alone_are_blank(
    client: httpx.AsyncClient, route: str, body: dict[str, Any], named: str
) -> None:
    envelope = assert_envelope(await client.post(route, json=body), 400, "invalid_request")
    assert named in envelope["message"] and "blank" in envelope["message"]


async def test_bad_json_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/fetch", content=b'{"query": ', headers={"content-type": "application/json"})
    envelope = assert_envelope(response, 422, "invalid_request")
    assert envelope["details"]


async def test_a_body_that_is_not_utf8_json_is_422(client: httpx.AsyncClient) -> None:
    headers = {"content-type": "application/json"}
    for encoding in ("utf-16", "utf-16-le", "utf-32"):
        response = await client.post("/v1/list", content='{"limit": 1}'.encode(encoding), headers=headers)
        envelope = assert_envelope(response, 422, "invalid_request")
        assert [d["field"] for d in envelope["details"]] == ["body"]
    bom = b"\xef\xbb\xbf" + b'{"limit": 1}'  # a UTF-8 byte order mark is ignored (RFC 8259)
    assert (await client.post("/v1/list", content=bom, headers=headers)).status_code == 200


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"type": False}, "input tag false found using 'type' does not match any of the expected tags"),
        ({"type": ["Doc"]}, "input tag [\"Doc\"] found using 'type' does not match any of the expected tags"),
        ({**LEARNING, "meta": {"observed_at": "2026-01-01"}}, "such as '2024-05-01T10:00:00Z'"),
        ({**LEARNING, "meta": {"observed_at": "0001-01-01T00:30:00+01:00"}}, "timestamp is out of range"),
    ],
)
async def test_a_422_quotes_values_as_sent_in_the_services_words(
    client: httpx.AsyncClient, body: dict[str, Any], problem: str
) -> None:
    envelope = assert_envelope(await client.post("/v1/store", json=body), 422, "invalid_request")
    [detail] = envelope["details"]
    assert detail["problem"].startswith(problem) or detail["problem"].endswith(problem), detail


@pytest.mark.parametrize("where", ["meta", "filter"])
async def test_a_reversed_turns_range_is_named_where_it_is(client: httpx.AsyncClient, where: str) -> None:
    turns = {"turns": {"first": 3, "last": 1}}
    body = {**LEARNING, "meta": turns} if where == "meta" else {"filter": turns, "limit": 1}
    envelope = assert_envelope(
        await client.post("/v1/store" if where == "meta" else "/v1/list", json=body), 400, "invalid_request"
    )
    assert envelope["message"] == f"invalid request: {where}.turns.first must not be greater than {where}.turns.last"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b'{"query": ', "the body is not valid json (expecting value at line 1 column 11)"),
        (b'\xef\xbb\xbf{"query": ', "the body is not valid json (expecting value at line 1 column 11)"),
        (b'{"limit": 1}\n{"limit": 2}', "the body is not valid json (extra data at line 2 column 1)"),
        (b'{"limit": 1,\n "x": tru}', "the body is not valid json (expecting value at line 2 column 7)"),
        (b'{"query": "\xff"}', "the body is not utf-8 (at byte 11)"),
        (b"[" * 100_000, "the body is nested too deep to read"),  # nesting, not a truncated body
        (b"[" * 5_000 + b"]" * 5_000, "the body is nested too deep to read"),
    ],
)
async def test_an_unreadable_body_says_why_and_where(client: httpx.AsyncClient, content: bytes, problem: str) -> None:
    response = await client.post("/v1/list", content=content, headers={"content-type": "application/json"})
    envelope = assert_envelope(response, 422, "invalid_request")
    assert envelope["message"] == f"invalid request: {problem}"
    assert envelope["details"] == [{"field": "body", "problem": problem}]


async def test_empty_body_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/fetch", content=b"", headers={"content-type": "application/json"})
    assert_envelope(response, 422, "invalid_request")


async def test_recall(client: httpx.AsyncClient) -> None:
    ids = await store_all(client)
    response = await client.post("/v1/recall", json={"question": "does the writer prefer tabs?", "limit": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["answer"].strip() and body["model"]
    assert 1 <= len(body["citations"]) <= 2
    assert body["citations"][0]["id"] == ids[0]
    assert no_nulls(body)


async def test_recall_answers_where_from_the_sentence_naming_a_place_and_cites_it(client: httpx.AsyncClient) -> None:
    texts = [
        "Remember: deploys happen on Thursdays only.",
        "The user prefers tabs over spaces.",
        "I moved to Lisbon in March 2024",
        "The team's standup is at nine.",
    ]
    items = [{"type": "learning", "text": t, "kind": "fact", "confidence": 0.9} for t in texts]
    stored = await client.post("/v1/store_many", json={"items": items})
    lisbon = stored.json()["receipts"][2]["id"]
    response = await client.post("/v1/recall", json={"question": "Where does the user live now?", "limit": 4})
    assert response.status_code == 200, response.text
    body = response.json()
    (cited,) = [c for c in body["citations"] if c["id"] == lisbon]
    number = body["citations"].index(cited) + 1
    assert body["answer"] == f'"I moved to Lisbon in March 2024" [{number}]'
    assert cited["snippet"] == "I moved to Lisbon in March 2024"
    assert body["model"] == "engram-extractive-4"


async def test_list_pages_and_ends(client: httpx.AsyncClient) -> None:
    ids = await store_all(client)
    first = (await client.post("/v1/list", json={"limit": 2})).json()
    assert [h["id"] for h in first["items"]] == ids[:2]
    second = (await client.post("/v1/list", json={"limit": 2, "cursor": first["next_cursor"]})).json()
    assert [h["id"] for h in second["items"]] == ids[2:]
    assert "next_cursor" not in second


async def test_get_order_and_reach(client: httpx.AsyncClient) -> None:
    ids = await store_all(client)
    response = await client.post("/v1/get", json={"ids": [ids[2], "bogus", ids[0]]})
    assert [h["id"] for h in response.json()["hits"]] == [ids[2], ids[0]]
    reach = {"at": "team:acme/agent:writer", "inherit": False}
    response = await client.post("/v1/get", json={"ids": ids, "reach": reach})
    assert [h["id"] for h in response.json()["hits"]] == [ids[0]]
    assert_envelope(await client.post("/v1/get", json={"ids": []}), 400, "invalid_request")
    assert_envelope(await client.post("/v1/get", json={"ids": ["a"] * 201}), 400, "invalid_request")


async def test_get_answers_when_each_item_was_stored_in_utc(client: httpx.AsyncClient) -> None:
    ids = await store_all(client)
    hits = (await client.post("/v1/get", json={"ids": ids})).json()["hits"]
    stamps = [hit["stored_at"] for hit in hits]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z", stamp) for stamp in stamps), stamps
    # One store_many is one transaction: its items were stored at one time, within the call.
    assert len(set(stamps)) == 1
    assert datetime.fromisoformat(stamps[0]) <= datetime.now(UTC)
    listed = (await client.post("/v1/list", json={"limit": 10})).json()["items"]
    assert [h["id"] for h in listed] == ids and not [h for h in listed if "stored_at" in h]


# Forget.


async def test_forget_by_ids_and_by_filter(client: httpx.AsyncClient) -> None:
    ids = await store_all(client)
    response = await client.post("/v1/forget", json={"ids": [ids[0], ids[0]]})
    assert response.json()["forgotten"] == 1
    response = await client.post("/v1/forget", json={"filter": {"thread_id": "t-9"}})
    assert response.json()["forgotten"] == 1
    remaining = (await client.post("/v1/list", json={"limit": 10})).json()["items"]
    assert [h["id"] for h in remaining] == [ids[1]]


async def test_a_text_body_with_a_null_uri_is_stored_as_the_text_body(client: httpx.AsyncClient) -> None:
    plain = await client.post("/v1/store", json={"type": "document", "body": {"text": "x"}})
    with_null = await client.post("/v1/store", json={"type": "document", "body": {"text": "x", "uri": None}})
    assert with_null.status_code == 200, with_null.text
    assert with_null.json() == {"id": plain.json()["id"], "replayed": True}


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"type": "document", "body": {"text": None}}, ["body.text"]),
        ({"type": "document", "body": {"text": None, "uri": None}}, ["body.text", "body.uri"]),  # neither
        ({"type": None, "text": "x", "kind": "fact", "confidence": 0.5}, ["type"]),
    ],
)
async def test_a_null_required_field_is_named_as_missing(
    client: httpx.AsyncClient, body: dict[str, Any], fields: list[str]
) -> None:
    envelope = assert_envelope(await client.post("/v1/store", json=body), 422, "invalid_request")
    assert envelope["details"] == [{"field": f, "problem": "field required (null means unset)"} for f in fields]


@pytest.mark.parametrize(
    "body", [{}, {"ids": ["a"], "filter": {"kinds": ["document"]}}, {"ids": None}, {"ids": None, "filter": None}]
)
async def test_forget_needs_exactly_one_target(client: httpx.AsyncClient, body: dict[str, Any]) -> None:
    assert_envelope(await client.post("/v1/forget", json=body), 422, "invalid_request")


async def test_a_null_forget_target_is_unset(client: httpx.AsyncClient) -> None:
    ids = await store_all(client)
    response = await client.post("/v1/forget", json={"ids": [ids[0]], "filter": None})
    assert response.status_code == 200 and response.json()["forgotten"] == 1
    response = await client.post("/v1/forget", json={"ids": None, "filter": {"kinds": ["document"]}})
    assert response.status_code == 200 and response.json()["forgotten"] == 1


@pytest.mark.parametrize("body", [{"ids": []}, {"ids": [" "]}, {"filter": {}}, {"filter": {"kinds": []}}])
async def test_forget_refuses_empty_targets_and_removes_nothing(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    await store_all(client)
    assert_envelope(await client.post("/v1/forget", json=body), 400, "invalid_request")
    assert len((await client.post("/v1/list", json={"limit": 10})).json()["items"]) == 3


async def test_forget_within(client: httpx.AsyncClient) -> None:
    ids = await store_all(client)
    reach = {"at": "team:acme", "inherit": False, "descendants": True}
    response = await client.post("/v1/forget_within", json={"ids": ids, "reach": reach})
    assert response.json()["forgotten"] == 1
    assert_envelope(await client.post("/v1/forget_within", json={"ids": ids}), 422, "invalid_request")


# Explore.


async def test_explore(client: httpx.AsyncClient) -> None:
    await store_all(client)
    response = await client.post("/v1/explore", json={"facet": "kind", "limit": 2})
    assert response.status_code == 200
    assert response.json() == {
        "facet": "kind",
        "buckets": [{"value": "conversation", "count": 1}, {"value": "document", "count": 1}],
        "total": 3,
        "missing": 0,
        "more_buckets": 1,
        "truncated": False,
    }
    assert_envelope(await client.post("/v1/explore", json={"facet": "colour", "limit": 2}), 422, "invalid_request")
    assert_envelope(await client.post("/v1/explore", json={"facet": "tag", "limit": 501}), 400, "invalid_request")
    assert_envelope(
        await client.post("/v1/explore", json={"facet": "tag", "limit": 5, "scan_limit": 50_001}),
        400,
        "invalid_request",
    )


# Routing, sizes, request ids.


async def test_unknown_route_is_404_envelope(client: httpx.AsyncClient) -> None:
    assert_envelope(await client.get("/v1/nothing"), 404, "not_found")
    assert_envelope(await client.post("/nothing/at/all", json={}), 404, "not_found")


async def test_a_trailing_slash_is_another_route(client: httpx.AsyncClient) -> None:
    """404 envelopes, not bodiless redirects to the route without the slash."""
    assert_envelope(await client.get("/v1/health/"), 404, "not_found")
    assert_envelope(await client.get("/v1/errors/"), 404, "not_found")
    assert_envelope(await client.post("/v1/store/", json=LEARNING), 404, "not_found")
    assert (await client.post("/v1/list", json={"limit": 1})).json() == {"items": []}


async def test_wrong_method_is_405_envelope(client: httpx.AsyncClient) -> None:
    assert_envelope(await client.post("/v1/health"), 405, "method_not_allowed")
    assert_envelope(await client.get("/v1/fetch"), 405, "method_not_allowed")


async def test_health_answers_head_with_its_status(client: httpx.AsyncClient) -> None:
    response = await client.head("/v1/health")
    assert response.status_code == 200 and response.content == b""


async def test_liveness_is_open_answers_head_and_nothing_else(make_client: ClientFactory) -> None:
    async with make_client(api_keys="a-key") as client:
        live = await client.get("/v1/health/live")
        assert live.status_code == 200 and live.json() == {"live": True}
        head = await client.head("/v1/health/live")
        assert head.status_code == 200 and head.content == b""
        assert_envelope(await client.post("/v1/health/live"), 401, "unauthorized")
        keyed = await client.post("/v1/health/live", headers={"Authorization": "Bearer a-key"})
        assert_envelope(keyed, 405, "method_not_allowed")


async def test_body_over_the_limit_is_413(make_client: ClientFactory) -> None:
    async with make_client(max_body_bytes=1_000) as client:
        big = {**LEARNING, "text": "x" * 2_000}
        assert_envelope(await client.post("/v1/store", json=big), 413, "payload_too_large")

        async def chunks() -> Any:
            for _ in range(5):
                yield b" " * 400  # streamed without a content-length

        response = await client.post("/v1/store", content=chunks(), headers={"content-type": "application/json"})
        assert_envelope(response, 413, "payload_too_large")
        assert (await client.post("/v1/list", json={"limit": 5})).json()["items"] == []


async def test_request_id_is_echoed_or_made(client: httpx.AsyncClient) -> None:
    echoed = await client.get("/v1/engine", headers={"X-Request-ID": "trace-42 abc"})
    assert echoed.headers["X-Request-ID"] == "trace-42 abc"
    too_long = await client.get("/v1/nowhere", headers={"X-Request-ID": "a" * 129})
    assert too_long.headers["X-Request-ID"] != "a" * 129
    assert too_long.json()["request_id"] == too_long.headers["X-Request-ID"]
    made = await client.get("/v1/health")
    assert len(made.headers["X-Request-ID"]) == 26


# The auth perimeter.


async def test_auth_perimeter(make_client: ClientFactory) -> None:
    async with make_client(api_keys="first-key, second-key") as client:
        missing = await client.get("/v1/engine")
        assert_envelope(missing, 401, "unauthorized")
        assert missing.headers["WWW-Authenticate"] == "Bearer"
        wrong = await client.get("/v1/engine", headers={"Authorization": "Bearer nope"})
        assert_envelope(wrong, 401, "unauthorized")
        assert "nope" not in wrong.text
        right = await client.get("/v1/engine", headers={"Authorization": "Bearer second-key"})
        assert right.status_code == 200
        assert (await client.get("/v1/health")).status_code == 200
        # 401 before anything: unknown routes, wrong methods, bad bodies.
        assert_envelope(await client.get("/v1/nowhere"), 401, "unauthorized")
        assert_envelope(await client.post("/v1/health"), 401, "unauthorized")
        assert_envelope(await client.post("/v1/fetch", content=b"{"), 401, "unauthorized")
        assert_envelope(await client.get("/openapi.json"), 401, "unauthorized")
        assert_envelope(await client.get("/docs"), 401, "unauthorized")
        document = await client.get("/openapi.json", headers={"Authorization": "Bearer first-key"})
        assert document.status_code == 200 and document.json()["openapi"].startswith("3.")
        # Two credentials, one of them right: a proxy and the service might each read another.
        twice = [("Authorization", "Bearer first-key"), ("Authorization", "Bearer nope")]
        assert_envelope(await client.get("/v1/engine", headers=twice), 401, "unauthorized")


async def test_with_cors_on_only_a_browser_preflight_passes_without_a_key(make_client: ClientFactory) -> None:
    """An OPTIONS request with no Origin is no preflight: CORS hands it to the routes, which
    answered it (405, 404) without a key, telling which routes exist."""
    async with make_client(api_keys="k", cors_origins="https://app.example") as client:
        asked = {"Access-Control-Request-Method": "POST"}
        assert_envelope(await client.options("/v1/store", headers=asked), 401, "unauthorized")
        assert_envelope(await client.options("/v1/nowhere", headers=asked), 401, "unauthorized")
        browser = await client.options("/v1/store", headers={**asked, "Origin": "https://app.example"})
        assert browser.status_code == 200 and browser.headers["Access-Control-Allow-Origin"] == "https://app.example"


async def test_what_a_request_repeats_in_a_message_is_bounded(client: httpx.AsyncClient) -> None:
    """A message quotes the request's path, key names and values; each is cut short, and the
    answer names at most a few problems (a 3 MB body of empty items answered 112 MB)."""
    long = "a" * 100_000
    for response in (
        await client.get(f"/v1/{long[:20_000]}"),  # httpx sends at most 64 KiB of URL
        await client.post("/v1/list", json={"limit": 1, "filter": {"reach": {"at": f"team:{long}"}}}),
        await client.post("/v1/list", json={"limit": 1, long: 1}),
    ):
        assert response.status_code in (400, 404, 422) and len(response.content) < 2_000, response.status_code
    many = await client.post("/v1/store_many", json={"items": [{"type": "document", "body": {}}] * 1_000})
    envelope = assert_envelope(many, 422, "invalid_request")
    assert len(envelope["details"]) == 20
    far_over = await client.post("/v1/store_many", json={"items": [{}] * 1_001})
    assert assert_envelope(far_over, 400, "invalid_request")["message"] == (
        "invalid request: items must hold 1..100 items, got 1001"
    )
    assert_envelope(await client.post("/v1/get", json={"ids": [1] * 2_001}), 400, "invalid_request")
    assert_envelope(await client.post("/v1/forget", json={"ids": [1] * 10_001}), 400, "invalid_request")


async def test_api_keys_file(make_client: ClientFactory, tmp_path: Any) -> None:
    keys = tmp_path / "keys"
    keys.write_text("# one key a line\nfile-key\n")
    async with make_client(api_keys_file=str(keys)) as client:
        assert (await client.get("/v1/engine", headers={"Authorization": "Bearer file-key"})).status_code == 200
        assert (await client.get("/v1/engine", headers={"Authorization": "Bearer # one key a line"})).status_code == 401


async def test_committed_openapi_matches_a_fresh_export(client: httpx.AsyncClient) -> None:
    from pathlib import Path

    from app.api.openapi import render

    fresh = render((await client.get("/openapi.json")).json())
    committed = (Path(__file__).parents[2] / "openapi.json").read_text()
    assert json.loads(committed) == json.loads(fresh), "openapi.json is stale: run `engram openapi > openapi.json`"
