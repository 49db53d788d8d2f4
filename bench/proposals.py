"""Statement shapes beside the engine's, measured through the raw-SQL floor in the same run.

Not used by the service: each is here so that its latency and what it changes
in recall are measured beside what the engine runs.

* keyword, every match scored: the engine's keyword statement with no budget
  (KeywordOptions' ``budget`` and ``scored`` unbounded), so every match is scored. Not a proposal but
  the ranking the engine's bounded one approximates: its latency is what the
  budget saves and the engine's recall@10 against it is what the budget costs.

* vector, every filter through the HNSW walk: what the engine ran for every filtered vector
  search before migration 0008, which it now runs only for filters its statistics do not bound
  to SketchOptions' ``max_admitted`` items (the others are ranked by sketches, sketch_sql). Timed query by
  query in turn with the engine's own statement, each with its recall@10 against the exact
  ranking: what the sketches buy, in every run.

A vector shape (selective filters answered exactly through the embeddings' key, under
1,500 admitted items) was measured here until 2026-12-01: recall 1.0 at 10k
for a latency within noise of the index's, and never taken at 100k, where every tag or
subtree admits thousands. It was dropped to keep the 100k run inside its 20 minutes
(bench/analysis.md).
"""

from __future__ import annotations

import time
from typing import Any

from app.contract.meta import Filter
from app.embeddings.protocol import Embedder
from app.engine.keywords import KeywordQuery
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.options import KeywordOptions, SketchOptions
from app.engine.postgres.queries.keyword import plan_keyword
from bench.corpus import QuerySet
from bench.rawsql import RawSql
from bench.stats import measure_paired, summary
from bench.truth import ExactNeighbours

EVERY_MATCH = 2**31 - 1  # a keyword budget no estimate reaches
# The engine's keyword options with every match scored.
EVERY_MATCH_SCORED = KeywordOptions(budget=EVERY_MATCH, scored=EVERY_MATCH)


class Proposals:
    def __init__(self, raw: RawSql) -> None:
        self._raw = raw

    async def keyword(self, query: str, request_filter: Filter) -> list[str]:
        keywords = KeywordQuery.parse(query)
        if keywords.is_empty:
            return []
        statement = plan_keyword(
            keywords,
            filter_predicate(request_filter),
            offset=0,
            count=11,
            statistics=await self._raw.term_statistics(),
            ts_config="english",
            options=EVERY_MATCH_SCORED,
        )
        return [r["id"] for r in await self._raw.run(statement)][:10]


def _recall(got: list[list[str]], truth: list[list[str]]) -> float | None:
    scores = [len(set(g) & set(t)) / len(t) for g, t in zip(got, truth, strict=True) if t]
    return round(sum(scores) / len(scores), 4) if scores else None


async def measure_proposals(
    raw: RawSql,
    embedder: Embedder,
    queries: QuerySet,
    filters: dict[str, list[Filter]],
    keyword_truth: dict[str, list[list[str]]],
    truth: ExactNeighbours,
) -> dict[str, Any]:
    """Latency and recall@10 of each shape per filter variant.

    Keyword recall is the engine's (``keyword_truth``, the raw-SQL answers of its
    bounded statement) against every match scored; vector recall, each statement's
    against the exact ranking (``truth``).
    """
    proposals = Proposals(raw)
    out: dict[str, Any] = {
        "keyword_budget": KeywordOptions.budget,
        "keyword_scored": KeywordOptions.scored,
        "sketch_max_admitted": SketchOptions.max_admitted,
    }
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
    vectors = await embedder.embed_queries(queries.questions)
    for variant, variant_filters in filters.items():
        if variant == "none":
            continue  # unfiltered, the engine walks the index already
        pairs = list(zip(vectors, variant_filters, strict=True))
        timed = await measure_paired(
            {
                "engine": [lambda v=v, f=f: raw.vector_page(v, f) for v, f in pairs],
                "walk": [lambda v=v, f=f: raw.vector_page(v, f, sketches=False) for v, f in pairs],
            }
        )
        exact = [await truth.nearest(v, f) for v, f in pairs]
        (engine, engine_pages), (walk, walk_pages) = timed["engine"], timed["walk"]
        out[f"vector_walk/{variant}"] = {
            **walk,
            "recall_at_10": _recall(walk_pages, exact),
            "engine": {**engine, "recall_at_10": _recall(engine_pages, exact)},
            "sketched": sum([await raw.ranks_by_sketch(f) for _, f in pairs]),
        }
    return out
