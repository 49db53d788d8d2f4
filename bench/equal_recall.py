"""LangGraph searched as wide as it takes to find what Engram finds: both p50s at equal recall.

For each vector case (no filter, a tag, a namespace subtree), LangGraph's own search (its store,
its index, its filter after the walk, as a user gets it) is asked every query at rising
``hnsw.ef_search`` until its recall@10 reaches Engram's, or pgvector's widest (1000), keeping its
best. Then Engram, LangGraph at its default breadth and LangGraph at that breadth answer every query
in turn (``measure_paired``), so the three p50s are timed moments apart, each with its recall.
The comparison the targets judge: docs/decisions/2026-12-03-benchmark-at-equal-recall.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.langgraph_store import DEFAULT_EF_SEARCH, LangGraphStore
from bench.stats import measure_paired
from bench.truth import recall_at_10

# The breadths tried, from LangGraph's default up to the widest pgvector takes.
LADDER = (DEFAULT_EF_SEARCH, 60, 80, 100, 150, 200, 300, 400, 600, 800, 1000)
QUICK_LADDER = (DEFAULT_EF_SEARCH, 100, 400)
PAGE = 10
# Breadths in a row with one recall after which wider ones are not tried.
PLATEAU = 4


async def breadth_for(
    store: LangGraphStore,
    questions: Sequence[str],
    filters: Sequence[dict[str, Any]],
    truths: list[list[str]],
    target: float,
    ladder: Sequence[int],
) -> tuple[int, float, list[list[float]]]:
    """The narrowest breadth of ``ladder`` at which ``store`` reaches ``target`` recall@10 (else its
    best); its recall, and every breadth tried with its recall. A recall the same at ``PLATEAU``
    breadths in a row is its best: the breadth no longer changes what it finds (a filter LangGraph's
    query answers without the index gives the same rows at every breadth)."""
    tried: list[list[float]] = []
    best = (ladder[0], -1.0)
    for ef_search in ladder:
        await store.search_at(ef_search)
        answers = [await store.fetch(q, "vector", f, PAGE) for q, f in zip(questions, filters, strict=True)]
        recall = recall_at_10(answers, truths) or 0.0
        tried.append([ef_search, recall])
        if recall > best[1]:
            best = (ef_search, recall)
        if recall >= target:
            return ef_search, recall, tried
        if len(tried) >= PLATEAU and len({r for _, r in tried[-PLATEAU:]}) == 1:
            break
    return best[0], best[1], tried


async def equal_recall_case(
    engram: Any,
    default: LangGraphStore,
    widened: LangGraphStore,
    questions: Sequence[str],
    filters: Sequence[dict[str, Any]],
    truths: list[list[str]],
    engram_recall: float,
    ladder: Sequence[int] = LADDER,
) -> dict[str, Any]:
    """One case: the breadth LangGraph needs (``widened``), then the three systems timed in turn."""
    ef_search, _, tried = await breadth_for(widened, questions, filters, truths, engram_recall, ladder)
    await widened.search_at(ef_search)
    systems = {"engram": engram, "langgraph": default, "langgraph_equal": widened}
    measured = await measure_paired(
        {
            name: [
                lambda q=q, f=f, s=system: s.fetch(q, "vector", f, PAGE)
                for q, f in zip(questions, filters, strict=True)
            ]
            for name, system in systems.items()
        },
        warmup=min(10, len(questions)),
    )
    out: dict[str, Any] = {"ladder": tried}
    for name, (stats, answers) in measured.items():
        out[name] = {**stats, "recall_at_10": recall_at_10(answers, truths)}
    out["langgraph"]["ef_search"] = DEFAULT_EF_SEARCH
    out["langgraph_equal"]["ef_search"] = ef_search
    out["langgraph_equal"]["reached"] = (out["langgraph_equal"]["recall_at_10"] or 0.0) >= engram_recall
    return out
