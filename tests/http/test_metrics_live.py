"""/metrics from a live ``engram serve``, in prometheus-client's multiprocess mode."""

from __future__ import annotations

import pytest

from tests.http.test_metrics import samples, value
from tests.support.live import live_server
from tests.support.scratch import scratch

pytestmark = pytest.mark.slow


async def test_multiprocess_mode_keeps_the_counts_in_its_directory() -> None:
    with scratch("multiproc") as tmp:
        shared = tmp / "prometheus"
        shared.mkdir()
        with live_server(tmp / "serve", env={"PROMETHEUS_MULTIPROC_DIR": str(shared)}) as server:
            async with server.client() as client:
                for _ in range(3):
                    assert (await client.get("/v1/engine")).status_code == 200
                scraped = await client.get("/metrics")
            assert scraped.status_code == 200
            seen = samples(scraped.text)
            assert value(seen, "engram_http_requests_total", method="GET", route="/v1/engine", status="200") >= 3
            assert value(seen, "engram_database_up") == 1
            assert any(shared.glob("counter_*.db")) and any(shared.glob("histogram_*.db"))
