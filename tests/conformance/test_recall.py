"""The recall checks pass against a faithful service and catch citations that leak, overflow or dangle."""

from __future__ import annotations

import pytest

from app.contract.errors import InvalidRequest
from app.contract.meta import Filter
from app.contract.requests import Citation, RecallAnswer, RecallRequest
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine import answers
from app.engine.reference import ReferenceEngine
from tests.conformance.faults import Fault, assert_caught
from tests.conformance.support import failed, outcomes_against


class Answering(ReferenceEngine):
    """The reference engine's recall with its answer passed through ``change``."""

    def change(self, answer: RecallAnswer, request: RecallRequest) -> RecallAnswer:
        return answer

    async def recall(self, request: RecallRequest) -> RecallAnswer:
        return self.change(await super().recall(request), request)


class FilterIgnored(ReferenceEngine):
    async def recall(self, request: RecallRequest) -> RecallAnswer:
        return await super().recall(request.model_copy(update={"filter": Filter()}))


class OnlyTheReachBinds(ReferenceEngine):
    """Recall keeps its filter's reach and drops the rest of it."""

    async def recall(self, request: RecallRequest) -> RecallAnswer:
        return await super().recall(request.model_copy(update={"filter": Filter(reach=request.filter.reach)}))


class OneCitationTooMany(ReferenceEngine):
    async def recall(self, request: RecallRequest) -> RecallAnswer:
        return await super().recall(request.model_copy(update={"limit": request.limit + 1}))


class BlankWhenNothingIsStored(Answering):
    def change(self, answer: RecallAnswer, request: RecallRequest) -> RecallAnswer:
        return answer if answer.citations else answer.model_copy(update={"answer": ""})


class KeywordOnly(ReferenceEngine):
    """Cites only items sharing a word with the question: a filter's items go uncited."""

    async def recall(self, request: RecallRequest) -> RecallAnswer:
        request = request.checked()
        ranked = await self._rank(request.question, "keyword", request.filter)
        hits = [record.hit(item_id, score) for item_id, record, score in ranked[: request.limit]]
        return answers.compose(request.question, hits)


class CitesIdsItDoesNotHold(Answering):
    def change(self, answer: RecallAnswer, request: RecallRequest) -> RecallAnswer:
        cited = [c.model_copy(update={"id": c.id[::-1]}) for c in answer.citations]
        return answer.model_copy(update={"citations": cited})


class CitesTheWrongKind(Answering):
    def change(self, answer: RecallAnswer, request: RecallRequest) -> RecallAnswer:
        cited = [Citation(**(c.model_dump() | {"kind": "document"})) for c in answer.citations]
        return answer.model_copy(update={"citations": cited})


class InstructionsRefused(ReferenceEngine):
    async def recall(self, request: RecallRequest) -> RecallAnswer:
        if request.instructions is not None:
            raise InvalidRequest("instructions are not supported")
        return await super().recall(request)


FAULTS = [
    Fault("recall ignores its filter", "citations_stay_within_the_limit_and_the_filter", FilterIgnored),
    Fault("recall ignores all but the reach", "citations_stay_within_the_limit_and_the_filter", OnlyTheReachBinds),
    Fault("one citation too many", "citations_stay_within_the_limit_and_the_filter", OneCitationTooMany),
    Fault("a blank answer when nothing is stored", "the_answer_is_never_blank", BlankWhenNothingIsStored),
    Fault("only items sharing a word are cited", "a_filter_that_admits_items_gets_a_citation", KeywordOnly),
    Fault("citation ids that do not resolve", "citation_ids_resolve_through_get", CitesIdsItDoesNotHold),
    Fault("citations of the wrong kind", "citation_ids_resolve_through_get", CitesTheWrongKind),
    Fault("instructions refused", "instructions_are_accepted", InstructionsRefused),
]


async def test_a_faithful_service_passes(embedder: WordLlamaEmbedder) -> None:
    assert failed(await outcomes_against(ReferenceEngine(embedder), ["recall"])) == []


@pytest.mark.parametrize("fault", FAULTS, ids=str)
async def test_each_fault_is_caught(fault: Fault, embedder: WordLlamaEmbedder) -> None:
    await assert_caught(fault, embedder, "recall")
