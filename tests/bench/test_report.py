"""RESULTS.md's generated parts (bench/report.py): the growth target judged on the sizes asked in turn when a
run has them, and the table of every target at every size that opens the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bench.__main__ import results_stem
from bench.corpus import build_corpus
from bench.report import (
    LEGACY_EMBEDDER,
    by_embedder,
    comparison_lines,
    default_embedder,
    embedder_of,
    equal_breadth_lines,
    glance_lines,
    growth_lines,
    growth_ratios,
    load,
    targets,
)
from bench.run import EncoderAlone, as_the_service_embeds

COMMITTED = Path(__file__).resolve().parents[2] / "bench" / "results"


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
    groups = by_embedder(load(COMMITTED))
    assert list(groups) == sorted(groups, key=lambda setting: (setting != default_embedder(), setting))
    for setting, runs in groups.items():
        assert {embedder_of(r)["setting"] for r in runs} == {setting}
        named = sorted((r for r in runs if r["n"] >= 10_000), key=lambda r: -r["n"]) or runs
        lines = glance_lines(runs)
        assert lines[0].endswith(
            f", {setting} ({embedder_of(named[0])['name']}, {embedder_of(named[0])['dimension']} dimensions)"
        )
        assert lines[2] == "| target | " + " | ".join(f"N = {r['n']:,}" for r in named) + " |"
        rows = {line.split(" | ")[0].removeprefix("| "): line for line in lines if line.startswith("| ")}
        for column, run in enumerate(named, start=1):
            for target, measured, ok in targets(run, runs):
                cell = rows[target].removesuffix(" |").split(" | ")[column]
                assert cell.startswith(measured)
                assert cell.endswith({None: measured, True: ", met", False: ", **missed**"}[ok])


def test_a_run_that_names_no_embedder_was_wordllamas_and_files_are_named_by_embedder() -> None:
    assert embedder_of({"n": 500}) == LEGACY_EMBEDDER
    assert embedder_of({"n": 500, "embedder": {"setting": "minilm", "name": "m", "dimension": 384}})["dimension"] == 384
    other = "wordllama" if default_embedder() != "wordllama" else "minilm"
    assert results_stem(500, default_embedder()) == "n500"  # what CI's smoke run checks for
    assert results_stem(10_000, other) == f"n10000-{other}"


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


def test_the_service_embeds_a_conversation_after_the_items_before_it_in_its_thread() -> None:
    corpus = build_corpus(3_000, 7)
    service = as_the_service_embeds(corpus)
    assert sum(s != c.text for s, c in zip(service, corpus, strict=True)) > 10
    threaded = [i for i, c in enumerate(corpus) if c.wire.get("meta", {}).get("thread_id")]
    assert len(service) == len(corpus) and threaded
    assert all(service[i] == c.text for i, c in enumerate(corpus) if i not in set(threaded))
    assert all(service[i].endswith(corpus[i].text) for i in threaded)
    seen: dict[tuple[str, str], int] = {}
    for i in threaded:
        key = (corpus[i].namespace, corpus[i].wire["meta"]["thread_id"])
        if key in seen:  # a later item of its thread: the one before it comes first
            assert service[i] != corpus[i].text and corpus[seen[key]].text[-100:] in service[i]
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
