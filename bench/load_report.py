"""RESULTS.md's section on the load run (bench/load.py): rates and latencies per case, and telemetry's cost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LOAD_RESULTS = "load.json"
OPERATION_TEXT = {
    "fetch_keyword": "fetch, keyword",
    "fetch_vector": "fetch, vector",
    "fetch_hybrid": "fetch, hybrid",
    "store": "store (one item)",
    "get": "get (5 ids)",
    "list": "list (a page of 20)",
    "forget": "forget (one id)",
}


def load_run(results_dir: Path) -> dict[str, Any] | None:
    path = results_dir / LOAD_RESULTS
    return json.loads(path.read_text()) if path.exists() else None


def _case_name(case: dict[str, Any]) -> str:
    replicas = "1 replica" if case["replicas"] == 1 else f"{case['replicas']} replicas"
    return f"{replicas}, {case['clients']} clients"


def _cell(figures: dict[str, Any]) -> str:
    if not figures.get("count"):
        return "–"
    return f"{figures['per_s']:.0f}/s, {figures['p50']:.1f} / {figures['p99']:.1f}"


def _failures(case: dict[str, Any]) -> str:
    failures = case["failures"]
    return ", ".join(f"{what} ×{count}" for what, count in sorted(failures.items())) if failures else "none"


def load_lines(run: dict[str, Any]) -> list[str]:
    machine = run["machine"]
    cases = run["cases"]
    mix = ", ".join(f"{op} {weight}" for op, weight in run["mix"].items())
    lines = [
        "## Under load: one replica and two",
        "",
        f"`{run['command']}` ({run['started_at']}): {run['n']:,} items stored first, "
        f"ENGRAM_EMBEDDER={run['embedder']}. Each case is that many closed-loop clients (each sends its next "
        "request when its last is answered), spread evenly over the replicas, every replica an `engram serve` "
        f"on the one database, drawing operations by weight ({mix}; a fetch is a page of 10 without a filter, "
        f"its question one of 200 per client), for {run['warmup_s']:g} s unmeasured and then "
        f"{run['duration_s']:g} s, each case {run['rounds']} time(s) in rotating order. Client: {run['client']}.",
        "",
        f"**Machine: {machine['nproc']} cores** ({machine['cpu']}), load average {machine['load_average_start']} at "
        f"the start, {machine.get('load_average_end', '?')} at the end. The clients, every replica and PostgreSQL "
        "share those two cores: a second replica adds a process, not a core.",
        "",
        "Each cell: requests per second, then p50 / p99 in milliseconds.",
        "",
        "| operation | " + " | ".join(_case_name(c) for c in cases) + " |",
        "| --- |" + " ---: |" * len(cases),
        "| **all** | " + " | ".join(f"**{c['per_s']:.0f}/s** (rounds: {c['per_s_rounds']})" for c in cases) + " |",
    ]
    for op, text in OPERATION_TEXT.items():
        lines.append(f"| {text} | " + " | ".join(_cell(c["operations"][op]) for c in cases) + " |")
    lines += ["| answers not 2xx | " + " | ".join(_failures(c) for c in cases) + " |", ""]
    lines += telemetry_lines(run.get("telemetry"))
    return lines


def telemetry_lines(telemetry: dict[str, Any] | None) -> list[str]:
    if not telemetry:
        return []
    routes = telemetry["routes"]
    variants = list(next(iter(routes.values())))
    lines = [
        "### What the per-request telemetry costs",
        "",
        "The service's own CPU time per request (every thread of its process, from /proc), median of "
        f"{telemetry['blocks']} blocks of {telemetry['requests_per_block']:,} requests at "
        f"{telemetry['concurrency']} at once, each variant a service of its own on the same database, taking turns "
        "block by block. `neither`: without the Observer middleware (`python -m bench.unobserved`: no metrics, no "
        "access line); `metrics`: the Observer with the access line off (ENGRAM_LOG_LEVEL=warning); "
        f"`access line`: {telemetry['access_log']}"
        + (f"; `tracing`: {telemetry['tracing']}" if telemetry.get("tracing") else "")
        + ". Δ: over the row above.",
        "",
        "| beside each request | " + " | ".join(f"{route}: CPU µs | Δ | p50 ms" for route in routes) + " |",
        "| --- |" + " ---: | ---: | ---: |" * len(routes),
    ]
    for i, name in enumerate(variants):
        cells = []
        for figures in routes.values():
            cpu = figures[name]["cpu_us_per_request"]
            delta = "–" if i == 0 else f"{cpu - figures[variants[i - 1]]['cpu_us_per_request']:+.0f}"
            cells.append(f"{cpu:.0f} | {delta} | {figures[name]['latency_ms']['p50']:.2f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines
