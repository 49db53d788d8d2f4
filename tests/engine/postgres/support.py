"""What the PostgreSQL engine's tests share: items, counts, injected failures, statistics gathered."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from app.contract.items import ITEM_ADAPTER, StoredItem
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.options import PoolOptions
from app.engine.postgres.queries.statement import Statement


def learning(text_: str, **meta: Any) -> StoredItem:
    return ITEM_ADAPTER.validate_python(
        {"type": "learning", "text": text_, "kind": "fact", "confidence": 0.5, "meta": meta}
    )


async def tables_holding(engine: PostgresEngine, *texts: str) -> list[str]:
    """Every engram table with a row that holds any of ``texts`` (in any column), by name."""
    tables = await engine.run(
        Statement("SELECT relname FROM pg_class WHERE relkind = 'r' AND relname LIKE 'engram_%' ORDER BY relname")
    )
    holding = []
    for (table,) in tables:
        held = (
            f"SELECT count(*) AS n FROM {table} t"
            " WHERE EXISTS (SELECT FROM unnest($1::text[]) x WHERE strpos(t::text, x) > 0)"
        )
        if (await engine.run(Statement(held, (list(texts),))))[0]["n"]:
            holding.append(table)
    return holding


async def count_rows(engine: PostgresEngine) -> tuple[int, int]:
    """Items, and vectors wherever they are: in the index or still queued for it."""
    async with engine.connection() as connection:
        items = await connection.fetchval("SELECT count(*) FROM engram_items")
        vectors = await connection.fetchval(
            "SELECT (SELECT count(*) FROM engram_embeddings) + (SELECT count(*) FROM engram_vector_backlog)"
        )
    return int(items or 0), int(vectors or 0)


@contextlib.asynccontextmanager
async def failing_insert(engine: PostgresEngine, table: str, column: str, value: str) -> AsyncIterator[None]:
    """Make PostgreSQL refuse to insert into ``table`` a row whose ``column`` is ``value``."""
    async with engine.connection() as connection, connection.transaction():
        await connection.execute(
            "CREATE FUNCTION engram_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN IF NEW.{column} = '{value}' THEN RAISE EXCEPTION 'injected failure'; END IF; "
            "RETURN NEW; END $$"
        )
        await connection.execute(
            f"CREATE TRIGGER engram_test_fail BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION engram_test_fail()"
        )
    try:
        yield
    finally:
        async with engine.connection() as connection, connection.transaction():
            await connection.execute(f"DROP TRIGGER engram_test_fail ON {table}")
            await connection.execute("DROP FUNCTION engram_test_fail()")


async def analyse(pg_engine: PostgresEngine) -> None:
    """Gather the statistics keyword ranking reads its word frequencies from."""
    async with pg_engine.connection() as connection:
        await connection.execute("ANALYZE engram_items")
    pg_engine.forget_term_statistics()


# A keyword budget no estimate reaches: every match is scored.
EVERY_MATCH = 2**31 - 1


async def stored_in_table_order(pg_engine: PostgresEngine, *groups: list[StoredItem]) -> None:
    """Each group stored after the one before it, in batches of 100, the table rewritten in the order
    they were stored (each pooled connection's inserts fill its own free pages, so two batches'
    rows may interleave), then the statistics gathered."""
    for group in groups:
        for start in range(0, len(group), 100):
            await pg_engine.store_many(group[start : start + 100])
    async with pg_engine.connection() as connection:
        await connection.execute("CLUSTER engram_items USING engram_items_seq")
    await analyse(pg_engine)


class WrappedEmbedder:
    """The real embedder, passed through; a subclass watches or spoils what it embeds for stored texts."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def name(self) -> str:
        return str(self._inner.name)

    @property
    def dimension(self) -> int:
        return int(self._inner.dimension)

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await self._inner.embed(texts)

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        return await self._inner.embed_queries(texts)

    async def aclose(self) -> None:
        return None


# One connection a pool, so every statement a test makes is on it.
ONE_CONNECTION = PoolOptions(size=1, overflow=0)
