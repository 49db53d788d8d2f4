"""The load mode for large N (bench/bulk.py, bench/loads.py): the corpus as an export dump read by
``engram import``, Engram measured alone, its resident memory and PostgreSQL's reported; the report
without raw SQL or LangGraph; the exact truth ranked a block of queries at a time (bench/truth.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.contract.items import ITEM_ADAPTER
from app.contract.meta import Filter
from app.contract.transfer import Checksum, ImportedLine, TrailerLine, read_line
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.postgres.engine import PostgresEngine
from bench import loads, rawsql, truth
from bench.__main__ import main
from bench.corpus import build_corpus, build_queries
from bench.importing import build_memory_mb, corpus_dump
from bench.loads import IMPORT_FROM, load_for
from bench.report import growth_ratios, table_for, targets
from bench.truth import ExactNeighbours
from tests.support.scratch import scratch


def test_a_size_is_loaded_by_import_from_a_million_unless_asked_otherwise() -> None:
    assert IMPORT_FROM == 1_000_000
    assert load_for(100_000, None) == "ingest"
    assert load_for(1_000_000, None) == "import"
    assert load_for(500, "import") == "import"
    assert load_for(1_000_000, "ingest") == "ingest"


def test_the_corpus_dump_is_the_export_format_each_line_its_items_fingerprint_then_a_trailer_that_verifies(
    tmp_path: Path,
) -> None:
    corpus = build_corpus(40, seed=3)
    dump = tmp_path / "corpus.ndjson"
    assert corpus_dump(corpus, dump) == dump.stat().st_size
    *items, last = dump.read_bytes().splitlines(keepends=True)
    checksum = Checksum()
    for line, expected in zip(items, corpus, strict=True):
        read = read_line(line)  # refuses a line whose id is not its item's fingerprint
        assert isinstance(read, ImportedLine) and read.vector is None
        assert read.item.fingerprint() == expected.id
        checksum.add(line)
    trailer = read_line(last)
    assert isinstance(trailer, TrailerLine)
    assert (trailer.count, trailer.sha256) == (len(corpus), checksum.sha256)


async def test_the_exact_truth_ranked_a_block_at_a_time_is_each_query_ranked_alone(
    pg_engine: PostgresEngine, database_url: str, embedder: WordLlamaEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = build_corpus(300, seed=5)
    items = [ITEM_ADAPTER.validate_python(c.wire).checked() for c in corpus]
    for start in range(0, len(items), 100):
        await pg_engine.store_many(items[start : start + 100])
    queries = build_queries(11, seed=6)
    vectors = await embedder.embed_queries(queries.questions)
    filters = [Filter.model_validate({"tags_any": [tag]}) for tag in queries.tags]
    connection = await rawsql.connect(database_url)
    try:
        exact = await ExactNeighbours.load(connection, embedder.name)
        alone = [await exact.nearest(v, f) for v, f in zip(vectors, filters, strict=True)]
        monkeypatch.setattr(truth, "BLOCK", 4)  # blocks of 4, 4 and 3
        blocked = await exact.nearest_many(vectors, filters)
        monkeypatch.setattr(truth, "LOAD_STEP", 7)  # read back 7 rows a step: the same vectors in the same order
        again = await ExactNeighbours.load(connection, embedder.name)
        assert await again.nearest_many(vectors, filters) == blocked
    finally:
        await connection.close()
    assert blocked == alone
    tags = {c.id: c.tags for c in corpus}
    assert all(ids and all(tag in tags[i] for i in ids) for ids, tag in zip(blocked, queries.tags, strict=True))


def figures(p50: float) -> dict[str, float]:
    return {"count": 200, "p50": p50, "p95": p50 * 2, "p99": p50 * 3, "mean": p50}


def imported_run(n: int, fetch_p50: float) -> dict[str, Any]:
    """A run loaded by ``engram import``: Engram's figures only, its load and the memory at its end."""
    good = {"recall_at_10": 0.97, "mean_rows": 10.0, "short_pages": 0, "queries": 200}
    cases = {
        f"{m}/{v}": figures(fetch_p50) for m in ("keyword", "vector", "hybrid") for v in ("none", "tag", "subtree")
    }
    return {
        "n": n,
        "queries": 200,
        "load": "import",
        "started_at": "2026-12-05T11:00:00Z",
        "duration_s": 3_000.0,
        "embedder": {"setting": "wordllama", "name": "wordllama-l2-supercat-256", "dimension": 256},
        "embed_query_ms": figures(0.05),
        "machine": {"load_average_start": [1.0], "load_average_end": [1.0]},
        "engram": {
            "load": {"items": n, "seconds": 1_250.0, "acknowledged_s": 1_249.0, "rate": n / 1_250.0, "dump_mb": 480.0},
            "fetch": cases,
            "floor": figures(0.4),
            "floor_between_fetches": figures(0.5),
            "recall": figures(fetch_p50),
        },
        "quality": {
            "engram": {f"vector/{v}": good for v in ("none", "tag", "subtree")},
            "exact_scan_ms": figures(20.0),
            "filter_matches": {"tag": figures(90_000), "subtree": figures(60_000)},
        },
        "memory": {
            "service_rss_mib": 410.0,
            "service_peak_rss_mib": 650.0,
            "postgres_rss_mib": 9_000.0,
            "postgres_pss_mib": 2_600.0,
            "postgres_processes": 19,
        },
    }


