"""Where runs are kept, and which ones RESULTS.md is drawn from.

Every run writes one JSON file under ``runs/`` (ignored by git: a rerun never changes a tracked
file but the summary it regenerates), named by when it started, its sizes and its embedder. The
tree keeps the runs RESULTS.md was published from in ``results/`` (``n<N>[-<embedder>].json``,
each with its query plans beside it; ``python -m bench --publish RUN`` puts a run there).
RESULTS.md shows, for each size and embedder, the latest run of either; a smoke run (``--quick``)
is never drawn into it. A run of another harness (``python -m bench.concurrency``) says its
``kind`` in its file and its name, and is read by ``of_kind``.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

RUNS = "runs"
PUBLISHED = "results"


def run_name(started_at: str, sizes: list[int], embedder: str, *, quick: bool, kind: str | None = None) -> str:
    """``2026-12-05T051200Z-[<kind>-]n10000-n100000-wordllama[-quick]``: sortable by time, readable by eye."""
    stamp = datetime.strptime(started_at, "%Y-%m-%dT%H:%M:%SZ").strftime("%Y-%m-%dT%H%M%SZ")
    return "-".join(
        [stamp, *([kind] if kind else []), *(f"n{n}" for n in sizes), embedder, *(["quick"] if quick else [])]
    )


def write_run(path: Path, record: dict[str, Any]) -> None:
    """The run's one JSON file, written again as the run goes on (each size as it ends, then the growth)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


def run_record(command: str, started_at: str, *, quick: bool, results: list[dict[str, Any]]) -> dict[str, Any]:
    """A run's file: how it was started, and each size's results (each with its query plans)."""
    return {"command": command, "started_at": started_at, "quick": quick, "results": results}


def publish(run: Path, out: Path, default_embedder: str, sizes: list[int] | None = None) -> list[Path]:
    """Keep a full run in the tree: each of its sizes (or those of ``sizes``) as
    ``results/n<N>[-<embedder>].json`` (no suffix for the service's default embedder), its query plans
    beside it in ``-plans.txt``, a section a case. A smoke run or another harness's run is refused:
    RESULTS.md never draws from them."""
    record = json.loads(run.read_text())
    if record.get("quick") or "kind" in record:
        raise ValueError(f"{run.name} is a smoke run or another harness's: not published")
    measured = [result["n"] for result in record["results"]]
    missing = sorted(set(sizes or ()) - set(measured))
    if missing:
        raise ValueError(f"{run.name} measured N = {', '.join(map(str, measured))}, not {', '.join(map(str, missing))}")
    written = []
    for result in record["results"]:
        if sizes and result["n"] not in sizes:
            continue
        kept = dict(result)
        plans: dict[str, str] = kept.pop("plans", {})
        setting = kept["embedder"]["setting"]
        stem = f"n{kept['n']}" if setting == default_embedder else f"n{kept['n']}-{setting}"
        target = out / PUBLISHED / f"{stem}.json"
        write_run(target, kept)
        sections = "".join(f"== {case}\n{plan.rstrip()}\n\n" for case, plan in plans.items())
        (out / PUBLISHED / f"{stem}-plans.txt").write_text(sections)
        written.append(target)
    return written


def _published(directory: Path) -> list[dict[str, Any]]:
    """The tree's runs: one size each, its plans in a text file beside it."""
    found = []
    for path in sorted(directory.glob("n*.json")):
        result = json.loads(path.read_text())
        result["source"] = f"{PUBLISHED}/{path.name}"
        found.append(result)
    return found


def _made_here(directory: Path) -> list[dict[str, Any]]:
    """The runs under ``runs/``, smoke runs left out, each size with the file it came from."""
    found = []
    for path in sorted(directory.glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("quick") or "kind" in record:
            continue
        for result in record["results"]:
            found.append({**result, "source": f"{RUNS}/{path.name}"})
    return found


def latest(out: Path) -> list[dict[str, Any]]:
    """The latest run of each size and embedder, published or made here, ordered as the report reads them."""
    from bench.report import embedder_of

    chosen: dict[tuple[int, str], dict[str, Any]] = {}
    for result in _published(out / PUBLISHED) + _made_here(out / RUNS):
        key = (result["n"], embedder_of(result)["setting"])
        if key not in chosen or result["started_at"] > chosen[key]["started_at"]:
            chosen[key] = result
    return sorted(chosen.values(), key=lambda r: (r["n"], embedder_of(r)["setting"]))


def of_kind(out: Path, kind: str) -> list[dict[str, Any]]:
    """The full runs of another harness (``kind``), oldest first: the tree's ``results/<kind>-*.json``
    and those made here under ``runs/``, each with the file it came from."""
    found = []
    for directory, pattern in ((out / PUBLISHED, f"{kind}-*.json"), (out / RUNS, "*.json")):
        for path in sorted(directory.glob(pattern)):
            record = json.loads(path.read_text())
            if record.get("kind") == kind and not record.get("quick"):
                found.append({**record, "source": f"{directory.name}/{path.name}"})
    return sorted(found, key=lambda record: record["started_at"])
