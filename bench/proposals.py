"""Statement shapes proposed for the engine, measured on the raw-SQL database beside the current ones.

Not used by the service: they are here so each proposal's latency and its
cost in recall are measured in the same run as what they would replace.

* keyword, every match scored: the engine's keyword statement with no budget
  (``KEYWORD_BUDGET`` unbounded), so every match is scored. Not a proposal but
  the ranking the engine's bounded one approximates: its latency is what the
  budget saves and the engine's recall@10 against it is what the budget costs.
* vector, selective filters exact: count the filter's matches up to
  ``EXACT_BELOW``; under it, compute the distance of each admitted item
  through the embeddings' primary key (exact, recall 1.0), else use the HNSW
  index as the engine does.
"""

from __future__ import annotations

import time
from typing import Any

from app.contract.meta import Filter
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.keywords import KeywordQuery
from app.engine.postgres.engine import vector_literal
from app.engine.postgres.filters import filter_predicate
from app.engine.postgres.statements import HIT_COLUMNS, KEYWORD_BUDGET, keyword_params, keyword_sql
from bench.corpus import QuerySet
from bench.rawsql import RawSql
from bench.stats import summary

EXACT_BELOW = 1500
EVERY_MATCH = 2**31 - 1  # a keyword budget no estimate reaches


def bounded_count_sql(where: str) -> str:
    return f"SELECT count(*) AS n FROM (SELECT 1 FROM engram_items i WHERE {where} LIMIT :cap) s"


def vector_exact_by_key_sql(where: str) -> str:
    return f"""
        SELECT {HIT_COLUMNS}, 1 - d.distance AS score
        FROM engram_items i
        CROSS JOIN LATERAL (
            SELECT e.embedding <=> CAST(:vec AS vector) AS distance
            FROM engram_embeddings e WHERE e.item_id = i.id AND e.model = :model
        ) d
        WHERE {where}
        ORDER BY d.distance, i.seq
        LIMIT :count
    """


class Proposals:
    def __init__(self, raw: RawSql, embedder: WordLlamaEmbedder) -> None:
        self._raw = raw
        self._embedder = embedder
        self.exact_path = 0

    async def keyword(self, query: str, request_filter: Filter) -> list[str]:
        keywords = KeywordQuery.parse(query)
        if keywords.is_empty:
            return []
        pred = filter_predicate(request_filter)
        params = {
            **keyword_params("english", keywords, 11, budget=EVERY_MATCH),
            "count": 11,
            "offset": 0,
            **pred.params,
        }
        return [r["id"] for r in await self._raw.run(keyword_sql(pred.sql(), depth=11), params)][:10]

    async def vector(self, query: str, request_filter: Filter) -> list[str]:
        (vector,) = await self._embedder.embed([query])
        pred = filter_predicate(request_filter)
        rows = await self._raw.run(bounded_count_sql(pred.sql()), {"cap": EXACT_BELOW, **pred.params})
        if rows[0]["n"] < EXACT_BELOW:
            self.exact_path += 1
            params = {"vec": vector_literal(vector), "model": self._embedder.name, "count": 11, **pred.params}
            return [r["id"] for r in await self._raw.run(vector_exact_by_key_sql(pred.sql()), params)][:10]
        sql, params = self._raw.fetch_statement(query, "vector", request_filter, vector)
        return [r["id"] for r in await self._raw.run(sql, params)][:10]


def _recall(got: list[list[str]], truth: list[list[str]]) -> float | None:
    scores = [len(set(g) & set(t)) / len(t) for g, t in zip(got, truth, strict=True) if t]
    return round(sum(scores) / len(scores), 4) if scores else None


async def measure_proposals(
    raw: RawSql,
    embedder: WordLlamaEmbedder,
    queries: QuerySet,
    filters: dict[str, list[Filter]],
    keyword_truth: dict[str, list[list[str]]],
) -> dict[str, Any]:
    """Latency and recall@10 of each proposal per filter variant.

    Keyword recall is the engine's (``keyword_truth``, the raw-SQL answers of its
    bounded statement) against every match scored; vector recall is against an exact scan.
    """
    proposals = Proposals(raw, embedder)
    out: dict[str, Any] = {"keyword_budget": KEYWORD_BUDGET, "exact_below": EXACT_BELOW}
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
        if variant == "none":
            continue
        samples, answers, truths = [], [], []
        proposals.exact_path = 0
        for question, request_filter in zip(queries.questions, variant_filters, strict=True):
            start = time.perf_counter()
            answers.append(await proposals.vector(question, request_filter))
            samples.append((time.perf_counter() - start) * 1000)
            (vector,) = await embedder.embed([question])
            truths.append(await raw.exact_neighbours(vector, request_filter))
        out[f"vector_selective_exact/{variant}"] = {
            **summary(samples),
            "recall_at_10": _recall(answers, truths),
            "exact_path": proposals.exact_path,
        }
    return out
