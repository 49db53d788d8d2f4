"""Alembic environment: runs migrations over an async (asyncpg) connection.

The runner in ``app.engine.postgres.schema`` passes the URL and the settings the
DDL depends on (embedding dimension, text search configuration) as attributes.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


async def _main() -> None:
    url = context.config.attributes["url"]
    engine = create_async_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


def _run_blocking() -> None:
    """Run to completion whether or not the caller already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_main())
        return
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, _main()).result()


if context.is_offline_mode():
    raise SystemExit("engram migrations run online only: use `engram migrate`")
_run_blocking()
