"""RESULTS.md's generated parts (bench/report.py): the growth target judged on the sizes asked in turn when a
run has them, and the table of every target at every size that opens the page."""

from __future__ import annotations

from pathlib import Path

from bench.report import equal_breadth_lines, glance_lines, growth_lines, growth_ratios, load, targets

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


def test_the_glance_table_holds_every_target_of_every_size_the_issue_names() -> None:
    runs = load(COMMITTED)
    named = sorted((r for r in runs if r["n"] >= 10_000), key=lambda r: -r["n"])
    assert [r["n"] for r in named] == [100_000, 10_000]
    lines = glance_lines(runs)
    assert lines[2] == "| target | N = 100,000 | N = 10,000 |"
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in lines if line.startswith("| ")}
    for column, run in enumerate(named, start=1):
        for target, measured, ok in targets(run, runs):
            cell = rows[target].removesuffix(" |").split(" | ")[column]
            assert cell.startswith(measured)
            assert cell.endswith({None: measured, True: ", met", False: ", **missed**"}[ok])


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
