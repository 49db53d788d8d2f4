"""A live ``engram serve`` with ENGRAM_LOG_FORMAT=json: every line it writes is one JSON object."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import httpx
import pytest

from tests.support.live import live_server
from tests.support.processes import ENGRAM, engram_env
from tests.support.scratch import scratch

pytestmark = pytest.mark.slow

BOOTSTRAP = "bootstrap-key-for-the-json-log-test-7c1e"
SECRET_TEXT = "the vault combination is purple-elephant-4417"
BAD_REQUEST_ID = "x" * 129  # one over the 128 characters a request id may have


def log_lines(text: str) -> list[dict[str, Any]]:
    """Every line of the server's output, each parsed as JSON (a line that is not fails the test)."""
    lines = [line for line in text.splitlines() if line.strip()]
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"a log line that is not JSON: {line[:200]}")
    return parsed


async def test_json_logs_with_an_access_line_per_request() -> None:
    with scratch("json-logs") as tmp:
        with live_server(tmp, env={"ENGRAM_LOG_FORMAT": "json"}, api_key=BOOTSTRAP) as server:
            async with server.client() as client:
                key_id, secret = await server.make_key("writer", "write", {"at": "team:ops"})
                held = {"authorization": f"Bearer {secret}"}
                item = {"type": "learning", "text": SECRET_TEXT, "kind": "fact", "confidence": 0.9}
                item["meta"] = {"namespace": "team:ops"}
                stored = await client.post("/v1/store", json=item, headers=held)
                assert stored.status_code == 201, stored.text
                replaced = await client.post(
                    "/v1/fetch",
                    json={"query": "vault combination", "mode": "keyword", "limit": 3},
                    headers={**held, "X-Request-ID": BAD_REQUEST_ID},
                )
                assert replaced.status_code == 200 and replaced.json()["hits"]
                kept = await client.get("/v1/engine", headers={"X-Request-ID": "trace-42"})
                async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as anonymous:
                    refused = await anonymous.get("/v1/engine")
                assert refused.status_code == 401
                scraped = await client.get("/metrics")
                assert scraped.status_code == 200 and "engram_http_requests_total" in scraped.text
        logs = server.logs()  # read after the server stopped: its shutdown lines too
    seen = {
        "key_id": key_id,
        "stored": stored.headers["x-request-id"],
        "replaced": replaced.headers["x-request-id"],
        "refused": refused.headers["x-request-id"],
    }
    assert kept.headers["x-request-id"] == "trace-42"

    lines = log_lines(logs)
    for line in lines:
        assert {"time", "level", "logger", "message"} <= set(line), line
        assert line["time"].endswith("+00:00") and line["level"] in ("debug", "info", "warning", "error")
    assert any(line["message"].startswith("listening on http://127.0.0.1:") for line in lines)
    access = {line["request_id"]: line for line in lines if line["logger"] == "engram.access"}

    stored = access[seen["stored"]]
    assert stored["method"] == "POST" and stored["route"] == "/v1/store" and stored["status"] == 201
    assert stored["key_id"] == seen["key_id"] and isinstance(stored["duration_ms"], float | int)
    assert "request_id_replaced" not in stored

    replaced = access[seen["replaced"]]
    assert replaced["request_id_replaced"] is True and replaced["route"] == "/v1/fetch"
    assert seen["replaced"] != BAD_REQUEST_ID
    assert access["trace-42"]["route"] == "/v1/engine" and "key_id" not in access["trace-42"]  # a configured key
    assert access[seen["refused"]]["status"] == 401 and "key_id" not in access[seen["refused"]]
    assert any(line["route"] == "/metrics" and line["status"] == 200 for line in access.values())

    assert SECRET_TEXT not in logs and "purple-elephant" not in logs
    assert BOOTSTRAP not in logs and BAD_REQUEST_ID not in logs


def test_a_refused_start_says_why_in_json() -> None:
    env = engram_env(log_format="json", max_tags="none", api_keys="not-to-be-repeated")
    result = subprocess.run([ENGRAM, "serve"], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    (line,) = log_lines(result.stdout + result.stderr)
    assert line["level"] == "error" and line["message"].startswith("configuration error: ENGRAM_MAX_TAGS")
    assert "not-to-be-repeated" not in result.stderr
