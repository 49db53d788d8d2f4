"""RESULTS.md's generated parts (bench/report.py): the growth target judged on the sizes asked in turn when a
run has them, and the table of every target at every size that opens the page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.engine.context import without_roles
from bench import runs
from bench.__main__ import main as bench_main
from bench.corpus import build_corpus
from bench.equal_recall import breadth_for
from bench.report import (
    LEGACY_EMBEDDER,
    by_embedder,
    comparison_lines,
    cpu_lines,
    default_embedder,
    embedder_of,
    equal_breadth_lines,
    equal_recall_lines,
    equal_recall_summary,
    glance_lines,
    growth_lines,
    growth_ratios,
    machine_text,
    rescoring_text,
    targets,
)
from bench.run import MODES, VARIANTS, EncoderAlone, as_the_service_embeds
from bench.truth import recall_at_10

BENCH = Path(__file__).resolve().parents[2] / "bench"
VARIANT_NAMES = ("none", "tag", "subtree")


def figures(p50: float) -> dict[str, float]:
    return {"count": 200, "p50": p50, "p95": p50 * 2, "p99": p50 * 3, "mean": p50}


RUN = {
    "n": 100_000,
    "growth": {
        "sizes": [10_000, 100_000],
        "block": 10,
        "started_at": "2026-12-03T07:00:00Z",
        "vector/none": {"10000": figures(2.0), "100000": figures(4.2)},
        "explore_tag": {"10000": figures(1.0), "100000": figures(1.1)},
    },
}


def test_growth_is_each_p50_at_the_larger_size_over_the_smaller() -> None:
    assert growth_ratios(RUN) == {"vector/none": 2.1, "explore_tag": 1.1}
    assert growth_ratios({"n": 100_000}) == {}


def test_the_growth_table_has_a_row_per_operation() -> None:
    lines = growth_lines(RUN)
    assert lines[0] == "### Growth from 10,000 (both services asked in turn)"
    assert "| vector/none | 2.00 | 4.00 | 4.20 | 8.40 | 2.10× |" in lines
    assert "| explore_tag | 1.00 | 2.00 | 1.10 | 2.20 | 1.10× |" in lines
    assert growth_lines({"n": 100_000}) == []


def test_the_glance_table_holds_every_target_of_every_size_the_issue_names_one_table_per_embedder() -> None:
    groups = by_embedder(runs.latest(BENCH))
    assert list(groups) == sorted(groups, key=lambda setting: (setting != default_embedder(), setting))
    for setting, group in groups.items():
        assert {embedder_of(r)["setting"] for r in group} == {setting}
        named = sorted((r for r in group if r["n"] >= 10_000), key=lambda r: -r["n"]) or group
        lines = glance_lines(group)
        assert lines[0].endswith(
            f", {setting} ({embedder_of(named[0])['name']}, {embedder_of(named[0])['dimension']} dimensions)"
        )
        assert lines[2] == "| target | " + " | ".join(f"N = {r['n']:,}" for r in named) + " |"
        rows = {line.split(" | ")[0].removeprefix("| "): line for line in lines if line.startswith("| ")}
        for column, run in enumerate(named, start=1):
            for target, measured, ok in targets(run, group):
                cell = rows[target].removesuffix(" |").split(" | ")[column]
                assert cell.startswith(measured)
                assert cell.endswith({None: measured, True: ", met", False: ", **missed**"}[ok])


def test_a_run_that_names_no_embedder_was_wordllamas_and_runs_are_named_by_time_sizes_and_embedder() -> None:
    assert embedder_of({"n": 500}) == LEGACY_EMBEDDER
    assert embedder_of({"n": 500, "embedder": {"setting": "minilm", "name": "m", "dimension": 384}})["dimension"] == 384
    name = runs.run_name("2026-12-05T05:12:00Z", [10_000, 100_000], "wordllama", quick=False)
    assert name == "2026-12-05T051200Z-n10000-n100000-wordllama"
    assert runs.run_name("2026-12-05T05:12:00Z", [500], "wordllama", quick=True).endswith("-n500-wordllama-quick")


def run_with(setting: str, n: int, ingest: dict[str, float], fetch_p50: float, encode_ms: float) -> dict[str, Any]:
    """A run with every figure ``targets`` reads: ``ingest`` items/s per system, one p50 for every fetch."""
    cases = {
        f"{m}/{v}": figures(fetch_p50) for m in ("keyword", "vector", "hybrid") for v in ("none", "tag", "subtree")
    }
    good = {"recall_at_10": 0.97, "mean_rows": 10.0, "short_pages": 0, "queries": 200}
    run: dict[str, Any] = {
        "n": n,
        "embedder": {"setting": setting, "name": setting, "dimension": 384},
        "embed_query_ms": figures(encode_ms),
        "quality": {"engram": {f"vector/{v}": good for v in ("none", "tag", "subtree")}},
    }
    for name, rate in ingest.items():
        run[name] = {"ingest": {"rate": rate}, "fetch": cases, "floor": figures(0.5)}
    return run


def test_a_transformer_is_judged_against_the_encoder_alone_and_langgraph_at_par() -> None:
    rates = {"engram": 90.0, "raw": 95.0, "langgraph": 85.0, "encoder": 100.0}
    rows = {t: (m, ok) for t, m, ok in targets(run_with("minilm", 10_000, rates, 2.0, 4.0), [])}
    assert rows["ingest ≥ 0.85× the encoder alone (judged for a transformer at 10k)"] == (
        "0.90× (90 of 100 texts/s)",
        True,
    )
    assert rows["ingest ≥ 1.0× LangGraph"] == ("1.06×", True)
    static = {t: ok for t, _, ok in targets(run_with("wordllama", 10_000, rates, 2.0, 0.05), [])}
    assert static["ingest ≥ 0.85× the encoder alone (judged for a transformer at 10k)"] is None
    assert static["ingest ≥ 1.5× LangGraph"] is False
    smoke = {t: ok for t, _, ok in targets(run_with("minilm", 500, rates, 2.0, 4.0), [])}
    assert smoke["ingest ≥ 0.85× the encoder alone (judged for a transformer at 10k)"] is None


def test_an_import_is_judged_against_store_many_ingest_in_the_same_run() -> None:
    rates = {"engram": 400.0, "raw": 410.0, "langgraph": 200.0, "encoder": 7000.0}
    run = run_with("wordllama", 10_000, rates, 2.0, 0.05)
    rows = {t: (m, ok) for t, m, ok in targets(run, [])}
    assert "import ≥ 1.0× store_many ingest" not in rows, "a run without the import case"
    run["engram"]["import"] = {"rate": 480.0}
    rows = {t: (m, ok) for t, m, ok in targets(run, [])}
    assert rows["import ≥ 1.0× store_many ingest"] == ("1.20× (480 of 400 items/s)", True)
    run["engram"]["import"] = {"rate": 380.0}
    assert dict((t, ok) for t, _, ok in targets(run, []))["import ≥ 1.0× store_many ingest"] is False


def test_embedders_compared_keyword_unchanged_vector_within_the_query_encoding() -> None:
    rates = {"engram": 1.0, "raw": 1.0, "langgraph": 1.0, "encoder": 1.0}
    before = run_with("wordllama", 10_000, rates, 2.0, 0.05)
    after = run_with("minilm", 10_000, rates, 5.0, 4.0)
    after["engram"] = {**after["engram"], "fetch": {**after["engram"]["fetch"], "keyword/none": figures(2.2)}}
    lines = comparison_lines([before, after])
    assert lines[0] == "## Embedders compared at N = 10,000: wordllama and minilm"
    assert "| keyword, no filter | 2.00 | 2.20 | +0.20 | 2.30 | met |" in lines
    assert "| keyword, tag filter | 2.00 | 5.00 | +3.00 | 2.30 | **missed** |" in lines
    assert "| vector, no filter | 2.00 | 5.00 | +3.00 | 6.00 | met |" in lines
    assert comparison_lines([after]) == [] and comparison_lines([before]) == []


def test_a_mode_re_scored_by_late_interaction_is_bound_by_both_encodings_of_its_question() -> None:
    rates = {"engram": 1.0, "raw": 1.0, "langgraph": 1.0, "encoder": 1.0}
    before = run_with("wordllama", 10_000, rates, 2.0, 0.05)
    after = run_with("bge-small", 10_000, rates, 7.0, 4.0)
    after["late_interaction"] = {"hybrid": True, "vector": False}
    after["embed_question_late_ms"] = figures(6.0)
    lines = comparison_lines([before, after])
    assert "| vector, no filter | 2.00 | 7.00 | +5.00 | 6.00 | **missed** |" in lines  # its question: one encoding
    assert "| hybrid, no filter | 2.00 | 7.00 | +5.00 | 8.00 | met |" in lines  # both, made at once
    assert any("6.00 ms p50 for the two" in line for line in lines)


def test_a_run_says_how_many_hybrid_hits_it_re_scored_and_an_older_run_the_twenty_it_did() -> None:
    run = run_with("bge-small", 10_000, {"engram": 1.0}, 7.0, 4.0)
    run["late_interaction"] = {"hybrid": True, "vector": True}
    assert "hybrid's first 20 hits" in rescoring_text(run)  # recorded by no run before the depth was 30
    run["late_depths"] = {"hybrid": 30, "vector": 30}
    assert "hybrid's first 30 hits" in rescoring_text(run)


def test_embedders_asked_in_turn_are_compared_on_those_turns_not_on_their_runs() -> None:
    rates = {"engram": 1.0, "raw": 1.0, "langgraph": 1.0, "encoder": 1.0}
    before = run_with("wordllama", 10_000, rates, 2.0, 0.05)
    after = run_with("bge-small", 10_000, rates, 9.0, 4.0)  # its own run: slower by the machine's pace
    after["late_interaction"] = {"hybrid": True, "vector": True}
    cases = {f"{m}/{v}": {"wordllama": figures(3.0), "bge-small": figures(3.3)} for m in MODES for v in VARIANTS}
    cases["vector/none"] = {"wordllama": figures(3.0), "bge-small": figures(9.5)}
    after["in_turn"] = {
        "with": "wordllama",
        "started_at": "2026-12-07T17:00:00Z",
        "block": 10,
        "questions": 200,
        "fetch": cases,
        "encoding": figures(5.0),
        "encoding_late": figures(6.0),
    }
    lines = comparison_lines([before, after])
    assert lines[0] == "## Embedders compared at N = 10,000: wordllama and bge-small"
    assert any("asked in turn" in line and "200 questions new to both" in line for line in lines)
    assert "| keyword, tag filter | 3.00 | 3.30 | +0.30 | 3.45 | met |" in lines
    assert "| vector, no filter | 3.00 | 9.50 | +6.50 | 9.00 | **missed** |" in lines  # both encodings: 3 + 6
    assert "| hybrid, no filter | 3.00 | 3.30 | +0.30 | 9.00 | met |" in lines
    # Drawn from the turns even without the static embedder's own run at this size.
    assert comparison_lines([after])[:1] == lines[:1]


def test_the_service_embeds_a_conversation_after_the_items_before_it_in_its_thread() -> None:
    corpus = build_corpus(3_000, 7)
    service = as_the_service_embeds(corpus)
    assert sum(s != c.text for s, c in zip(service, corpus, strict=True)) > 10
    threaded = [i for i, c in enumerate(corpus) if c.wire.get("meta", {}).get("thread_id")]
    assert len(service) == len(corpus) and threaded
    assert all(service[i] == without_roles(c.text) for i, c in enumerate(corpus) if i not in set(threaded))
    assert all(service[i].startswith(without_roles(corpus[i].text)) for i in threaded)
    seen: dict[tuple[str, str], int] = {}
    for i in threaded:
        key = (corpus[i].namespace, corpus[i].wire["meta"]["thread_id"])
        if key in seen:  # a later item of its thread: the one before it follows
            assert service[i] != without_roles(corpus[i].text)
            assert without_roles(corpus[seen[key]].text)[-100:] in service[i]
        seen[key] = i


class Counting:
    """An encoder that records the texts it was given."""

    name, dimension = "counting", 3

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        return np.zeros((len(texts), 3), dtype=np.float32)

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        return await self.embed(texts)

    async def aclose(self) -> None:
        """Nothing held."""


async def test_the_encoder_alone_embeds_each_batchs_stored_texts_and_stores_nothing() -> None:
    corpus = build_corpus(200, 7)
    encoder = Counting()
    assert await EncoderAlone(encoder).store_batch(corpus[:100]) == 100
    assert encoder.texts == [c.text for c in corpus[:100]]


def test_equal_breadth_is_engram_over_langgraph_searched_as_far() -> None:
    def run(n: int, ours: float, theirs: float) -> dict:
        return {
            "n": n,
            "engram": {"fetch": {f"vector/{v}": figures(ours) for v in ("none", "tag", "subtree")}},
            "langgraph_wide": {"fetch": {f"vector/{v}": figures(theirs) for v in ("none", "tag", "subtree")}},
        }

    [line] = equal_breadth_lines([run(100_000, 3.0, 4.0), run(10_000, 2.0, 1.0)])
    assert "N = 100,000: none 0.75×, tag 0.75×, subtree 0.75×; N = 10,000: none 2.00×" in line
    assert equal_breadth_lines([{"n": 500, "engram": {"fetch": {}}}]) == []


def sized(n: int, setting: str, started_at: str) -> dict[str, Any]:
    return {"n": n, "embedder": {"setting": setting, "name": setting, "dimension": 256}, "started_at": started_at}


def test_the_machine_line_names_each_run_whose_processor_or_shared_buffers_differ() -> None:
    made = [sized(n, "wordllama", "2026-12-07T01:00:00Z") for n in (10_000, 100_000, 1_000_000)]
    for run, size, cpu in zip(made, ("2GB", "2GB", "6026MB"), ("Xeon", "EPYC", "EPYC"), strict=True):
        run["machine"] = {"shared_buffers": size, "cpu": cpu}
    assert machine_text(made, "shared_buffers") == "2GB (N = 1,000,000, wordllama: 6026MB)"
    assert machine_text(made[:2], "shared_buffers") == "2GB"
    assert machine_text(made, "cpu") == "EPYC (N = 10,000, wordllama: Xeon)"


def test_the_report_draws_the_latest_run_of_each_size_and_embedder_and_never_a_smoke_run(tmp_path: Path) -> None:
    (tmp_path / runs.PUBLISHED).mkdir()
    (tmp_path / runs.PUBLISHED / "n10000-wordllama.json").write_text(
        json.dumps(sized(10_000, "wordllama", "2026-12-03T08:12:00Z"))
    )
    (tmp_path / runs.PUBLISHED / "n500-wordllama.json").write_text(
        json.dumps(sized(500, "wordllama", "2026-12-04T21:42:00Z"))
    )
    later = runs.run_record("python -m bench --n 10000", "2026-12-05T05:00:00Z", quick=False, results=[])
    later["results"] = [sized(10_000, "wordllama", "2026-12-05T05:00:01Z")]
    runs.write_run(tmp_path / runs.RUNS / "2026-12-05T050000Z-n10000-wordllama.json", later)
    smoke = runs.run_record("python -m bench --quick", "2026-12-05T06:00:00Z", quick=True, results=[])
    smoke["results"] = [sized(500, "wordllama", "2026-12-05T06:00:01Z")]
    runs.write_run(tmp_path / runs.RUNS / "2026-12-05T060000Z-n500-wordllama-quick.json", smoke)
    chosen = {(r["n"], r["started_at"]): r["source"] for r in runs.latest(tmp_path)}
    assert chosen == {
        (500, "2026-12-04T21:42:00Z"): "results/n500-wordllama.json",
        (10_000, "2026-12-05T05:00:01Z"): "runs/2026-12-05T050000Z-n10000-wordllama.json",
    }


def test_a_published_run_is_kept_size_by_size_with_its_plans_beside_and_drawn_from_the_tree(tmp_path: Path) -> None:
    record = runs.run_record("python -m bench --n 100 --n 1000", "2026-12-07T01:00:00Z", quick=False, results=[])
    for n, setting in ((100, "wordllama"), (1_000, "bge-small")):
        result = sized(n, setting, f"2026-12-07T01:0{len(record['results'])}:00Z")
        result["plans"] = {"keyword/none": f"Seq Scan {n}\nExecution Time: 1.0 ms\n", "vector/tag": "Limit"}
        record["results"].append(result)
    made = tmp_path / runs.RUNS / "2026-12-07T010000Z-n100-n1000-wordllama.json"
    runs.write_run(made, record)

    kept = runs.publish(made, tmp_path, "bge-small")

    assert [path.name for path in kept] == ["n100-wordllama.json", "n1000.json"]
    assert json.loads(kept[0].read_text()) == sized(100, "wordllama", "2026-12-07T01:00:00Z")
    plans = (tmp_path / runs.PUBLISHED / "n100-wordllama-plans.txt").read_text()
    assert plans == "== keyword/none\nSeq Scan 100\nExecution Time: 1.0 ms\n\n== vector/tag\nLimit\n\n"
    made.unlink()
    assert sorted(r["source"] for r in runs.latest(tmp_path)) == ["results/n100-wordllama.json", "results/n1000.json"]


def test_a_run_may_be_published_for_some_of_its_sizes_and_only_for_sizes_it_measured(tmp_path: Path) -> None:
    record = runs.run_record("python -m bench --n 100 --n 1000", "2026-12-07T01:00:00Z", quick=False, results=[])
    record["results"] = [sized(n, "wordllama", "2026-12-07T01:00:00Z") for n in (100, 1_000)]
    made = tmp_path / runs.RUNS / "2026-12-07T010000Z-n100-n1000-wordllama.json"
    runs.write_run(made, record)
    with pytest.raises(ValueError, match="measured N = 100, 1000, not 500"):
        runs.publish(made, tmp_path, "bge-small", [500, 1_000])
    with pytest.raises(SystemExit) as stopped:  # the command line's --n is what is published
        bench_main(["--publish", str(made), "--n", "500", "--out", str(tmp_path)])
    assert stopped.value.code == 2 and not (tmp_path / runs.PUBLISHED).exists()

    runs.publish(made, tmp_path, "bge-small", [1_000])

    assert sorted(path.name for path in (tmp_path / runs.PUBLISHED).iterdir()) == [
        "n1000-wordllama-plans.txt",
        "n1000-wordllama.json",
    ]


def test_a_smoke_run_is_never_published(tmp_path: Path) -> None:
    smoke = runs.run_record("python -m bench --quick", "2026-12-07T01:00:00Z", quick=True, results=[])
    smoke["results"] = [sized(500, "wordllama", "2026-12-07T01:00:01Z")]
    made = tmp_path / runs.RUNS / "2026-12-07T010000Z-n500-wordllama-quick.json"
    runs.write_run(made, smoke)
    with pytest.raises(ValueError, match="not published"):
        runs.publish(made, tmp_path, "bge-small")
    # From the command line: one line naming the run, no traceback, nothing kept.
    for asked in (made, tmp_path / "no-such-run.json"):
        with pytest.raises(SystemExit) as stopped:
            bench_main(["--publish", str(asked), "--out", str(tmp_path)])
        assert stopped.value.code == 2
    assert not (tmp_path / runs.PUBLISHED).exists()


def test_a_run_of_another_kind_is_read_by_its_kind_and_never_as_a_size(tmp_path: Path) -> None:
    later = runs.run_record("python -m bench --n 10000", "2026-12-05T05:00:00Z", quick=False, results=[])
    later["results"] = [sized(10_000, "wordllama", "2026-12-05T05:00:01Z")]
    runs.write_run(tmp_path / runs.RUNS / "2026-12-05T050000Z-n10000-wordllama.json", later)
    made = {"kind": "concurrency", "started_at": "2026-12-05T07:00:00Z", "quick": False, "n": 10_000}
    runs.write_run(tmp_path / runs.RUNS / "2026-12-05T070000Z-concurrency-n10000-wordllama.json", made)
    smoke = {**made, "started_at": "2026-12-05T08:00:00Z", "quick": True}
    runs.write_run(tmp_path / runs.RUNS / "2026-12-05T080000Z-concurrency-n500-wordllama-quick.json", smoke)
    kept = {**made, "started_at": "2026-12-04T07:00:00Z"}
    runs.write_run(tmp_path / runs.PUBLISHED / "concurrency-n10000-wordllama.json", kept)

    assert [r["source"] for r in runs.latest(tmp_path)] == ["runs/2026-12-05T050000Z-n10000-wordllama.json"]
    assert [r["source"] for r in runs.of_kind(tmp_path, "concurrency")] == [
        "results/concurrency-n10000-wordllama.json",
        "runs/2026-12-05T070000Z-concurrency-n10000-wordllama.json",
    ]
    name = runs.run_name("2026-12-05T07:00:00Z", [10_000], "wordllama", quick=False, kind="concurrency")
    assert name == "2026-12-05T070000Z-concurrency-n10000-wordllama"


def equal(engram: tuple[float, float], default: tuple[float, float], widened: tuple[float, float, int, bool]) -> dict:
    """One case of bench/equal_recall.py's answer: (recall, p50) of each system, and the breadth found."""
    return {
        "ladder": [[40, default[0]], [widened[2], widened[0]]],
        "engram": {**figures(engram[1]), "recall_at_10": engram[0]},
        "langgraph": {**figures(default[1]), "recall_at_10": default[0], "ef_search": 40},
        "langgraph_equal": {
            **figures(widened[1]),
            "recall_at_10": widened[0],
            "ef_search": widened[2],
            "reached": widened[3],
        },
    }