def test_a_million_loaded_by_import_is_judged_on_the_absolute_targets_and_never_against_absent_baselines() -> None:
    run = imported_run(1_000_000, 8.0)
    rows = {t: (m, ok) for t, m, ok in targets(run, [])}
    assert not [t for t in rows if "raw" in t or "LangGraph" in t or "store_many" in t or "encoder" in t]
    assert rows["load by `engram import` (Engram alone; not a target)"] == ("800 items/s (1,000,000 in 20.8 min)", None)
    assert rows["vector/none p50 ≤ 12 ms (target is at 1M)"] == ("8.00 ms", True)
    assert rows["hybrid/none p50 ≤ 20 ms (target is at 1M)"] == ("8.00 ms", True)
    assert rows["keyword p95 ≤ 15 ms at 100k, ≤ 40 ms at 1M"][1] is True
    assert rows["filtered vector/subtree p95 ≤ 40 ms (target is at 1M)"] == ("16.00 ms", True)
    assert rows["filtered vector (tag) full pages, recall@10 ≥ 0.95"] == ("recall 0.970, 0 short of 200", True)
    memory, met = rows["resident memory of the service and of PostgreSQL reported (at 1M)"]
    assert met is True
    assert memory.startswith("service 410 MiB (peak 650), PostgreSQL 2,600 MiB PSS over 19 processes")
    assert rows["the whole run at 1M (not a target; docs/benchmarks.md#one-million-items---load-import)"] == (
        "50.0 min",
        None,
    )
    # At 1M hybrid has its own bound (20 ms); the ratio to vector is a 100k target, shown for information.
    assert rows["hybrid/tag p50 ≤ 1.3× Engram's vector/tag p50 (target is at 100k)"] == ("1.00× (8.00 ms)", None)

    at_100k = {t for t, _, _ in targets(imported_run(100_000, 8.0), [])}
    assert "the whole run at 100k within 20 minutes" not in at_100k, "a bound on the run of all three systems"

    slow = imported_run(1_000_000, 13.0)
    assert dict((t, ok) for t, _, ok in targets(slow, []))["vector/none p50 ≤ 12 ms (target is at 1M)"] is False


