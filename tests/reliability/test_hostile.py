"""Hostile and odd input over real HTTP: a typed error or a correct answer, and refusals change nothing."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.support.live import LiveServer, document, fingerprint, learning, list_everything

pytestmark = pytest.mark.slow

# Text the SQL and tsquery parsers would read as syntax, were it ever spliced in.
SYNTAX = ["'", "\\", ":*", "&|!()", "%", "_", "' OR '1'='1", "'; DROP TABLE engram_items; --", "a:* & !b | (c", "<->"]
SYNTAX += ['"unclosed', '""', "\\'", "%_%", "$1", "$$", "E'\\x00'", "'||pg_sleep(5)||'", "/*", "*/", "--", "?"]
# Runs the text search parser keeps whole (an email, a file name, a path, a version), quoted as one operand.
SYNTAX += ["a@b.c' | 'd", "x.py':*", "/a/b\\' & !'c", "1.2'<->'3", "o'reilly.com\\"]

ODD = document(
    "The O'Reilly guide: 100% of coverage_rate, C:\\temp\\x and 5 % 3 = 2.",
    folder="/a/b",
    workspace="ws'1",
    tags=["it's", "100%", "a_b", "back\\slash"],
)
CORPUS = [
    ODD,
    learning("prefers tabs over spaces", namespace="team:acme", tags=["style"]),
    {
        "type": "conversation",
        "turns": [{"role": "user", "text": "where is the lighthouse?"}, {"role": "assistant", "text": "north"}],
        "meta": {"thread_id": "t-1"},
    },
    document("unicode: Ærøskøbing, 東京, مرحبا, 🦀, e\u0301, zero\u200bwidth, line\u2028sep, tab\tand\x01ctrl"),
    document("a" * 3000 + " one very long word"),
]


async def snapshot(client: httpx.AsyncClient) -> list[tuple[str, str, str]]:
    return sorted((i["id"], i["text"], json.dumps(i["meta"], sort_keys=True)) for i in await list_everything(client))


@pytest.fixture(scope="module")
async def corpus(live: LiveServer) -> list[str]:
    async with live.client() as client:
        response = await client.post("/v1/store_many", json={"items": CORPUS})
        assert response.status_code == 200, response.text
        return [r["id"] for r in response.json()["receipts"]]


@pytest.fixture
async def client(live: LiveServer, corpus: list[str]) -> Any:
    async with live.client() as c:
        yield c


def raw(body: bytes | str, content_type: str | None = "application/json") -> dict[str, Any]:
    content = body.encode() if isinstance(body, str) else body
    return {"content": content, "headers": {} if content_type is None else {"Content-Type": content_type}}


def big(n: int) -> str:
    return "x" * n


NESTED_ARRAYS = "[" * 100_000 + "]" * 100_000
NESTED_OBJECTS = '{"a":' * 100_000 + "1" + "}" * 100_000
GOOD_DOC = json.dumps(document("content type probe"))

# (route, request as httpx.post kwargs, expected status): every one is a typed refusal that writes nothing.
REFUSED: dict[str, tuple[str, dict[str, Any], int]] = {
    # NUL bytes and lone surrogates (PostgreSQL cannot store NUL; UTF-8 cannot encode a surrogate).
    "nul in text": ("/v1/store", {"json": document("a\x00b")}, 400),
    "nul in title": ("/v1/store", {"json": {**document("t"), "title": "x\x00"}}, 400),
    "nul in evidence": ("/v1/store", {"json": {**learning("t"), "evidence": "\x00"}}, 400),
    "nul in tag": ("/v1/store", {"json": document("t", tags=["ok", "b\x00d"])}, 400),
    "nul in turn": ("/v1/store", {"json": {"type": "conversation", "turns": [{"role": "user", "text": "\x00"}]}}, 400),
    "surrogate in text": ("/v1/store", raw('{"type":"document","body":{"text":"a\\ud800b"}}'), 400),
    "surrogate in meta": ("/v1/store", raw('{"type":"document","body":{"text":"a"},"meta":{"repo":"\\udfff"}}'), 400),
    "nul in batch item 2": (
        "/v1/store_many",
        {"json": {"items": [document("x1"), document("x2"), document("\x00")]}},
        400,
    ),
    "nul in query": ("/v1/fetch", {"json": {"query": "tabs\x00", "mode": "keyword", "limit": 3}}, 400),
    "surrogate in query": ("/v1/fetch", raw('{"query":"\\ud83d","mode":"hybrid","limit":3}'), 400),
    "nul in filter": ("/v1/list", {"json": {"limit": 3, "filter": {"workspace": "\x00"}}}, 400),
    "nul in question": ("/v1/recall", {"json": {"question": "why\x00", "limit": 3}}, 400),
    "nul in instructions": ("/v1/recall", {"json": {"question": "why", "limit": 3, "instructions": "\x00"}}, 400),
    "nul in get id": ("/v1/get", {"json": {"ids": ["abc\x00"]}}, 400),
    "nul in forget id": ("/v1/forget", {"json": {"ids": ["\x00"]}}, 400),
    "nul in forget filter": ("/v1/forget", {"json": {"filter": {"tags_any": ["style\x00"]}}}, 400),
    "nul in a key": ("/v1/store", raw('{"type":"learning","te\\u0000xt":"t","kind":"fact","confidence":0.5}'), 422),
    "invalid utf-8": ("/v1/fetch", raw(b'{"query":"\xff\xfe","mode":"keyword","limit":1}'), 422),
    # Very long strings and ids; thousands of tags.
    "text over the limit": ("/v1/store", {"json": document(big(200_001))}, 400),
    "query over the limit": ("/v1/fetch", {"json": {"query": big(4_001), "mode": "keyword", "limit": 1}}, 400),
    "id over the limit": ("/v1/get", {"json": {"ids": [big(129)]}}, 400),
    "huge id": ("/v1/forget", {"json": {"ids": ["0" * 1_000_000]}}, 400),
    "long tag": ("/v1/store", {"json": document("t", tags=[big(257)])}, 400),
    "long meta field": ("/v1/store", {"json": document("t", url=big(2_049))}, 400),
    "long evidence": ("/v1/store", {"json": {**learning("t"), "evidence": big(200_001)}}, 400),
    "long mime": ("/v1/store", {"json": {**document("t"), "mime": big(2_049)}}, 400),
    "long source id": ("/v1/store", {"json": document("t", source={"kind": "file", "id": big(2_049)})}, 400),
    "long tool name": ("/v1/store", {"json": document("t", tool_call={"name": big(2_049)})}, 400),
    "long namespace": ("/v1/store", {"json": document("t", namespace="team:" + big(10_000))}, 400),
    "thousands of tags": ("/v1/store", {"json": document("t", tags=[f"t{n}" for n in range(5_000)])}, 400),
    "thousands of tags_any": ("/v1/list", {"json": {"limit": 1, "filter": {"tags_any": ["t"] * 5_000}}}, 400),
    "too many turns": (
        "/v1/store",
        {"json": {"type": "conversation", "turns": [{"role": "user", "text": "hi"}] * 1_001}},
        400,
    ),
    "101 items": ("/v1/store_many", {"json": {"items": [document(f"n{n}") for n in range(101)]}}, 400),
    "201 ids": ("/v1/get", {"json": {"ids": ["a"] * 201}}, 400),
    "1001 forget ids": ("/v1/forget", {"json": {"ids": ["a"] * 1_001}}, 400),
    "huge cursor": ("/v1/list", {"json": {"limit": 1, "cursor": "A" * 1_000_000}}, 400),
    "forged cursor": ("/v1/list", {"json": {"limit": 1, "cursor": "eyJzIjoiIiwicCI6MH0.AAAA"}}, 400),
    "over the body limit": ("/v1/store", {"json": document(big(9 * 1024 * 1024))}, 413),
    # Deeply nested JSON.
    "nested arrays body": ("/v1/store", raw(NESTED_ARRAYS), 422),
    "nested objects body": ("/v1/store", raw(NESTED_OBJECTS), 422),
    "nested in tags": (
        "/v1/store",
        raw(f'{{"type":"document","body":{{"text":"x"}},"meta":{{"tags":{NESTED_ARRAYS}}}}}'),
        422,
    ),
    "shallower nesting": (
        "/v1/store",
        raw('{"type":"document","body":{"text":"x"},"title":' + "[" * 500 + "]" * 500 + "}"),
        422,
    ),
    # Numbers: huge, negative, fractional, non-finite, the wrong type.
    "huge limit": ("/v1/fetch", {"json": {"query": "tabs", "mode": "keyword", "limit": 10**30}}, 400),
    "limit 2^63": ("/v1/list", {"json": {"limit": 2**63}}, 400),
    "negative limit": ("/v1/list", {"json": {"limit": -1}}, 400),
    "zero limit": ("/v1/recall", {"json": {"question": "q", "limit": 0}}, 400),
    "limit 1e400": ("/v1/list", raw('{"limit":1e400}'), 422),
    "fractional limit": ("/v1/list", {"json": {"limit": 2.5}}, 422),
    "string limit": ("/v1/list", {"json": {"limit": "5"}}, 422),
    "boolean limit": ("/v1/list", {"json": {"limit": True}}, 422),
    "negative scan_limit": ("/v1/explore", {"json": {"facet": "tag", "limit": 5, "scan_limit": -3}}, 400),
    "huge explore limit": ("/v1/explore", {"json": {"facet": "tag", "limit": 10**12}}, 400),
    "negative confidence": ("/v1/store", {"json": {**learning("t"), "confidence": -0.1}}, 400),
    "NaN confidence": ("/v1/store", raw('{"type":"learning","text":"t","kind":"fact","confidence":NaN}'), 400),
    "infinite confidence": ("/v1/store", raw('{"type":"learning","text":"t","kind":"fact","confidence":1e400}'), 400),
    "negative turn": ("/v1/store", {"json": document("t", turns={"first": -1, "last": 2})}, 422),
    "turns beyond json integers": ("/v1/store", {"json": document("t", turns={"first": 2**70, "last": 2**70})}, 400),
    "turns filter beyond json integers": (
        "/v1/list",
        {"json": {"limit": 1, "filter": {"turns": {"first": 0, "last": 2**64}}}},
        400,
    ),
    # Wrong content types and empty bodies.
    "text/plain": ("/v1/store", raw(GOOD_DOC, "text/plain"), 422),
    "form": ("/v1/store", raw(GOOD_DOC, "application/x-www-form-urlencoded"), 422),
    "multipart": ("/v1/store", raw(GOOD_DOC, "multipart/form-data; boundary=x"), 422),
    "no content type": ("/v1/store", raw(GOOD_DOC, None), 422),
    "empty body": ("/v1/store", raw(""), 422),
    "whitespace body": ("/v1/store_many", raw("  \n"), 422),
    "null body": ("/v1/forget", raw("null"), 422),
    "array body": ("/v1/get", raw("[]"), 422),
    "empty object": ("/v1/fetch", raw("{}"), 422),
    "truncated json": ("/v1/store", raw(GOOD_DOC[:-3]), 422),
    "both forget keys": ("/v1/forget", {"json": {"ids": ["a"], "filter": {"kinds": ["document"]}}}, 422),
    "empty forget filter": ("/v1/forget", {"json": {"filter": {"kinds": []}}}, 400),
    "blank forget id": ("/v1/forget", {"json": {"ids": [" "]}}, 400),
    "unknown key": ("/v1/store", {"json": {**document("t"), "id": "mine"}}, 422),
    "sql in namespace": ("/v1/store", {"json": document("t", namespace="team:a'--")}, 400),
    "sql in reach": ("/v1/list", {"json": {"limit": 1, "filter": {"reach": {"at": "team:x' OR '1'='1"}}}}, 400),
    "uri body": ("/v1/store", {"json": {"type": "document", "body": {"uri": "file:///etc/passwd"}}}, 400),
}


@pytest.mark.parametrize("case", list(REFUSED))
async def test_refused_with_a_typed_error_and_nothing_changes(client: httpx.AsyncClient, case: str) -> None:
    path, request, status = REFUSED[case]
    before = await snapshot(client)
    response = await client.post(path, **request)
    assert response.status_code == status, response.text[:500]
    body = response.json()
    expected = "payload_too_large" if status == 413 else "invalid_request"
    assert body["code"] == expected and body["retryable"] is False, body
    assert body["request_id"] == response.headers["X-Request-ID"]
    assert await snapshot(client) == before


@pytest.mark.parametrize("query", SYNTAX)
@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
async def test_syntax_in_queries_is_only_text(client: httpx.AsyncClient, query: str, mode: str) -> None:
    before = await snapshot(client)
    response = await client.post("/v1/fetch", json={"query": query, "mode": mode, "limit": 10})
    if query.strip() == "":
        assert response.status_code == 400
        return
    assert response.status_code == 200, response.text
    hits = response.json()["hits"]
    if mode == "vector":
        assert len(hits) == len(CORPUS), "vector mode ranks every admitted item"
    recall = await client.post("/v1/recall", json={"question": query, "limit": 3})
    assert recall.status_code == 200, recall.text
    assert recall.json()["answer"].strip()
    assert await snapshot(client) == before


@pytest.mark.parametrize("query", ["O'Reilly", "Reilly:*", "!Reilly & (guide", "'Reilly'", "\\Reilly\\", "Reilly%"])
async def test_syntax_around_a_word_still_finds_it(client: httpx.AsyncClient, corpus: list[str], query: str) -> None:
    response = await client.post("/v1/fetch", json={"query": query, "mode": "keyword", "limit": 10})
    assert response.status_code == 200, response.text
    assert [h["id"] for h in response.json()["hits"]] == [corpus[0]]


FILTERS: list[tuple[dict[str, Any], int]] = [
    # (filter, how many of CORPUS it admits): wildcards and quotes are matched literally.
    ({"folder": "%"}, 0),
    ({"folder": "/a/_"}, 0),
    ({"folder": "/a/%"}, 0),
    ({"folder": "/a"}, 1),
    ({"folder": "/a/b/"}, 1),
    ({"file_path": "\\"}, 0),
    ({"workspace": "ws'1"}, 1),
    ({"workspace": "ws%"}, 0),
    ({"workspace": "' OR '1'='1"}, 0),
    ({"repo": "x'); DROP TABLE engram_items; --"}, 0),
    ({"tags_any": ["it's"]}, 1),
    ({"tags_any": ["100%"]}, 1),
    ({"tags_any": ["a_b"]}, 1),
    ({"tags_any": ["back\\slash"]}, 1),
    ({"tags_any": ["%"]}, 0),
    ({"tags_any": ["a%b", "_"]}, 0),
    ({"source_id": "%"}, 0),
    ({"thread_id": "t-1"}, 1),
    ({"tool_call": "' OR 1=1"}, 0),
    ({"workspace": big(100_000)}, 0),
    ({"tags_any": [big(100_000)]}, 0),
]


@pytest.mark.parametrize(("request_filter", "admitted"), FILTERS, ids=[json.dumps(f)[:40] for f, _ in FILTERS])
async def test_filter_values_match_literally(
    client: httpx.AsyncClient, request_filter: dict[str, Any], admitted: int
) -> None:
    listed = await list_everything(client, request_filter)
    assert len(listed) == admitted
    explored = await client.post("/v1/explore", json={"facet": "kind", "limit": 5, "filter": request_filter})
    assert explored.status_code == 200 and explored.json()["total"] == admitted
    before = await snapshot(client)
    forget = await client.post("/v1/forget", json={"filter": {**request_filter, "kinds": ["learning"]}})
    assert forget.status_code == 200 and forget.json()["forgotten"] == 0
    assert await snapshot(client) == before


async def test_sql_in_ids_reads_and_removes_nothing(client: httpx.AsyncClient) -> None:
    before = await snapshot(client)
    hostile = [s for s in SYNTAX if s.strip()]
    got = await client.post("/v1/get", json={"ids": hostile})
    assert got.status_code == 200 and got.json() == {"hits": []}
    forgot = await client.post("/v1/forget", json={"ids": hostile})
    assert forgot.status_code == 200 and forgot.json()["forgotten"] == 0
    within = await client.post("/v1/forget_within", json={"ids": hostile, "reach": {"at": "root", "descendants": True}})
    assert within.status_code == 200 and within.json()["forgotten"] == 0
    assert await snapshot(client) == before


async def test_odd_text_reads_back_exactly(client: httpx.AsyncClient, corpus: list[str]) -> None:
    got = await client.post("/v1/get", json={"ids": corpus})
    assert got.status_code == 200
    texts = [h["text"] for h in got.json()["hits"]]
    assert texts[0] == ODD["body"]["text"]
    assert texts[3] == CORPUS[3]["body"]["text"]
    assert got.json()["hits"][0]["meta"]["tags"] == ODD["meta"]["tags"]
    assert [fingerprint(item) for item in CORPUS] == corpus


async def test_items_at_every_limit_are_accepted(client: httpx.AsyncClient) -> None:
    item = document(big(200_000 - 10) + " at limit", tags=[f"{n:03d}" + big(253) for n in range(256)], url=big(2_048))
    response = await client.post("/v1/store", json=item)
    assert response.status_code == 201, response.text[:300]
    explored = await client.post("/v1/explore", json={"facet": "tag", "limit": 500})
    assert explored.status_code == 200 and explored.json()["more_buckets"] == 0
    forgot = await client.post("/v1/forget", json={"ids": [response.json()["id"]]})
    assert forgot.json()["forgotten"] == 1


async def test_request_ids_that_do_not_fit_are_replaced(client: httpx.AsyncClient) -> None:
    for given in ["x" * 129, "é", "a\tb"]:
        response = await client.get("/v1/engine", headers={"X-Request-ID": given.encode("utf-8")})
        assert response.status_code == 200
        assert response.headers["X-Request-ID"] not in (given, "")


async def test_a_refused_batch_names_its_item_and_writes_none(client: httpx.AsyncClient) -> None:
    before = await snapshot(client)
    items = [document("fine one"), document("fine two"), document("bad \x00 three"), document("fine four")]
    response = await client.post("/v1/store_many", json={"items": items})
    assert response.status_code == 400
    assert response.json()["message"].startswith("invalid request: items[2]")
    assert await snapshot(client) == before
