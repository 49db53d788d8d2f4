"""Statement shapes beside the engine's, measured through the raw-SQL floor in the same run.

Not used by the service: each is here so that its latency and what it changes
in recall are measured beside what the engine runs.

* keyword, every match scored: the engine's keyword statement with no budget
  (``KEYWORD_BUDGET`` and ``KEYWORD_SCORED`` unbounded), so every match is scored. Not a proposal but
  the ranking the engine's bounded one approximates: its latency is what the
  budget saves and the engine's recall@10 against it is what the budget costs.

A vector shape (selective filters answered exactly through the embeddings' key, under
1,500 admitted items) was measured here in the first three sessions: recall 1.0 at 10k
for a latency within noise of the index's, and never taken at 100k, where every tag or
subtree admits thousands. It was dropped to keep the 100k run inside its 20 minutes
(bench/analysis.md).
"""

from __future__ import annotations

import time
from typing import Any

from app.contract.meta import Filter
from app.engine.keywords import KeywordQuery
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.statements import (
    KEYWORD_BUDGET,
    KEYWORD_SCORED,
    keyword_params,
    keyword_sql,
    plans_generic,
)
from bench.corpus import QuerySet
from bench.rawsql import RawSql
from bench.stats import summary

EVERY_MATCH = 2**31 - 1  # a keyword budget no estimate reaches


class Proposals:
    def __init__(self, raw: RawSql) -> None:
        self._raw = raw

    async def keyword(self, query: str, request_filter: Filter) -> list[str]:
        keywords = KeywordQuery.parse(query)
        if keywords.is_empty:
            return []
        pred = filter_predicate(request_filter)
        params = {
            **keyword_params(
                "english", keywords, 11, await self._raw.term_statistics(), budget=EVERY_MATCH, scored=EVERY_MATCH
            ),
            "count": 11,
            "offset": 0,
            **pred.params,
        }
        return [
            r["id"]
            for r in await self._raw.run(
                keyword_sql(pred, keywords, depth=11),
                params,
                generic_plan=plans_generic(pred),
            )
        ][:10]


def _recall(got: list[list[str]], truth: list[list[str]]) -> float | None:
    scores = [len(set(g) & set(t)) / len(t) for g, t in zip(got, truth, strict=True) if t]
    return round(sum(scores) / len(scores), 4) if scores else None


async def measure_proposals(
    raw: RawSql,
    queries: QuerySet,
    filters: dict[str, list[Filter]],
    keyword_truth: dict[str, list[list[str]]],
) -> dict[str, Any]:
    """Latency and recall@10 of each shape per filter variant.

    Keyword recall is the engine's (``keyword_truth``, the raw-SQL answers of its
    bounded statement) against every match scored.
    """
    proposals = Proposals(raw)
    out: dict[str, Any] = {"keyword_budget": KEYWORD_BUDGET, "keyword_scored": KEYWORD_SCORED}
    for variant, variant_filters in filters.items():
        samples, answers = [], []
        for question, request_filter in zip(queries.questions, variant_filters, strict=True):
            start = time.perf_counter()
            answers.append(await proposals.keyword(question, request_filter))
            samples.append((time.perf_counter() - start) * 1000)
        out[f"keyword_every_match/{variant}"] = {
            **summary(samples),
            "engine_recall_at_10": _recall([t[:10] for t in keyword_truth[f"keyword/{variant}"]], answers),
        }
    return out