def test_the_equal_recall_table_shows_both_p50s_at_equal_recall_and_langgraph_at_its_default() -> None:
    run = {
        "n": 10_000,
        "equal_recall": {
            "vector/none": equal((0.98, 2.0), (0.88, 1.0), (0.98, 2.5, 100, True)),
            "vector/tag": equal((0.99, 3.0), (0.25, 1.5), (0.95, 6.0, 1000, False)),
            "vector/subtree": equal((0.98, 3.0), (0.27, 1.5), (0.99, 12.0, 600, True)),
        },
    }
    lines = equal_recall_lines(run)
    assert lines[0] == "### Vector search at equal recall"
    assert (
        "| vector, no filter | 0.980 | 2.00 | 4.00 | 0.880 | 1.00 | 2.00 | 100 | 0.980 | 2.50 | 5.00 | 0.80× |" in lines
    )
    assert any(line.startswith("| vector, tag filter |") and "1000 (its best; never reached)" in line for line in lines)
    assert "no filter: 40 → 0.880, 100 → 0.980" in lines[-2]
    [_, summary] = equal_recall_summary([run])
    assert (
        "N = 10,000: none 0.80× (ef_search 100), tag 0.50× (ef_search 1000, its best 0.950), subtree 0.25×" in summary
    )
    assert equal_recall_lines({"n": 500}) == [] and equal_recall_summary([{"n": 500}]) == []


