"""``engram reembed``: switch a database to the configured embedder by re-embedding every item.

The service refuses to start when the configured embedder is not the one the
database's vectors were made with; this is the documented way past that. It
runs in one transaction, so a failure half way leaves the old vectors intact:
old vectors out, the column retyped when the dimension changes, new vectors in
(keyset batches over ``seq``), the HNSW index built afresh, the settings rewritten.
Writers wait for it (the items table is locked against writes); stop the
service first anyway, since it still runs the old embedder.
"""

from __future__ import annotations

import sys

import asyncpg
from tqdm import tqdm

from app.contract.errors import ConfigError
from app.embeddings.protocol import Embedder
from app.embeddings.registry import build_embedder
from app.engine.context import BEFORE_ITEMS, embedded_text
from app.engine.postgres.errors import database_errors
from app.engine.postgres.pool import APPLICATION_NAME
from app.engine.postgres.queries.backlog import POSTING_KEYS
from app.engine.postgres.queries.vector import HNSW_INDEX, hnsw_index_sql
from app.engine.postgres.schema import driver_url, ensure_current
from app.engine.postgres.service import resolve_database
from app.engine.postgres.vectors import register_vector_types, vector_array
from app.settings import Settings

# Connections of a running service (pool.APPLICATION_NAME) to this database.
SERVICE_SESSIONS = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND application_name = $1 AND pid <> pg_backend_pid()"
)
# For pgvector a column's type modifier is its dimension.
COLUMN_DIMENSION = (
    "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'engram_embeddings'::regclass AND attname = 'embedding'"
)
INSERT_VECTORS = (
    "INSERT INTO engram_embeddings (item_id, model, embedding) "
    "SELECT t.id, $1, t.v FROM unnest(CAST($2 AS text[]), CAST($3 AS vector[])) AS t(id, v)"
)
# Each indexed vector's sketch beside it, filed as the indexer files it (queries.backlog.MOVE_BACKLOG).
INSERT_SKETCHES = (
    "INSERT INTO engram_sketch_postings (key, seq, item_id, sketch) "
    "SELECT k.key, i.seq, i.id, binary_quantize(t.v) "
    "FROM unnest(CAST($1 AS text[]), CAST($2 AS vector[])) AS t(id, v) JOIN engram_items i ON i.id = t.id "
    f"CROSS JOIN LATERAL ({POSTING_KEYS}) AS k(key)"
)


# The next items in the order they were stored, each with the texts stored before it in its thread
# (engram_items_thread), oldest first: what a write embedded it after (app/engine/context.py).
ITEMS_IN_ORDER = """
    SELECT i.seq, i.id, i.text, ARRAY(
        SELECT l.text FROM (
            SELECT b.text, b.seq FROM engram_items b
            WHERE i.meta ? 'thread_id' AND b.namespace = i.namespace AND b.meta ? 'thread_id'
              AND b.meta->>'thread_id' = i.meta->>'thread_id' AND b.seq < i.seq
            ORDER BY b.seq DESC LIMIT $3
        ) AS l ORDER BY l.seq
    ) AS before
    FROM engram_items i
    WHERE i.seq > $1 ORDER BY i.seq LIMIT $2
"""


async def reembed(settings: Settings, *, batch_size: int = 256) -> int:
    """Re-embed every item with the configured embedder; the process exit code."""
    if batch_size < 1:
        raise ConfigError("batch size must be at least 1")
    embedder = build_embedder(settings)
    try:
        url = await resolve_database(settings, embedder.dimension)
        with database_errors():
            connection = await asyncpg.connect(driver_url(url))
        try:
            with database_errors():
                await ensure_current(connection)
                async with connection.transaction():
                    await _refuse_under_a_running_service(connection, embedder)
                    count = await _reembed(connection, embedder, batch_size)
        finally:
            await connection.close()
    finally:
        await embedder.aclose()
    print(f"engram: re-embedded {count} items with {embedder.name} ({embedder.dimension} dimensions)", flush=True)
    return 0


async def _refuse_under_a_running_service(connection: asyncpg.Connection, embedder: Embedder) -> None:
    """Another model under a running service would leave it embedding with the one it started with:
    its vector searches would find nothing and its stores fail. Re-embedding with the same model
    (rebuilding vectors) goes on beside it, its writes waiting for the locks."""
    held = await connection.fetchval("SELECT value FROM engram_settings WHERE key = 'embedder'")
    if held == embedder.name:
        return
    sessions = await connection.fetchval(SERVICE_SESSIONS, APPLICATION_NAME)
    if sessions:
        raise ConfigError(
            f"an engram service is connected to this database ({sessions} sessions) and embeds with {held}: "
            f"stop it before re-embedding with {embedder.name}, then start it with the new settings"
        )


async def _reembed(connection: asyncpg.Connection, embedder: Embedder, batch_size: int) -> int:
    """Every item's vector made again, in one transaction (a savepoint inside the caller's)."""
    async with connection.transaction():
        return await _reembed_in(connection, embedder, batch_size)


async def _reembed_in(connection: asyncpg.Connection, embedder: Embedder, batch_size: int) -> int:
    await register_vector_types(connection)
    # Reads go on; stores and forgets wait, so no item is left without a vector.
    await connection.execute("LOCK TABLE engram_items IN SHARE MODE")
    # In the order every writer and the vector indexer take them (queries.backlog.INDEXER_LOCK_ORDER).
    await connection.execute(
        "LOCK TABLE engram_vector_backlog, engram_embeddings, engram_sketch_postings IN ACCESS EXCLUSIVE MODE"
    )
    # A bulk load then one index build is far faster than growing the index row by row.
    await connection.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
    # The old model's vectors, indexed or still queued for the index (migration 0004), and their sketches.
    await connection.execute("TRUNCATE engram_vector_backlog, engram_embeddings, engram_sketch_postings")
    # Items in the undo window keep their text; a restore embeds them again with the new model.
    await connection.execute("UPDATE engram_forgotten SET model = NULL, embedding = NULL WHERE model IS NOT NULL")
    current = await connection.fetchval(COLUMN_DIMENSION)
    if current != embedder.dimension:
        for table in ("engram_embeddings", "engram_vector_backlog", "engram_forgotten"):
            await connection.execute(
                f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({int(embedder.dimension)})"
            )
        await connection.execute(
            f"ALTER TABLE engram_sketch_postings ALTER COLUMN sketch TYPE bit({int(embedder.dimension)})"
        )
    total = int(await connection.fetchval("SELECT count(*) FROM engram_items") or 0)
    done, after = 0, 0
    with tqdm(total=total, unit="item", desc="re-embedding", file=sys.stderr) as progress:
        while True:
            rows = await connection.fetch(ITEMS_IN_ORDER, after, batch_size, BEFORE_ITEMS)
            if not rows:
                break
            vectors = vector_array(await embedder.embed([embedded_text(row["text"], row["before"]) for row in rows]))
            ids = [row["id"] for row in rows]
            await connection.execute(INSERT_VECTORS, embedder.name, ids, vectors)
            await connection.execute(INSERT_SKETCHES, ids, vectors)
            after = rows[-1]["seq"]
            done += len(rows)
            progress.update(len(rows))
    # Made afresh, not replayed: the index casts to the dimension, which may have changed.
    await connection.execute(hnsw_index_sql(embedder.dimension))
    await connection.execute(
        "INSERT INTO engram_settings (key, value) VALUES ('embedder', $1), ('embedding_dim', $2) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        embedder.name,
        str(embedder.dimension),
    )
    return done
