"""A private service for one evaluation: its own PostgreSQL in a temporary directory, served in-process.

Nothing the user keeps is touched: the configured database (ENGRAM_DATABASE_URL or the data
directory) is never opened, and the temporary server and its files are gone afterwards.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import SecretStr

from app.embeddings.protocol import Embedder
from app.engine.postgres.engine import PostgresEngine
from app.settings import Settings


@contextmanager
def private_database(settings: Settings, embedding_dim: int) -> Iterator[str]:
    """Start an embedded PostgreSQL in a fresh temporary directory, migrated; yield its URL; remove it all."""
    from app.engine.postgres import schema
    from app.engine.postgres.embedded import start_embedded

    directory = Path(tempfile.mkdtemp(prefix="engram-eval-"))
    server = None
    try:
        url, server = start_embedded(directory, shared_buffers=settings.embedded_shared_buffers)
        schema.upgrade(url, embedding_dim=embedding_dim, text_search_config=settings.text_search_config)
        yield url
    finally:
        if server is not None:
            server.cleanup()
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class PrivateService:
    """A client of the in-process app, and a way to settle its statistics once the set is stored."""

    client: httpx.AsyncClient
    engine: PostgresEngine

    async def settle(self) -> None:
        """Gather the statistics keyword ranking reads, as autovacuum would in its own time: asked
        while it ran, a question's modes would be ranked over different statistics. With late
        interaction, every item's token vectors are made first, as they are in time."""
        await self.engine.finish_token_vectors()
        await self.engine.gather_statistics()


@asynccontextmanager
async def in_process_service(
    settings: Settings, database_url: str, embedder: Embedder
) -> AsyncIterator[PrivateService]:
    """The app built from ``settings`` with the configured ``embedder`` over ``database_url``, inside its lifespan."""
    from app.engine.postgres.service import open_postgres_engine
    from app.engine.protocol import MemoryEngine
    from app.main import create_app

    opened: list[PostgresEngine] = []

    async def engine_with_the_embedder(served: Settings) -> MemoryEngine:
        opened.append(await open_postgres_engine(served, embedder))
        return opened[0]

    app = create_app(
        settings.model_copy(update={"database_url": SecretStr(database_url), "api_keys": None, "api_keys_file": None}),
        engine_factory=engine_with_the_embedder,
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.eval", timeout=60) as client:
            yield PrivateService(client, opened[0])