def test_the_scale_targets_judge_langgraph_at_equal_recall_and_each_size_by_its_own_bounds() -> None:
    rates = {"engram": 600.0, "raw": 620.0, "langgraph": 300.0, "encoder": 18_000.0}
    run = {**run_with("wordllama", 100_000, rates, 8.0, 0.05), "duration_s": 900.0}
    run["engram"]["fetch"] = {**run["engram"]["fetch"], "hybrid/tag": figures(10.8), "keyword/subtree": figures(7.6)}
    run["equal_recall"] = {
        "vector/none": equal((0.965, 8.0), (0.70, 4.0), (0.951, 30.0, 1000, False)),
        "vector/tag": equal((0.97, 8.0), (0.23, 5.0), (0.97, 7.0, 300, True)),
        "vector/subtree": equal((0.97, 8.0), (0.27, 5.0), (0.97, 16.0, 600, True)),
    }
    rows = {t: (m, ok) for t, m, ok in targets(run, [])}
    assert rows["vector/none p50 ≤ LangGraph's at equal recall"] == (
        "0.27× (Engram recall 0.965; LangGraph ef_search 1000, its best 0.951)",
        True,
    )
    assert rows["vector/tag p50 ≤ LangGraph's at equal recall"] == (
        "1.14× (Engram recall 0.970; LangGraph ef_search 300)",
        False,
    )
    assert rows["hybrid/none p50 ≤ 1.3× Engram's vector/none p50 (target is at 100k)"] == ("1.00× (8.00 ms)", True)
    assert rows["hybrid/tag p50 ≤ 1.3× Engram's vector/tag p50 (target is at 100k)"] == ("1.35× (10.80 ms)", False)
    assert rows["keyword p95 ≤ 15 ms at 100k, ≤ 40 ms at 1M"] == ("16.00 ms (worst variant 16.00 ms)", False)
    assert rows["filtered vector (tag) full pages, recall@10 ≥ 0.95"] == ("recall 0.970, 0 short of 200", True)
    assert rows["filtered vector/tag p95 ≤ 40 ms (target is at 1M)"] == ("16.00 ms", None)
    assert "vector/none p50 ≤ 12 ms (target is at 1M)" not in rows

    million = {**run, "n": 1_000_000}
    rows = {t: (m, ok) for t, m, ok in targets(million, [])}
    assert rows["keyword p95 ≤ 15 ms at 100k, ≤ 40 ms at 1M"][1] is True
    assert rows["filtered vector/tag p95 ≤ 40 ms (target is at 1M)"] == ("16.00 ms", True)
    assert rows["vector/none p50 ≤ 12 ms (target is at 1M)"] == ("8.00 ms", True)
    assert rows["hybrid/none p50 ≤ 20 ms (target is at 1M)"] == ("8.00 ms", True)

    del run["equal_recall"]
    rows = {t: (m, ok) for t, m, ok in targets(run, [])}
    assert rows["vector/none p50 ≤ LangGraph's at its default"] == ("1.00×", True)


