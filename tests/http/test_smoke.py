"""A first pass over the wire: each route answers."""

from __future__ import annotations

import httpx


async def test_store_fetch_roundtrip(client: httpx.AsyncClient) -> None:
    item = {
        "type": "learning",
        "text": "prefers tabs over spaces",
        "kind": "preference",
        "confidence": 0.8,
        "meta": {"namespace": "team:acme/agent:writer", "tags": ["style"]},
    }
    first = await client.post("/v1/store", json=item)
    assert first.status_code == 201, first.text
    assert first.json() == {"id": "19fc22b957ecd5727c7e03dda8c2e1979528da36", "replayed": False}
    again = await client.post("/v1/store", json=item)
    assert again.status_code == 200
    assert again.json()["replayed"] is True
    page = await client.post("/v1/fetch", json={"query": "tabs", "mode": "hybrid", "limit": 5})
    assert page.status_code == 200, page.text
    hit = page.json()["hits"][0]
    assert hit["meta"] == {"namespace": "team:acme/agent:writer", "source": {"kind": "agent"}, "tags": ["style"]}
    assert hit["confidence"] == 0.8
    assert "X-Request-ID" in page.headers
