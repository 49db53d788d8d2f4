"""The concurrency harness (python -m bench.concurrency --quick) end to end: what it writes is whole and right.

Correctness only: no figure is judged. Every case must have run every system for every timed request,
answered only 2xx, and the table must show each operation at each client count beside LangGraph's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import runs
from bench.concurrency import (
    CLIENTS,
    GROUPS,
    KIND,
    OPERATIONS,
    QUICK_N,
    QUICK_RECALL_QUESTIONS,
    QUICK_REQUESTS,
    main,
)
from bench.concurrency_report import concurrency_lines, latest_runs
from bench.equal_recall import QUICK_LADDER
from bench.load_report import OPERATION_TEXT
from tests.support.scratch import scratch


@pytest.mark.slow
def test_the_quick_run_measures_every_operation_at_every_client_count_beside_langgraph() -> None:
    with scratch("concurrency") as out:
        argv = ["--quick", "--workers-sweep", "--sweep-workers", "1", "--sweep-workers", "2", "--sweep-pool", "5"]
        assert main([*argv, "--out", str(out)]) == 0
        (path,) = (out / runs.RUNS).glob("*.json")
        run = json.loads(path.read_text())
        report = path.with_suffix(".md").read_text()
        assert not (out / "RESULTS.md").exists(), "a smoke run leaves the page alone"
        assert latest_runs(out) == (None, None), "and is never drawn into it"

    assert path.name.endswith(f"-{KIND}-n{QUICK_N}-wordllama-quick.json")
    assert run["kind"] == KIND and run["quick"] and run["n"] == QUICK_N
    assert [(c["group"], c["clients"]) for c in run["cases"]] == [(g, c) for g in GROUPS for c in CLIENTS]
    for case in run["cases"]:
        assert list(case["systems"]) == list(GROUPS[case["group"]])
        for name, figures in case["systems"].items():
            assert figures["failures"] == {}, (name, case["clients"], figures["failures"])
            assert figures["count"] == QUICK_REQUESTS and figures["per_s"] > 0
            assert figures["p50"] <= figures["p99"]
            assert (
                sorted(figures["cpu_ms_per_request"]) == ["harness", "postgres", "service"]
                and figures["cpu_ms_per_request"]["postgres"] > 0
            )
            assert (figures["cpu_ms_per_request"]["service"] > 0) == name.startswith("engram")
        assert case["connections_open"]["engram"] > 0 and case["connections_open"]["langgraph"] > 0
    for case in run["cases"]:
        waits = case.get("untimed_after_turn_s", {})
        assert list(waits) == (["engram_store"] if case["group"] == "store" else [])

    configs = run["sweep"]["configs"]
    assert [(c["workers"], c["pool"]) for c in configs] == [(1, 5), (2, 5)]
    for config in configs:
        assert config["failures"] == {} and config["count"] == QUICK_REQUESTS
        assert sum(op["count"] for op in config["operations"].values()) == QUICK_REQUESTS
        assert config["cpu_ms_per_request"]["service"] > 0 and config["cpu_ms_per_request"]["postgres"] > 0

    table = [line for line in report.splitlines() if line.startswith("| ") and "---" not in line]
    assert table[0].startswith("| operation | clients | Engram req/s |")
    rows = [line.split(" | ")[:2] for line in table[1 : 1 + len(OPERATIONS) * len(CLIENTS)]]
    assert rows == [[f"| {OPERATION_TEXT[op]}", str(c)] for op in OPERATIONS for c in CLIENTS]
    for line in table[1 : 1 + len(rows)]:
        cells = line.strip("| ").split(" | ")
        assert cells[9].endswith("×"), "every row has its ratio"
        judged_equal = cells[0].startswith("fetch")
        assert ("at equal recall" in cells[5]) == judged_equal, "a fetch is judged against LangGraph at equal recall"
        assert (cells[10] != "–") == judged_equal, "with LangGraph at its default beside it"
        assert len(cells[11].split(" / ")) == 3 and len(cells[12].split(" / ")) == 2, "and each side's CPU"
    equal = run["setup"]["equal_recall"]
    assert equal["questions"] == QUICK_RECALL_QUESTIONS and equal["ef_search"] in QUICK_LADDER
    assert 0 < equal["engram_recall_at_10"] <= 1 and equal["ladder"][0][0] == QUICK_LADDER[0]
    assert equal["reached"] == (equal["recall_at_10"] >= equal["engram_recall_at_10"])
    assert f"LangGraph's at `hnsw.ef_search` {equal['ef_search']} finds" in report
    assert "**Target: Engram's requests/s at 16 clients ≥ LangGraph's:**" in report
    assert "Answers that were not 2xx (or raised): none." in report
    shares = next(line for line in report.splitlines() if line.startswith("The CPU an Engram request cost in all"))
    assert all(f"{OPERATION_TEXT[op]} " in shares for op in OPERATIONS) and shares.count("PostgreSQL ") == 4
    assert "| processes (workers) | pool 5 |" in report
    assert report.count("\n| 1 | **") == 1 and report.count("\n| 2 | **") == 1
    assert report == "\n".join(concurrency_lines(run, run))


def test_a_run_from_before_the_equal_recall_store_is_judged_against_langgraph_at_its_default() -> None:
    published = json.loads((Path(runs.__file__).parent / runs.PUBLISHED / f"{KIND}-n10000-wordllama.json").read_text())
    for case in published["cases"]:
        case["systems"].pop("langgraph_vector_equal", None)  # as a run made before it had none
    published["setup"].pop("equal_recall", None)
    lines = concurrency_lines(published)
    fetches = [line for line in lines if line.startswith("| fetch")]
    assert fetches and all("| asearch (vector), default breadth |" in line for line in fetches)
    assert not any(line.startswith("Equal recall:") for line in lines)