class Widening:
    """A store whose recall is what its breadth says: the ids it answers are the truth's first ``k``."""

    def __init__(self, truth: list[str], found_at: dict[int, int]) -> None:
        self.truth, self.found_at, self.breadths = truth, found_at, []

    async def search_at(self, ef_search: int) -> None:
        self.breadths.append(ef_search)

    async def fetch(self, query: str, mode: str, request_filter: dict, limit: int = 10) -> list[str]:
        return self.truth[: self.found_at[self.breadths[-1]]]


async def test_the_breadth_for_equal_recall_is_the_narrowest_that_reaches_it_else_the_best() -> None:
    truth = [f"id{i}" for i in range(10)]
    store = Widening(truth, {40: 6, 100: 9, 400: 10, 1000: 9})
    ef, recall, tried = await breadth_for(store, ["q"], [{}], [truth], 0.9, (40, 100, 400, 1000))  # type: ignore[arg-type]
    assert (ef, recall, store.breadths) == (100, 0.9, [40, 100])
    assert tried == [[40, 0.6], [100, 0.9]]
    store = Widening(truth, {40: 6, 100: 9, 400: 8})
    ef, recall, _ = await breadth_for(store, ["q"], [{}], [truth], 0.95, (40, 100, 400))  # type: ignore[arg-type]
    assert (ef, recall) == (100, 0.9)
    flat = Widening(truth, dict.fromkeys((40, 60, 80, 100, 150, 200), 9))
    ef, recall, tried = await breadth_for(flat, ["q"], [{}], [truth], 0.95, (40, 60, 80, 100, 150, 200))  # type: ignore[arg-type]
    assert (ef, recall, [int(b) for b, _ in tried]) == (40, 0.9, [40, 60, 80, 100]), "four alike: wider finds no more"


