"""Opens the PostgreSQL engine the settings describe, embedded or external."""

from __future__ import annotations

import logging
from typing import Any

import anyio.to_thread

from app.embeddings.blas import one_blas_thread
from app.embeddings.late import LateInteraction
from app.embeddings.protocol import Embedder
from app.embeddings.registry import build_embedder
from app.engine import answers
from app.engine.grounded import GroundedAnswerer
from app.engine.postgres import schema
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.options import EngineOptions
from app.engine.postgres.supervisor import EmbeddedSupervisor
from app.engine.reranking import Reranker
from app.settings import Settings

logger = logging.getLogger("engram")


async def resolve_database(settings: Settings, embedding_dim: int) -> str:
    """The database URL: the configured one, or the embedded server (started and migrated here, its
    vectors of ``embedding_dim`` when it is new)."""
    url, _ = await open_database(settings, embedding_dim)
    return url


async def open_database(settings: Settings, embedding_dim: int) -> tuple[str, Any]:
    """``resolve_database``'s URL, and the embedded server's handle (None for a configured URL)."""
    if settings.database_url is not None:
        return settings.database_url.get_secret_value(), None
    from app.engine.postgres.embedded import start_embedded

    url, server = await anyio.to_thread.run_sync(
        lambda: start_embedded(settings.data_dir, shared_buffers=settings.embedded_shared_buffers)
    )
    await anyio.to_thread.run_sync(
        lambda: schema.upgrade(url, embedding_dim=embedding_dim, text_search_config=settings.text_search_config)
    )
    return url, server


async def open_postgres_engine(
    settings: Settings, embedder: Embedder | None = None, options: EngineOptions | None = None
) -> PostgresEngine:
    """The engine with the configured embedder (or ``embedder``, already loaded), tuned by the
    settings (or by ``options``: a command's own)."""
    one_blas_thread()
    # Loaded first: a model that will not load ends the start before a database is made for it.
    embedder = embedder or await anyio.to_thread.run_sync(build_embedder, settings)
    answerer = GroundedAnswerer.from_settings(settings)
    reranker = await anyio.to_thread.run_sync(Reranker.from_settings, settings)
    late = (
        await anyio.to_thread.run_sync(lambda: LateInteraction(threads=settings.embedding_threads))
        if settings.late_interaction_on
        else None
    )
    try:
        url, embedded = await open_database(settings, embedder.dimension)
        engine = await PostgresEngine.connect(
            url,
            embedder,
            options=options or settings.engine_options,
            limits=settings.limits,
            owns_embedder=True,
            answerer=answerer,
            reranker=reranker,
            # The embedded server, started again should it die while the engine is open.
            supervisor=EmbeddedSupervisor(embedded, settings.data_dir) if embedded is not None else None,
            read_url=settings.read_database_url.get_secret_value() if settings.read_database_url else None,
            late=late,
        )
    except BaseException:
        await embedder.aclose()  # a refused start leaves no connection to the endpoint behind
        if answerer is not None:
            await answerer.aclose()
        raise
    answering = answerer.name if answerer is not None else answers.MODEL
    ranking = f", re-ranking the first {reranker.depth} by {reranker.model.name}" if reranker is not None else ""
    if late is not None:
        ranking += f", late interaction by {late.name}"
    read_url = settings.read_database_url
    reads = f", reads on {schema.redacted(read_url.get_secret_value())}" if read_url is not None else ""
    logger.info(
        "database: %s%s, embedder: %s, answers: %s%s", schema.redacted(url), reads, embedder.name, answering, ranking
    )
    return engine
