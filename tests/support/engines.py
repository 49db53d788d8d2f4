"""What tests do to an engine or an app beyond the contract: empty its tables, type its client factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.engine.postgres.engine import PostgresEngine

# ``async with make_client(api_keys="k") as client``: the conftest fixture's type.
ClientFactory = Callable[..., Any]


async def truncate(engine: PostgresEngine) -> None:
    """Every item, vector, sketch, key and retention policy gone: a clean store for the next test, its schema kept."""
    async with engine.connection() as connection:
        await connection.execute(
            "TRUNCATE engram_items, engram_vector_backlog, engram_embeddings, engram_sketch_postings, engram_keys,"
            " engram_forgotten, engram_retention"
        )
