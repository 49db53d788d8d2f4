"""RESULTS.md's section on the concurrency runs (bench/concurrency.py): Engram beside LangGraph's async store
per operation and client count, and the workers and pool sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import runs
from bench.concurrency import KIND, OPERATIONS, PAIRS, TARGET_CLIENTS
from bench.load_report import OPERATION_TEXT

# What LangGraph runs beside each of Engram's operations.
LANGGRAPH_TEXT = {
    "langgraph_vector": "asearch (vector), default breadth",
    "langgraph_vector_equal": "asearch (vector) at equal recall",
    "langgraph_store": "aput",
}


def judged_against(case: dict[str, Any], operation: str) -> tuple[str, str | None]:
    """The LangGraph system an operation's row is judged against, and the one shown beside it; a run
    from before the equal-recall store is judged against LangGraph at its default."""
    _, _, judged, beside = PAIRS[operation]
    if judged not in case["systems"] and beside is not None:
        return beside, None
    return judged, beside


def latest_runs(out: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The latest full run with the comparison, and the latest with a workers sweep (often the same one)."""
    found = runs.of_kind(out, KIND)
    compared = next((run for run in reversed(found) if run.get("cases")), None)
    swept = next((run for run in reversed(found) if run.get("sweep")), None)
    return compared, swept


def section(out: Path) -> list[str]:
    compared, swept = latest_runs(out)
    return concurrency_lines(compared, swept) if compared else []


def _ratio(engram: dict[str, Any], langgraph: dict[str, Any]) -> float | None:
    return engram["per_s"] / langgraph["per_s"] if langgraph.get("per_s") else None


def _ms(figures: dict[str, Any], key: str) -> str:
    return f"{figures[key]:.1f}" if key in figures else "–"


def _cpu(figures: dict[str, Any], sides: tuple[str, ...]) -> str:
    """CPU milliseconds a request cost on each side, ``a / b / c``; "–" for a run from before they were read."""
    spent = figures.get("cpu_ms_per_request")
    return " / ".join(f"{spent[side]:.2f}" for side in sides) if spent else "–"


def _clients(count: int) -> str:
    return "1 client" if count == 1 else f"{count} clients"


def _machine(run: dict[str, Any]) -> str:
    machine = run["machine"]
    during = ", ".join(f"{c['group']} at {c['clients']}: {c['load_average'][0]}" for c in run.get("cases", []))
    return (
        f"**Machine: {machine['nproc']} cores** ({machine['cpu']}), load average (`uptime`) "
        f"{machine['load_average_start']} at the start, {machine.get('load_average_end', '?')} at the end"
        + (f"; the 1-minute figure after each case: {during}" if during else "")
        + ". The clients, the service, LangGraph and PostgreSQL share those cores."
    )