def test_recall_at_10_is_the_mean_share_of_each_truth_found_over_queries_that_have_one() -> None:
    assert recall_at_10([["a", "b"], ["c"], []], [["a", "x"], ["c"], []]) == 0.75
    assert recall_at_10([[]], [[]]) is None


def test_a_mode_re_scored_by_late_interaction_is_not_judged_against_raw_sql_which_does_not() -> None:
    rates = {"engram": 90.0, "raw": 95.0, "langgraph": 85.0, "encoder": 100.0}
    run = run_with("bge-small", 10_000, rates, 2.0, 4.0)
    run["engram"]["fetch"] = {case: figures(9.0) for case in run["engram"]["fetch"]}  # 9 ms against raw's 2
    run["quality"]["raw"] = {f"vector/{v}": {**run["quality"]["engram"][f"vector/{v}"]} for v in VARIANT_NAMES}
    run["quality"]["engram"] = {
        f"vector/{v}": {**run["quality"]["raw"][f"vector/{v}"], "recall_at_10": 0.6} for v in VARIANT_NAMES
    }  # a re-scored order against the exact cosine top 10

    def judged(late: dict[str, bool]) -> dict[str, bool | None]:
        return {t: ok for t, _, ok in targets({**run, "late_interaction": late}, [])}

    hybrid_only = judged({"hybrid": True, "vector": False})
    assert hybrid_only["fetch hybrid/none p50 ≤ 1.5× (raw p50 + floor)"] is None
    assert hybrid_only["fetch vector/none p50 ≤ 1.5× (raw p50 + floor)"] is False  # vector is the index's order
    assert hybrid_only["HNSW recall@10 ≥ 0.95 (ef_search ?)"] is False  # Engram's own recall, judged
    both = judged({"hybrid": True, "vector": True})
    assert both["fetch vector/none p50 ≤ 1.5× (raw p50 + floor)"] is None
    assert both["HNSW recall@10 ≥ 0.95 (ef_search ?)"] is True  # the index's, through raw SQL
    assert judged({"hybrid": False, "vector": False})["fetch hybrid/none p50 ≤ 1.5× (raw p50 + floor)"] is False


