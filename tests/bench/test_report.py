"""The growth target is judged on the sizes asked in turn when a run has them (bench/report.py)."""

from __future__ import annotations

from bench.report import growth_lines, growth_ratios


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