def concurrency_lines(compared: dict[str, Any], swept: dict[str, Any] | None = None) -> list[str]:
    """The comparison's table and its target; the sweep's table when there is one."""
    source = f", `{compared['source']}`" if "source" in compared else ""
    lines = [
        "## Concurrency: Engram beside LangGraph's async store",
        "",
        f"`{compared['command']}` ({compared['started_at']}{source}): {compared['n']:,} items in each system first, "
        f"ENGRAM_EMBEDDER={compared['embedder']} and the same encoder for LangGraph. Each system in turn runs that "
        "many closed-loop clients (each sends its next request when its last is answered): unmeasured requests "
        f"first ({compared['warmup']} or one a client, whichever is more), then {compared['requests']:,} timed "
        f"requests over {compared['rounds']} turn(s) in balanced order. A fetch is a page of {compared['page']} "
        "without a filter; LangGraph has no keyword search, so every fetch row sets its vector search beside "
        "Engram's mode. A store is one new item, the same items for both. Engram: "
        f"{compared['setup']['engram']}. LangGraph: {compared['setup']['langgraph']}; its store sends every call "
        "through one task that batches what concurrent callers queued, on one connection at a time.",
        "",
        _machine(compared),
        "",
        "Each row: requests per second and latency of each; then the CPU a request cost, in milliseconds, read "
        "from /proc over the timed requests: Engram's clients (the harness) / its service / PostgreSQL, and "
        "LangGraph in the harness (its clients, store and encoder) / PostgreSQL.",
        "",
        "| operation | clients | Engram req/s | p50 ms | p99 ms | LangGraph | req/s | p50 ms | p99 ms | "
        "Engram ÷ LangGraph req/s | LangGraph at its default breadth: req/s, p50 ms | "
        "Engram CPU ms: clients / service / PostgreSQL | LangGraph CPU ms: harness / PostgreSQL |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    verdicts = []
    failures = []
    for operation in OPERATIONS:
        group, engram_name, _, _ = PAIRS[operation]
        for case in (c for c in compared["cases"] if c["group"] == group):
            langgraph_name, beside_name = judged_against(case, operation)
            engram, langgraph = case["systems"][engram_name], case["systems"][langgraph_name]
            ratio = _ratio(engram, langgraph)
            shown = f"{ratio:.2f}×" if ratio is not None else "–"
            beside = case["systems"].get(beside_name) if beside_name else None
            default = f"{beside['per_s']:.0f}, {_ms(beside, 'p50')}" if beside else "–"
            lines.append(
                f"| {OPERATION_TEXT[operation]} | {case['clients']} | {engram['per_s']:.0f} | {_ms(engram, 'p50')} | "
                f"{_ms(engram, 'p99')} | {LANGGRAPH_TEXT[langgraph_name]} | {langgraph['per_s']:.0f} | "
                f"{_ms(langgraph, 'p50')} | {_ms(langgraph, 'p99')} | {shown} | {default} | "
                f"{_cpu(engram, ('harness', 'service', 'postgres'))} | {_cpu(langgraph, ('harness', 'postgres'))} |"
            )
            if case["clients"] == TARGET_CLIENTS and ratio is not None:
                met = "met" if ratio >= 1.0 else "**missed**"
                verdicts.append(f"{OPERATION_TEXT[operation]} {ratio:.2f}× ({met})")
            for name in (engram_name, langgraph_name, *([beside_name] if beside else [])):
                failures += [
                    f"{name} at {case['clients']}: {what} ×{count}"
                    for what, count in case["systems"][name]["failures"].items()
                ]
    lines.append("")
    equal = compared["setup"].get("equal_recall")
    if equal:
        reached = "" if equal["reached"] else " (its best; it never reached Engram's)"
        steps = ", ".join(f"{int(ef)} → {recall:.3f}" for ef, recall in equal["ladder"])
        lines += [
            f"Equal recall: over the first {equal['questions']} questions, Engram's vector search finds "
            f"{equal['engram_recall_at_10']:.3f} of the exact top ten; LangGraph's at `hnsw.ef_search` "
            f"{equal['ef_search']} finds {equal['recall_at_10']:.3f}{reached} (breadths tried: {steps}). Every fetch "
            "row is judged against LangGraph at that breadth, its default shown beside.",
            "",
        ]
    if verdicts:
        lines += [
            f"**Target: Engram's requests/s at {TARGET_CLIENTS} clients ≥ LangGraph's:** " + "; ".join(verdicts) + ".",
            "",
        ]
    lines += [f"Answers that were not 2xx (or raised): {'; '.join(sorted(set(failures))) if failures else 'none'}.", ""]
    indexed = [
        f"{_clients(case['clients'])} {', '.join(f'{s:g}' for s in case['untimed_after_turn_s']['engram_store'])} s"
        for case in compared["cases"]
        if case.get("untimed_after_turn_s", {}).get("engram_store")
    ]
    if indexed:
        lines += [
            "Engram answers a store once its item is written and its vector queued; the HNSW index takes it a "
            "moment later (LangGraph's put writes the index before it answers). After each Engram store turn, "
            "untimed, the index held every acknowledged vector within: " + "; ".join(indexed) + ".",
            "",
        ]
    opened = [
        f"{case['group']} at {case['clients']}: Engram {case['connections_open'].get('engram', 0)}, "
        f"LangGraph {case['connections_open'].get('langgraph', 0)}"
        for case in compared["cases"]
        if "connections_open" in case
    ]
    if opened:
        lines += ["Connections open after each case (`pg_stat_activity`): " + "; ".join(opened) + ".", ""]
    lines += shares_lines(compared)
    if swept:
        lines += sweep_lines(swept, machine=swept["started_at"] != compared["started_at"])
    return lines


def shares_lines(run: dict[str, Any]) -> list[str]:
    """Each side's share of the CPU an Engram request cost at TARGET_CLIENTS: what bounds its rate on these cores."""
    parts = []
    for operation in OPERATIONS:
        group, engram_name, _, _ = PAIRS[operation]
        for case in (c for c in run["cases"] if c["group"] == group and c["clients"] == TARGET_CLIENTS):
            spent = case["systems"][engram_name].get("cpu_ms_per_request")
            if spent:
                total = sum(spent.values())
                parts.append(
                    f"{OPERATION_TEXT[operation]} {total:.1f} ms: PostgreSQL {spent['postgres'] / total:.0%}, "
                    f"the service {spent['service'] / total:.0%}, the clients {spent['harness'] / total:.0%}"
                )
    if not parts:
        return []
    return [
        f"The CPU an Engram request cost in all at {TARGET_CLIENTS} clients, and each side's share: "
        + "; ".join(parts)
        + ". One service process needs at most cores × its share of a core, while PostgreSQL's share bounds "
        "the rate: [docs/tuning.md](../docs/tuning.md#processes-and-pooled-connections).",
        "",
    ]


def sweep_lines(run: dict[str, Any], *, machine: bool) -> list[str]:
    """The sweep's table; ``machine``: with its own machine line (a run of its own, not the comparison's)."""
    sweep = run["sweep"]
    configs = sweep["configs"]
    pools = sorted({c["pool"] for c in configs})
    workers = sorted({c["workers"] for c in configs})
    cell = {(c["workers"], c["pool"]): c for c in configs}
    best = max(configs, key=lambda c: c["per_s"])
    source = f", `{run['source']}`" if "source" in run else ""
    lines = [
        "### Processes and pool connections at 16 clients",
        "",
        f"`{run['command']}` ({run['started_at']}{source}), on Engram's database as the comparison left it: "
        f"{sweep['clients']} closed-loop clients spread evenly over k `engram serve` processes on the one database "
        "(each client keeps its process, as a keep-alive connection keeps a uvicorn worker; `engram serve` itself "
        f"runs one), {sweep['mix']}; {sweep['requests']:,} timed requests per configuration over "
        f"{sweep['rounds']} turn(s), the configurations in rotating order, each on fresh processes. Pool: "
        f"{sweep['pool_setting']} (the default, 10 + 10 overflow, opens up to 20). "
        "Each cell: requests per second (each turn's), p50 / p99 in milliseconds over every operation, and the CPU "
        "a request cost in milliseconds: the services together / PostgreSQL.",
        "",
    ]
    if machine:
        lines += [_machine(run), ""]
    lines += [
        "| processes (workers) | " + " | ".join(f"pool {p}" for p in pools) + " |",
        "| --- |" + " ---: |" * len(pools),
    ]
    for count in workers:
        cells = []
        for pool in pools:
            found = cell.get((count, pool))
            cells.append(
                f"**{found['per_s']:.0f}/s** {found['per_s_rounds']}, {_ms(found, 'p50')} / {_ms(found, 'p99')}, "
                f"CPU {_cpu(found, ('service', 'postgres'))}"
                if found
                else "–"
            )
        lines.append(f"| {count} | " + " | ".join(cells) + " |")
    failed = [f"{c['workers']}×{c['pool']}: {c['failures']}" for c in configs if c["failures"]]
    turns = [rate for c in configs for rate in c["per_s_rounds"]]
    lines += [
        "",
        f"Most requests/s: {best['workers']} process(es), pool {best['pool']}; every turn of every configuration "
        f"between {min(turns):.0f}/s and {max(turns):.0f}/s. Failures: {'; '.join(failed) if failed else 'none'}.",
        "",
    ]
    return lines
