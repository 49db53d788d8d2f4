"""Clients that vanish mid-request: no half-written batch, and the server keeps serving."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.live import LiveServer, fingerprint, learning

BOUND_S = 60.0


def batch(label: str, size: int = 100) -> list[dict[str, Any]]:
    # Long-ish texts so embedding the batch takes a moment to cancel into.
    filler = " ".join(f"word{n}" for n in range(300))
    return [learning(f"{label} item {n} {filler}") for n in range(size)]


async def present(client: httpx.AsyncClient, ids: list[str]) -> set[str]:
    """Which of ``ids`` are held, read in one statement (one snapshot)."""
    response = await client.post("/v1/get", json={"ids": ids})
    assert response.status_code == 200, response.text
    return {hit["id"] for hit in response.json()["hits"]}


async def assert_serving(client: httpx.AsyncClient) -> None:
    item = learning("still serving after a client vanished")
    stored = await client.post("/v1/store", json=item)
    assert stored.status_code in (200, 201), stored.text
    assert await present(client, [fingerprint(item)]) == {fingerprint(item)}


async def raw_request(live: LiveServer, head: bytes, body: bytes, *, read: bool) -> bytes:
    """Write bytes straight to the socket; close without reading unless ``read``."""
    url = urlsplit(live.base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    writer.write(head + body)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(65536), BOUND_S) if read else b""
    writer.close()
    await writer.wait_closed()
    return answer


def request_head(live: LiveServer, length: int) -> bytes:
    return (
        f"POST /v1/store_many HTTP/1.1\r\nHost: engram\r\nAuthorization: Bearer {live.api_key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


@pytest.mark.slow
async def test_half_a_body_then_close_writes_nothing(live: LiveServer) -> None:
    items = batch("half body", 20)
    ids = [fingerprint(item) for item in items]
    body = json.dumps({"items": items}).encode()
    for cut in (0, 1, len(body) // 2, len(body) - 1):
        await raw_request(live, request_head(live, len(body)), body[:cut], read=False)
    async with live.client() as client:
        await assert_serving(client)
        assert await present(client, ids) == set()
        # The same bytes sent whole are written whole: the cut, not the content, was refused.
        answer = await raw_request(live, request_head(live, len(body)), body, read=True)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert await present(client, ids) == set(ids)


@pytest.mark.slow
async def test_cancelled_store_many_is_all_or_nothing(live: LiveServer) -> None:
    batches: list[list[str]] = []
    async with live.client() as client:
        for attempt, delay in enumerate((0.0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4)):
            items = batch(f"cancelled {attempt}")
            batches.append([fingerprint(item) for item in items])
            # A separate client per attempt: cancelling drops its connection mid-request.
            async with live.client() as doomed:
                task = asyncio.create_task(doomed.post("/v1/store_many", json={"items": items}))
                await asyncio.sleep(delay)
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            held = await present(client, batches[-1])
            assert held in (set(), set(batches[-1])), f"attempt {attempt}: {len(held)} of 100 written"
        # Whatever the server was still doing has finished: every batch is still whole or absent.
        await assert_serving(client)
        for ids in batches:
            assert (await present(client, ids)) in (set(), set(ids))


@pytest.mark.slow
async def test_clients_that_never_read_their_answer(live: LiveServer) -> None:
    """Whole requests whose sockets close at once: the server may or may not have read them, never half."""
    batches = [batch(f"unread answer {n}", 10) for n in range(8)]
    for items in batches:
        body = json.dumps({"items": items}).encode()
        await raw_request(live, request_head(live, len(body)), body, read=False)
    async with live.client() as client:
        await assert_serving(client)
        for items in batches:
            ids = [fingerprint(i) for i in items]
            assert (await present(client, ids)) in (set(), set(ids))
