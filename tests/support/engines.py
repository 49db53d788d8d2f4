"""What tests do to an engine or an app beyond the contract: empty its tables, serve it, type its client factory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from starlette.types import ASGIApp

from app.engine.postgres.engine import PostgresEngine
from app.engine.protocol import MemoryEngine
from app.main import create_app
from app.settings import Settings

# ``async with make_client(api_keys="k") as client``: the conftest fixture's type.
ClientFactory = Callable[..., Any]
# A middleware put around the app (a fault in the HTTP layer).
Wrapper = Callable[[ASGIApp], ASGIApp]


async def truncate(engine: PostgresEngine) -> None:
    """Every item, vector, sketch, key and retention policy gone: a clean store for the next test, its schema kept."""
    async with engine.connection() as connection:
        await connection.execute(
            "TRUNCATE engram_items, engram_vector_backlog, engram_embeddings, engram_sketch_postings, engram_keys,"
            " engram_forgotten, engram_retention, engram_token_vectors"
        )


@asynccontextmanager
async def app_client(
    engine: MemoryEngine,
    settings: Settings | None = None,
    *,
    wrap: Wrapper | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app serving ``engine`` over ASGI (real HTTP semantics), inside the app's
    lifespan (which closes the engine on the way out). An error in the app is its 500, as a
    client would see it."""

    async def given(_: Settings) -> MemoryEngine:
        return engine

    app = create_app(settings or Settings(), engine_factory=given)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=wrap(app) if wrap else app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.test", headers=headers) as client:
            yield client
