"""Size limits come from settings: lowered through ``ENGRAM_*`` variables, they are what a live server enforces."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.live import LiveServer, document, learning, list_everything, live_server
from tests.support.scratch import scratch

pytestmark = pytest.mark.slow

LOWERED = {
    "ENGRAM_MAX_TEXT_CHARS": "40",
    "ENGRAM_MAX_QUERY_CHARS": "12",
    "ENGRAM_MAX_TAGS": "2",
    "ENGRAM_MAX_TAG_CHARS": "5",
    "ENGRAM_MAX_FIELD_CHARS": "8",
    "ENGRAM_MAX_TURNS": "2",
    "ENGRAM_MAX_ID_CHARS": "41",
    "ENGRAM_MAX_BODY_BYTES": "3000",
}


@pytest.fixture(scope="module")
def small() -> Iterator[LiveServer]:
    with scratch("limits") as tmp, live_server(tmp, env=LOWERED) as server:
        yield server


def turns(n: int) -> dict[str, Any]:
    return {"type": "conversation", "turns": [{"role": "user", "text": "hi"}] * n}


# (route, body at the limit, body one over it): the first is served, the second refused.
CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "text": ("/v1/store", document("t" * 40), document("t" * 41)),
    "title counts in the text": (
        "/v1/store",
        {**document("b" * 28), "title": "h" * 8},
        {**document("b" * 28), "title": "h" * 9},
    ),
    "evidence": ("/v1/store", {**learning("e"), "evidence": "v" * 40}, {**learning("e"), "evidence": "v" * 41}),
    "tags": ("/v1/store", document("tags", tags=["a", "b"]), document("tags", tags=["a", "b", "c"])),
    "tag length": ("/v1/store", document("tag", tags=["abcde"]), document("tag", tags=["abcdef"])),
    "meta field": ("/v1/store", document("field", repo="r" * 8), document("field", repo="r" * 9)),
    "source id": (
        "/v1/store",
        document("src", source={"kind": "file", "id": "s" * 8}),
        document("src", source={"kind": "file", "id": "s" * 9}),
    ),
    "mime": ("/v1/store", {**document("mime"), "mime": "m" * 8}, {**document("mime"), "mime": "m" * 9}),
    "turns": ("/v1/store", turns(2), turns(3)),
    "query": (
        "/v1/fetch",
        {"query": "q" * 12, "mode": "keyword", "limit": 1},
        {"query": "q" * 13, "mode": "keyword", "limit": 1},
    ),
    "question": ("/v1/recall", {"question": "q" * 12, "limit": 1}, {"question": "q" * 13, "limit": 1}),
    "id": ("/v1/get", {"ids": ["i" * 41]}, {"ids": ["i" * 42]}),
    "tags_any": (
        "/v1/list",
        {"limit": 1, "filter": {"tags_any": ["a", "b"]}},
        {"limit": 1, "filter": {"tags_any": ["a", "b", "c"]}},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_lowered_limit_is_enforced(small: LiveServer, case: str) -> None:
    path, at_limit, over = CASES[case]
    async with small.client() as client:
        served = await client.post(path, json=at_limit)
        assert served.status_code in (200, 201), served.text
        before = await list_everything(client)
        refused = await client.post(path, json=over)
        assert refused.status_code == 400, refused.text
        assert refused.json()["code"] == "invalid_request"
        assert await list_everything(client) == before


async def test_a_lowered_body_limit_is_enforced(small: LiveServer) -> None:
    batch = {"items": [document(f"item {n}") for n in range(100)]}
    assert len(json.dumps(batch, separators=(",", ":"))) > 3000
    async with small.client() as client:
        before = await list_everything(client)
        declared = await client.post("/v1/store_many", json=batch)
        assert declared.status_code == 413 and declared.json()["code"] == "payload_too_large"

        async def chunks() -> Any:  # no Content-Length: the limit holds for a streamed body too
            data = json.dumps(batch).encode()
            for start in range(0, len(data), 500):
                yield data[start : start + 500]

        streamed = await client.post("/v1/store_many", content=chunks(), headers={"Content-Type": "application/json"})
        assert streamed.status_code == 413 and streamed.json()["code"] == "payload_too_large"
        assert await list_everything(client) == before


async def test_the_default_server_is_not_bound_by_them(live: LiveServer) -> None:
    """The same requests over the lowered limits pass on a default server: the settings made the difference."""
    async with live.client() as client:
        for case, (path, _, over) in CASES.items():
            response = await client.post(path, json=over)
            assert response.status_code in (200, 201), f"{case}: {response.text}"