def test_the_tables_of_a_run_loaded_by_import_have_engrams_columns_only_its_load_and_its_memory() -> None:
    page = "\n".join(table_for(imported_run(1_000_000, 8.0), []))
    assert "### Load (`engram import`, Engram alone)" in page
    assert "| `engram import FILE` | 800 | 1,000,000 | 1250.0 | 1.0 | 480 |" in page
    assert "### Ingest" not in page and "raw SQL p50" not in page and "LangGraph p50" not in page
    assert "raw SQL recall@10" not in page
    assert "| case | Engram p50 | p95 | p99 |" in page
    assert "| vector, no filter | 8.00 | 16.00 | 24.00 |" in page
    assert "| vector, no filter | 0.970 | 10.00 | 0 |" in page
    assert "Resident memory at the end of the run (bench/memory.py): service 410 MiB (peak 650)" in page


@pytest.mark.slow
def test_a_run_loaded_by_import_measures_engram_alone_and_reports_the_memory_of_the_service_and_postgresql() -> None:
    with scratch("bench-import") as out:
        argv = ["--n", "300", "--queries", "20", "--load", "import", "--embedder", "wordllama", "--out", str(out)]
        assert main(argv) == 0
        [path] = (out / "runs").glob("*.json")
        [run] = json.loads(path.read_text())["results"]
        page = (out / "RESULTS.md").read_text()

    assert run["load"] == "import"
    assert not {"raw", "langgraph", "langgraph_wide", "encoder", "equal_recall", "proposals"} & set(run)
    load = run["engram"]["load"]
    assert load["items"] == 300 and load["rate"] > 0 and load["dump_mb"] > 0
    assert set(run["engram"]["fetch"]) == {
        f"{m}/{v}" for m in ("keyword", "vector", "hybrid") for v in ("none", "tag", "subtree")
    }
    assert all(case["count"] == 20 for case in run["engram"]["fetch"].values())
    for operation in ("recall", "list_first", "list_deep", "get_100", "explore_tag"):
        assert run["engram"][operation]["count"] > 0
    assert set(run["quality"]["engram"]) == {"vector/none", "vector/tag", "vector/subtree"}
    assert all(q["recall_at_10"] is not None for q in run["quality"]["engram"].values())
    memory = run["memory"]
    assert memory["service_rss_mib"] > 0 and memory["service_peak_rss_mib"] >= memory["service_rss_mib"]
    assert memory["postgres_processes"] >= 2 and 0 < memory["postgres_pss_mib"] <= memory["postgres_rss_mib"]
    assert {"dump", "load", "settle", "fetch", "exact truth"} <= set(run["phases_s"])
    assert "### Load (`engram import`, Engram alone)" in page
    assert "| case | Engram p50 | p95 | p99 |" in page
    assert "Resident memory at the end of the run (bench/memory.py): service" in page


@pytest.mark.slow
async def test_a_size_ingested_and_one_ten_times_larger_imported_are_asked_in_turn_for_the_growth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--n 100000 --n 1000000`` in small: the smaller size ingested beside its baselines, the larger loaded
    by import (the threshold lowered to it), then both services asked in turn."""
    from bench.__main__ import measure_sizes

    monkeypatch.setattr(loads, "IMPORT_FROM", 2_000)
    with scratch("bench-growth") as out:
        _, results = await measure_sizes([200, 2_000], 20, 7, ["wordllama"], out / "runs", "test", quick=True)
    small, large = results
    assert "load" not in small and {"raw", "langgraph"} <= set(small)
    assert large["load"] == "import" and "raw" not in large
    assert large["growth"]["sizes"] == [200, 2_000]
    assert {"vector/none", "hybrid/subtree", "list_deep", "explore_tag"} <= set(growth_ratios(large))
    rows = {t: (m, ok) for t, m, ok in targets(large, results)}
    measured, _ = rows["every p50 grows ≤ 2× from 200"]
    assert "asked in turn" in measured


def test_an_import_is_given_the_memory_to_build_its_whole_graph_never_below_the_default() -> None:
    assert build_memory_mb(100_000) == 1_024
    assert build_memory_mb(1_000_000) == 1_240
