"""The load harness (python -m bench.load) end to end at a few requests: what it writes is whole and right.

Correctness only: no figure is judged, every case must have run, answered only 2xx, and reported
each operation and each telemetry variant.
"""

from __future__ import annotations

import json

import pytest

from bench.load import ACCESS, BARE, METRICS, OPERATIONS, TRACED, main
from bench.load_report import load_lines
from tests.support.scratch import scratch


@pytest.mark.slow
def test_the_load_harness_runs_every_case_and_variant_without_a_failure() -> None:
    with scratch("load") as out:
        argv = ["--n", "60", "--clients", "3", "--replicas", "1", "--replicas", "2", "--duration", "0.5"]
        argv += ["--warmup", "0", "--rounds", "1", "--max-requests", "60", "--cost-blocks", "1"]
        argv += ["--cost-requests", "16", "--out", str(out)]
        assert main(argv) == 0
        run = json.loads((out / "results" / "load.json").read_text())
        assert not (out / "RESULTS.md").exists(), "no benchmark runs beside it: the page is not written"

    assert [(c["replicas"], c["clients"]) for c in run["cases"]] == [(1, 3), (2, 3)]
    for case in run["cases"]:
        assert case["failures"] == {}, case["failures"]
        assert 0 < case["requests"] <= 60 and case["per_s"] > 0
        assert set(case["operations"]) == set(OPERATIONS)
        answered = sum(op["count"] for op in case["operations"].values())
        assert answered == case["requests"]
    routes = run["telemetry"]["routes"]
    assert set(routes) == {"GET /v1/engine", "POST /v1/fetch keyword"}
    for variants in routes.values():
        assert list(variants) == [BARE, METRICS, ACCESS, TRACED]  # tracing is installed with the dev extra
        assert all(v["cpu_us_per_request"] > 0 and v["latency_ms"]["count"] == 16 for v in variants.values())

    page = "\n".join(load_lines(run))
    assert "| operation | 1 replica, 3 clients | 2 replicas, 3 clients |" in page
    assert "| answers not 2xx | none | none |" in page
    assert f"| {TRACED} | " in page
