"""The system under test: a live ``engram serve``, called through real HTTP.

The client is aiohttp, not httpx: the client's own Python is inside every figure and the
HTTP floor, and on these 2 shared cores httpx's (httpcore, anyio) was most of what the
bench put between Engram and its raw SQL. Measured against a live service at 100k,
interleaved, 400 keyword fetches each (bench/analysis.md, 2026-12-01): GET /v1/engine
p50 3.4 ms with httpx, 1.2 with aiohttp, 0.9 with a bare socket; keyword p50 22.3 / 19.5 /
18.1 ms. Bodies go out and come back through orjson, as a client that cares would send them.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.corpus import CorpusItem

JSON = {"Content-Type": "application/json"}


def http_session(base_url: str, timeout_s: float = 120, connections: int = 100) -> aiohttp.ClientSession:
    """One keep-alive session to the service, for the whole run, at most ``connections`` open at once."""
    return aiohttp.ClientSession(
        base_url=base_url,
        timeout=aiohttp.ClientTimeout(total=timeout_s),
        connector=aiohttp.TCPConnector(limit=connections),
    )


class EngramHttp:
    """Each method is one HTTP call; a non-2xx answer fails the run (a benchmark of errors is no benchmark)."""

    def __init__(self, session: aiohttp.ClientSession) -> None:
        self._session = session

    async def _post(self, route: str, body: dict[str, Any]) -> Any:
        async with self._session.post(route, data=orjson.dumps(body), headers=JSON) as response:
            payload = await response.read()
            if response.status >= 300:
                raise RuntimeError(f"POST {route} answered {response.status}: {payload[:300]!r}")
            return orjson.loads(payload)

    async def store_batch(self, batch: list[CorpusItem]) -> int:
        answer = await self._post("/v1/store_many", {"items": [item.wire for item in batch]})
        return sum(not r["replayed"] for r in answer["receipts"])

    async def store(self, item: CorpusItem) -> str:
        """``POST /v1/store``: one item, as an agent writes a memory; its id."""
        return str((await self._post("/v1/store", item.wire))["id"])

    async def fetch(self, query: str, mode: str, request_filter: dict[str, Any], limit: int = 10) -> list[str]:
        body = {"query": query, "mode": mode, "filter": request_filter, "limit": limit}
        return [hit["id"] for hit in (await self._post("/v1/fetch", body))["hits"]]

    async def copies_read(self, *, quiet_s: float = 0.5, timeout_s: float = 120) -> int:
        """Until the sketch copies the service reads in the background after a filter's first ask are
        there (app/engine/postgres/mirror.py): its ``/metrics`` count of them unchanged for ``quiet_s``.
        The count."""
        held, since, deadline = -1, time.monotonic(), time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            async with self._session.get("/metrics") as response:
                response.raise_for_status()
                text = await response.text()
            (now,) = (
                sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
                if sample.name == "engram_sketch_copies"
            )
            if now != held:
                held, since = int(now), time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                break
            await asyncio.sleep(0.1)
        return held

    async def recall(self, question: str, limit: int = 10) -> list[str]:
        answer = await self._post("/v1/recall", {"question": question, "limit": limit})
        return [c["id"] for c in answer["citations"]]

    async def list_page(self, cursor: str | None, limit: int = 100) -> tuple[list[str], str | None]:
        body: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            body["cursor"] = cursor
        page = await self._post("/v1/list", body)
        return [item["id"] for item in page["items"]], page.get("next_cursor")

    async def get(self, ids: list[str]) -> list[str]:
        return [hit["id"] for hit in (await self._post("/v1/get", {"ids": ids}))["hits"]]

    async def explore_tags(self, limit: int = 20) -> dict[str, Any]:
        return dict(await self._post("/v1/explore", {"facet": "tag", "limit": limit}))

    async def export_to(self, path: Path, *, include_vectors: bool = True, timeout_s: float = 3600) -> int:
        """``POST /v1/export`` streamed into ``path``; the bytes written."""
        body = orjson.dumps({"include_vectors": include_vectors})
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        written = 0
        async with self._session.post("/v1/export", data=body, headers=JSON, timeout=timeout) as response:
            if response.status >= 300:
                raise RuntimeError(f"POST /v1/export answered {response.status}: {(await response.read())[:300]!r}")
            with path.open("wb") as out:
                async for chunk in response.content.iter_chunked(1 << 20):
                    written += out.write(chunk)
        return written

    async def floor(self) -> int:
        """``GET /v1/engine``: the perimeter, routing and JSON, no database: the HTTP floor."""
        async with self._session.get("/v1/engine") as response:
            await response.read()
            if response.status >= 300:
                raise RuntimeError(f"GET /v1/engine answered {response.status}")
            return response.status
