"""The envelope checks pass against a faithful service and each catches its fault."""

from __future__ import annotations

import pytest

from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.reference import ReferenceEngine
from tests.conformance.faults import Fault, assert_caught
from tests.conformance.middleware import Answer, rewriting, with_headers
from tests.conformance.support import failed, outcomes_against


def _drop_a_code(answer: Answer) -> None:
    if answer.path == "/v1/errors":
        answer.json = {"errors": [e for e in answer.json["errors"] if e["code"] != "conflict"]}


def _null_endpoint(answer: Answer) -> None:
    if answer.path == "/v1/engine":
        answer.json = {**answer.json, "default_endpoint": None}


def _health_as_envelope(answer: Answer) -> None:
    if answer.path == "/v1/health":
        answer.json = {"code": "ok", "message": "fine", "retryable": False, "request_id": "x"}


def _period(answer: Answer) -> None:
    if answer.status >= 400:
        answer.json = {**answer.json, "message": answer.json["message"] + "."}


def _other_request_id(answer: Answer) -> None:
    if answer.status >= 400:
        answer.headers["x-request-id"] = "not-the-envelopes"


def _unknown_route_is_empty(answer: Answer) -> None:
    if answer.status == 404:
        answer.status, answer.json = 200, {}


def _wrong_method_is_not_found(answer: Answer) -> None:
    if answer.status == 405:
        answer.status = 404
        answer.json = {**answer.json, "code": "not_found", "message": "not found: " + answer.json["message"]}


def _null_confidence(answer: Answer) -> None:
    if answer.path == "/v1/list" and answer.status == 200:
        page = answer.json
        answer.json = {**page, "items": [{**hit, "confidence": None} for hit in page["items"]]}


def _replay_created(answer: Answer) -> None:
    if answer.path == "/v1/store" and answer.status == 200:
        answer.status = 201


def _no_request_id_made(answer: Answer) -> None:
    if answer.path == "/v1/engine":
        answer.headers.pop("x-request-id", None)


def _lists_keyword_only(answer: Answer) -> None:
    """The descriptor lists only the keyword mode; the others are served anyway."""
    if answer.path == "/v1/engine":
        answer.json = {**answer.json, "fetch_modes": ["keyword"]}


FAULTS = [
    Fault(
        "the catalogue leaves out conflict", "error_catalogue_lists_the_contract_codes", wrap=rewriting(_drop_a_code)
    ),
    Fault("the descriptor holds a null", "engine_descriptor_has_its_keys", wrap=rewriting(_null_endpoint)),
    Fault("health answers an envelope", "health_is_a_state_never_an_envelope", wrap=rewriting(_health_as_envelope)),
    Fault("messages end with a period", "every_refusal_is_the_envelope", wrap=rewriting(_period)),
    Fault("request_id is not the header", "every_refusal_is_the_envelope", wrap=rewriting(_other_request_id)),
    Fault("an unknown route answers 200", "unknown_route_is_a_404_envelope", wrap=rewriting(_unknown_route_is_empty)),
    Fault("a wrong method is a 404", "wrong_method_is_a_405_envelope", wrap=rewriting(_wrong_method_is_not_found)),
    Fault("list hits hold a null", "reads_answer_their_shape", wrap=rewriting(_null_confidence)),
    Fault("a replay answers 201", "writes_answer_their_shape", wrap=rewriting(_replay_created)),
    Fault("no request id is made", "request_id_is_made_when_not_usable", wrap=rewriting(_no_request_id_made)),
    Fault("an unlisted mode is served", "unlisted_fetch_mode_is_unsupported", wrap=rewriting(_lists_keyword_only)),
    Fault(
        "a proxy adds the key to calls without one",
        "missing_key_is_a_401",
        wrap=with_headers({"authorization": "Bearer the-key"}),
        api_key="the-key",
    ),
]


async def test_a_faithful_service_passes(embedder: WordLlamaEmbedder) -> None:
    assert failed(await outcomes_against(ReferenceEngine(embedder), ["envelope"])) == []


async def test_a_faithful_service_with_a_key_passes(embedder: WordLlamaEmbedder) -> None:
    assert failed(await outcomes_against(ReferenceEngine(embedder), ["envelope"], api_key="the-key")) == []


@pytest.mark.parametrize("fault", FAULTS, ids=str)
async def test_each_fault_is_caught(fault: Fault, embedder: WordLlamaEmbedder) -> None:
    await assert_caught(fault, embedder, "envelope")