def test_the_ingest_says_where_an_items_cpu_went_and_the_encoders_share_of_it() -> None:
    run = run_with("bge-small", 10_000, {"engram": 120.0, "raw": 125.0, "langgraph": 110.0, "encoder": 170.0}, 9, 7)
    assert cpu_lines(run) == [], "a run from before the CPU clock"
    run["engram"]["ingest"]["cpu_ms"] = {"harness": 0.5, "service": 12.0, "postgres": 2.5}
    run["raw"]["ingest"]["cpu_ms"] = {"harness": 11.0, "service": 0.2, "postgres": 2.3}
    run["langgraph"]["ingest"]["cpu_ms"] = {"harness": 11.5, "service": 0.1, "postgres": 3.0}
    run["encoder"]["ingest"]["cpu_ms"] = {"harness": 10.5, "service": 0.0, "postgres": 0.0}
    run["engram"]["ingest"]["settled_cpu_ms"] = {"harness": 0.5, "service": 26.0, "postgres": 3.0}
    (line,) = cpu_lines(run)[1:]
    assert "Engram 12.00 / 2.50 / 0.50 (all 15.00); raw SQL 0.20 / 2.30 / 11.00 (all 13.50); LangGraph 0.10 /" in line
    assert "The encoder alone spent 10.50 ms a text: 0.70 of Engram's 15.00 ms an item" in line
    assert "(its ingest ran at 0.71× the encoder's rate)" in line
    assert line.endswith("Until its token vectors were made too: Engram 26.00 / 3.00 / 0.50 (all 29.50).")
    static = run_with("wordllama", 10_000, {"engram": 700.0, "raw": 750.0, "langgraph": 400.0, "encoder": 9e3}, 5, 0)
    static["engram"]["ingest"]["cpu_ms"] = {"harness": 0.1, "service": 0.3, "postgres": 1.9}
    static["encoder"]["ingest"]["cpu_ms"] = {"harness": 0.1, "service": 0.0, "postgres": 0.0}
    (line,) = cpu_lines(static)[1:]
    assert line.endswith("Engram 0.30 / 1.90 / 0.10 (all 2.30).")  # a static embedder's share is not told
