"""The real ``engram serve``: start on the embedded database, serve, stop cleanly, keep the data."""

from __future__ import annotations

import httpx
import pytest

from tests.support.live import live_server
from tests.support.scratch import scratch

pytestmark = pytest.mark.slow

ITEMS = [
    {"type": "learning", "text": "the deploy window is friday afternoon", "kind": "fact", "confidence": 0.9},
    {"type": "document", "title": "Runbook", "body": {"text": "Restart the queue worker before deploying."}},
    {"type": "conversation", "turns": [{"role": "user", "text": "when do we deploy?"}]},
]


def test_serve_store_fetch_recall_forget_stop_and_restart() -> None:
    with scratch("serve") as tmp:
        with live_server(tmp, api_key=None) as server, httpx.Client(base_url=server.base_url, timeout=30) as client:
            stored = client.post("/v1/store_many", json={"items": ITEMS})
            assert "server" not in stored.headers  # which server and version answers is not said
            receipts = stored.json()["receipts"]
            ids = [r["id"] for r in receipts]
            assert [r["replayed"] for r in receipts] == [False, False, False]
            for mode in ("keyword", "vector", "hybrid"):
                page = client.post("/v1/fetch", json={"query": "when is the deploy?", "mode": mode, "limit": 3})
                assert page.status_code == 200, page.text
                assert page.json()["hits"], mode
            answer = client.post("/v1/recall", json={"question": "when is the deploy window?", "limit": 2})
            assert answer.json()["citations"][0]["id"] == ids[0]
            assert client.post("/v1/forget", json={"ids": [ids[2]]}).json()["forgotten"] == 1
        assert server.process.returncode == 0, server.logs()
        log = server.logs()
        assert "listening on http://127.0.0.1" in log and "embedded PostgreSQL" in log and "embedder bge-small" in log
        assert "engram: API keys none: every route is open" in log  # said, not left to be found out

        with live_server(tmp, api_key=None) as again, httpx.Client(base_url=again.base_url, timeout=30) as client:
            hits = client.post("/v1/get", json={"ids": ids}).json()["hits"]
            assert [h["id"] for h in hits] == ids[:2]
            page = client.post("/v1/fetch", json={"query": "queue worker", "mode": "keyword", "limit": 3}).json()
            assert [h["id"] for h in page["hits"]] == [ids[1]]
        assert again.process.returncode == 0, again.logs()
        assert "NOTICE" not in again.logs()  # psql's "extension already exists", printed at every restart before
