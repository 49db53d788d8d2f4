"""Health on a frozen database (app/engine/postgres/engine.py health): ``down`` within the documented bound,
liveness unaffected, and the frozen server left alone by the supervisor (it is not dead)."""

from __future__ import annotations

import time

import httpx
import psutil
import pytest

from app.engine.postgres.engine import HEALTH_TIMEOUT_S
from tests.support.live import live_server
from tests.support.scratch import scratch

pytestmark = pytest.mark.slow

# The documented bound is HEALTH_TIMEOUT_S; the margin covers the request's own way there and back.
MARGIN_S = 1.5


def test_a_frozen_database_is_reported_down_within_the_documented_bound() -> None:
    with scratch("frozen") as tmp, live_server(tmp) as server:
        pgdata = tmp / "data" / "pg"
        postmaster = psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))
        frozen = [postmaster, *postmaster.children(recursive=True)]
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            assert client.get("/v1/health").json() == {"state": "ok"}
            for process in frozen:
                process.suspend()  # SIGSTOP: the server accepts connections and answers nothing
            try:
                for method in ("GET", "HEAD", "GET"):
                    started = time.monotonic()
                    answer = client.request(method, "/v1/health")
                    took = time.monotonic() - started
                    assert answer.status_code == 503
                    assert took <= HEALTH_TIMEOUT_S + MARGIN_S, f"{method} took {took:.1f} s"
                    if method == "GET":
                        assert answer.json()["state"] == "down"
                assert client.get("/v1/health/live").status_code == 200
            finally:
                for process in frozen:
                    process.resume()
            assert client.get("/v1/health").json() == {"state": "ok"}
        restarted = int((pgdata / "postmaster.pid").read_text().split()[0]) != postmaster.pid
        assert not restarted, "a frozen server was restarted"
        assert "stopped running" not in server.logs()
