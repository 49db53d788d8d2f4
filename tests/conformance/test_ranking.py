"""The ranking checks pass against a faithful service and catch cut-offs, bad orders and loose keyword matching."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from app.contract.meta import Filter
from app.contract.requests import FetchPage, FetchRequest
from app.contract.text import is_blank
from app.embeddings.protocol import Embedder
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.keywords import STOP_WORDS, WORD, KeywordQuery, stem
from app.engine.reference import ReferenceEngine, _keyword_score, _words
from tests.conformance.faults import Fault, assert_caught
from tests.conformance.support import failed, outcomes_against

Ranked = list[tuple[str, Any, float]]
Scorer = Callable[[str, str], float]


class KeywordScoring(ReferenceEngine):
    """The reference engine with keyword relevance computed by ``score(query, text)``; 0 does not match."""

    def __init__(self, embedder: Embedder, score: Scorer) -> None:
        super().__init__(embedder)
        self._score = score

    async def _rank(self, query: str, mode: str, request_filter: Filter) -> Ranked:
        if mode != "keyword":
            return await super()._rank(query, mode, request_filter)
        scored = [(i, r, self._score(query, r.text)) for i, r in self._admitted(request_filter)]
        return sorted([s for s in scored if s[2] > 0], key=lambda s: (-s[2], s[1].seq))


def scoring(score: Scorer) -> Callable[[Embedder], ReferenceEngine]:
    return lambda embedder: KeywordScoring(embedder, score)


def counting_stop_words(query: str, text: str) -> float:
    words = _words(text)
    return sum(words.count(stem(w)) for w in WORD.findall(query.lower()))


def unstemmed(query: str, text: str) -> float:
    words = WORD.findall(text.lower())
    return sum(words.count(w) for w in WORD.findall(query.lower()) if w not in STOP_WORDS)


def by_substring(query: str, text: str) -> float:
    terms = [stem(w) for w in WORD.findall(query.lower()) if w not in STOP_WORDS]
    return sum(text.lower().count(term) for term in terms)


def phrases_ignored(query: str, text: str) -> float:
    return _keyword_score(KeywordQuery.parse(query.replace('"', " ")), text)


class Reranked(ReferenceEngine):
    """The reference engine with one mode's ranking passed through ``change``."""

    mode = "vector"

    def change(self, ranked: Ranked) -> Ranked:
        return ranked

    async def _rank(self, query: str, mode: str, request_filter: Filter) -> Ranked:
        ranked = await super()._rank(query, mode, request_filter)
        return self.change(ranked) if mode == self.mode else ranked


class SimilarityCutOff(Reranked):
    """Drops vector hits scoring under half the best one's score."""

    def change(self, ranked: Ranked) -> Ranked:
        return [hit for hit in ranked if ranked and hit[2] >= ranked[0][2] / 2]


class KeywordTopThree(Reranked):
    mode = "keyword"

    def change(self, ranked: Ranked) -> Ranked:
        return ranked[:3]


class HybridOnlyKeyword(ReferenceEngine):
    """Hybrid returns the keyword matches alone (the vector ranking's other items dropped)."""

    async def _rank(self, query: str, mode: str, request_filter: Filter) -> Ranked:
        ranked = await super()._rank(query, mode, request_filter)
        if mode != "hybrid":
            return ranked
        keyword = {item_id for item_id, _, _ in await super()._rank(query, "keyword", request_filter)}
        return [hit for hit in ranked if hit[0] in keyword]


class WorstFirst(Reranked):
    def change(self, ranked: Ranked) -> Ranked:
        return ranked[::-1]


class ScoresNotInOrder(Reranked):
    """Hits in the right order with their scores shuffled among them."""

    def change(self, ranked: Ranked) -> Ranked:
        scores = [score for _, _, score in ranked][::-1]
        return [(i, r, s) for (i, r, _), s in zip(ranked, scores, strict=True)]


class LaterPagesWorstFirst(ReferenceEngine):
    """The first page is best first; every page after it comes worst first."""

    async def fetch(self, request: FetchRequest) -> FetchPage:
        page = await super().fetch(request)
        return page if request.cursor is None else page.model_copy(update={"hits": page.hits[::-1]})


class ServesModesItDoesNotList(ReferenceEngine):
    def __init__(self, embedder: Embedder) -> None:
        super().__init__(embedder)
        self._descriptor = self._descriptor.model_copy(update={"fetch_modes": ["keyword"]})

    async def fetch(self, request: FetchRequest) -> FetchPage:
        if request.mode == "keyword":
            return await super().fetch(request)
        # Served anyway: the descriptor's mode check skipped.
        return FetchPage(hits=[])


class VectorAlone(ReferenceEngine):
    """Faithful: offers vector fetch alone, and refuses the other modes as its descriptor says."""

    def __init__(self, embedder: Embedder) -> None:
        super().__init__(embedder)
        self._descriptor = self._descriptor.model_copy(update={"fetch_modes": ["vector"]})


class BlankQueryMatchesNothing(ReferenceEngine):
    async def fetch(self, request: FetchRequest) -> FetchPage:
        if is_blank(request.query):
            return FetchPage(hits=[])
        return await super().fetch(request)


FAULTS = [
    Fault("a similarity cut-off", "every_mode_returns_min_of_limit_and_matches", SimilarityCutOff),
    Fault("keyword stops at three hits", "every_mode_returns_min_of_limit_and_matches", KeywordTopThree),
    Fault("hybrid drops what only vector finds", "every_mode_returns_min_of_limit_and_matches", HybridOnlyKeyword),
    Fault("vector worst first", "hits_come_best_first", WorstFirst),
    Fault("scores out of order", "hits_come_best_first", ScoresNotInOrder),
    Fault("later pages worst first", "hits_come_best_first", LaterPagesWorstFirst),
    Fault("keyword without stemming", "keyword_matches_stemmed_terms_and_only_them", scoring(unstemmed)),
    Fault("keyword by substring", "keyword_matches_stemmed_terms_and_only_them", scoring(by_substring)),
    Fault("keyword matches stop words", "stop_words_alone_match_nothing", scoring(counting_stop_words)),
    Fault("phrases ignored", "quoted_phrases_are_honoured", scoring(phrases_ignored)),
    Fault("a mode served that is not listed", "a_mode_not_offered_is_unsupported", ServesModesItDoesNotList),
    Fault(
        "a blank query matches nothing", "a_blank_query_or_a_limit_out_of_range_is_refused", BlankQueryMatchesNothing
    ),
]


async def test_a_faithful_service_passes(embedder: WordLlamaEmbedder) -> None:
    assert failed(await outcomes_against(ReferenceEngine(embedder), ["ranking"])) == []


async def test_a_service_offering_fewer_modes_passes(embedder: WordLlamaEmbedder) -> None:
    assert failed(await outcomes_against(VectorAlone(embedder), ["ranking", "cursors", "filters"])) == []


@pytest.mark.parametrize("fault", FAULTS, ids=str)
async def test_each_fault_is_caught(fault: Fault, embedder: WordLlamaEmbedder) -> None:
    await assert_caught(fault, embedder, "ranking")
