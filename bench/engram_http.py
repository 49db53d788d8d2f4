"""The system under test: a live ``engram serve``, called through real HTTP."""

from __future__ import annotations

from typing import Any

import httpx

from bench.corpus import CorpusItem


class EngramHttp:
    """Each method is one HTTP call; a non-2xx answer fails the run (a benchmark of errors is no benchmark)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def _post(self, route: str, body: dict[str, Any]) -> Any:
        response = await self._client.post(route, json=body)
        if response.status_code >= 300:
            raise RuntimeError(f"POST {route} answered {response.status_code}: {response.text[:300]}")
        return response.json()

    async def store_batch(self, batch: list[CorpusItem]) -> int:
        answer = await self._post("/v1/store_many", {"items": [item.wire for item in batch]})
        return sum(not r["replayed"] for r in answer["receipts"])

    async def fetch(self, query: str, mode: str, request_filter: dict[str, Any], limit: int = 10) -> list[str]:
        body = {"query": query, "mode": mode, "filter": request_filter, "limit": limit}
        return [hit["id"] for hit in (await self._post("/v1/fetch", body))["hits"]]

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

    async def floor(self) -> int:
        """``GET /v1/engine``: the perimeter, routing and JSON, no database: the HTTP floor."""
        response = await self._client.get("/v1/engine")
        response.raise_for_status()
        return response.status_code
