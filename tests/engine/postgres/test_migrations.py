"""Migrations a deployment can trust, against a server reached by URL.

Each test takes a fresh database on a scratch server of its own (tests/support/scratch.py),
so the shared test schema is never touched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.contract.errors import ConfigError
from app.contract.items import StoredItem
from app.contract.requests import FetchRequest, ForgetByIds, ListRequest
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.postgres import schema
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.options import EngineOptions, HNSWOptions, IndexerOptions
from app.main import create_app
from app.settings import Settings
from tests.engine.postgres.support import learning
from tests.engine.postgres.test_facet_counts import assert_counts_match_the_items, varied_items
from tests.support.processes import free_port
from tests.support.scratch import SKETCHES_OFF, ScratchServer, learnings, run_engram, scratch_server

# No background indexer: a backlog stays until a test indexes it.
QUIET = EngineOptions(indexer=IndexerOptions(background=False))

MIGRATE_HINT = "run `engram migrate`"
# Items whose sketch (migration 0008, on the item's own row) is not their vector's, indexed or queued.
ITEM_SKETCHES_OFF = """
    SELECT count(*) FROM engram_items i
    LEFT JOIN (
        SELECT item_id, embedding FROM engram_embeddings UNION ALL SELECT item_id, embedding FROM engram_vector_backlog
    ) AS v ON v.item_id = i.id
    WHERE i.sketch IS DISTINCT FROM binary_quantize(v.embedding)
"""
# Sketches in the narrow table (migration 0009) that are not their indexed vector's or their item's
# (seq, tags, lineage), indexed vectors without one, and sketches without an indexed vector.
NARROW_SKETCHES_OFF = """
    SELECT (SELECT count(*) FROM engram_embeddings e
            JOIN engram_items i ON i.id = e.item_id
            LEFT JOIN engram_sketches s ON s.item_id = e.item_id
            WHERE s.sketch IS DISTINCT FROM binary_quantize(e.embedding) OR s.seq IS DISTINCT FROM i.seq
               OR s.tags IS DISTINCT FROM i.tags OR s.lineage IS DISTINCT FROM i.lineage)
         + (SELECT count(*) FROM engram_sketches s
            WHERE NOT EXISTS (SELECT 1 FROM engram_embeddings e WHERE e.item_id = s.item_id))
"""
VECTOR_INDEX_DEF = "SELECT indexdef FROM pg_indexes WHERE indexname = 'engram_embeddings_hnsw'"


@pytest.fixture(scope="module")
def scratch() -> Iterator[ScratchServer]:
    with scratch_server() as server:
        yield server


async def _upgrade(url: str, revision: str = "head", dim: int = 256) -> None:
    await asyncio.to_thread(schema.upgrade, url, embedding_dim=dim, text_search_config="english", revision=revision)


async def _downgrade(url: str, revision: str) -> None:
    await asyncio.to_thread(schema.downgrade, url, revision=revision)


async def _scalar(url: str, sql: str) -> object:
    engine = create_async_engine(schema.async_url(url))
    try:
        async with engine.connect() as connection:
            return await connection.scalar(text(sql))
    finally:
        await engine.dispose()


async def _execute(url: str, sql: str) -> None:
    engine = create_async_engine(schema.async_url(url))
    try:
        async with engine.begin() as connection:
            await connection.execute(text(sql))
    finally:
        await engine.dispose()


async def _version(url: str) -> str | None:
    if not await _scalar(url, "SELECT to_regclass('alembic_version') IS NOT NULL"):
        return None
    return await _scalar(url, "SELECT version_num FROM alembic_version")  # type: ignore[return-value]


async def _tables(url: str) -> set[str]:
    engine = create_async_engine(schema.async_url(url))
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'engram_%'")
            )
            return {row.tablename for row in rows}
    finally:
        await engine.dispose()


def _revisions() -> list[str]:
    """Every revision, oldest first."""
    config = Config()
    config.set_main_option("script_location", str(resources.files("migrations")))
    return [script.revision for script in reversed(list(ScriptDirectory.from_config(config).walk_revisions()))]


async def _stored_ids(url: str, embedder: WordLlamaEmbedder) -> list[str]:
    engine = await PostgresEngine.connect(url, embedder)
    try:
        page = await engine.list(ListRequest(limit=1000))
        return [hit.id for hit in page.items]
    finally:
        await engine.close()


async def test_upgrade_downgrade_upgrade_keeps_what_it_promises(
    scratch: ScratchServer, embedder: WordLlamaEmbedder
) -> None:
    url = scratch.new_database()
    assert await _version(url) is None

    # Up one revision at a time, each step recorded.
    for revision in _revisions():
        await _upgrade(url, revision)
        assert await _version(url) == revision
    assert await _tables(url) == {
        "engram_items",
        "engram_embeddings",
        "engram_vector_backlog",
        "engram_sketch_postings",
        "engram_facet_counts",
        "engram_settings",
        "engram_keys",
        "engram_forgotten",
        "engram_retention",
        "engram_token_vectors",
    }

    engine = await PostgresEngine.connect(url, embedder)
    items = learnings(5)
    await engine.store_many(items)
    await engine.close()
    ids = [item.fingerprint() for item in items]

    # Upgrading a database already at head is a no-op that keeps the data.
    await _upgrade(url)
    assert await _version(url) == schema.head_revision()
    assert await _stored_ids(url, embedder) == ids

    # Down to base one revision at a time: the schema goes entirely.
    for previous in [*reversed(_revisions()[:-1]), "base"]:
        await _downgrade(url, previous)
        assert await _version(url) == (None if previous == "base" else previous)
    assert await _tables(url) == set()

    # And up again: a working, empty schema.
    await _upgrade(url)
    assert await _version(url) == schema.head_revision()
    assert await _stored_ids(url, embedder) == []
    engine = await PostgresEngine.connect(url, embedder)
    try:
        await engine.store_many(items[:2])
        page = await engine.fetch(FetchRequest(query=items[1].render_text(), mode="vector", limit=1))
        assert [hit.id for hit in page.hits] == [ids[1]]
    finally:
        await engine.close()


async def test_0015_leaves_every_item_held_without_an_expiry(
    scratch: ScratchServer, embedder: WordLlamaEmbedder
) -> None:
    url = scratch.new_database()
    await _upgrade(url)
    items = learnings(6)
    ids = [item.fingerprint() for item in items]
    engine = await PostgresEngine.connect(url, embedder)
    await engine.store_many(items)
    await engine.close()
    await _downgrade(url, "0014")
    await _upgrade(url)
    assert await _scalar(url, "SELECT count(*) FROM engram_items WHERE expires_at IS NULL") == 6
    assert await _stored_ids(url, embedder) == ids


async def test_0016_keeps_expires_at_beside_observed_at_in_its_index(scratch: ScratchServer) -> None:
    url = scratch.new_database()
    await _upgrade(url)
    indexes = (
        "SELECT string_agg(indexdef, ' | ' ORDER BY indexname) FROM pg_indexes WHERE indexdef LIKE '%(observed_at)%'"
    )
    assert await _scalar(url, indexes) == (
        "CREATE INDEX engram_items_observed ON public.engram_items USING btree (observed_at) INCLUDE (expires_at)"
        " WHERE (observed_at IS NOT NULL)"
    )
    await _downgrade(url, "0015")
    assert await _scalar(url, indexes) == (
        "CREATE INDEX engram_items_observed_at ON public.engram_items USING btree (observed_at)"
    )


async def test_0002_rebuilds_the_vector_index_over_the_vectors_already_stored(
    scratch: ScratchServer, embedder: WordLlamaEmbedder
) -> None:
    url = scratch.new_database()
    await _upgrade(url)
    items = learnings(12)
    engine = await PostgresEngine.connect(url, embedder)
    await engine.store_many(items)
    await engine.close()
    await _downgrade(url, "0001")
    assert "USING hnsw (embedding vector_cosine_ops)" in str(await _scalar(url, VECTOR_INDEX_DEF))
    await _upgrade(url, "0002")
    assert "((embedding)::halfvec(256)) halfvec_cosine_ops" in str(await _scalar(url, VECTOR_INDEX_DEF))
    assert "ef_construction='40'" in str(await _scalar(url, VECTOR_INDEX_DEF))
    await _upgrade(url)
    engine = await PostgresEngine.connect(url, embedder)
    try:
        for item in items[:3]:
            page = await engine.fetch(FetchRequest(query=item.render_text(), mode="vector", limit=1))
            assert [hit.id for hit in page.hits] == [item.fingerprint()]
    finally:
        await engine.close()


# 2,000 rows of 20 distinct words each: ~40,000 new GIN entries, ~1.5 MB of pending list.
_MANY_WORDS = """
    INSERT INTO engram_items (id, kind, namespace, text, meta, item, source_kind)
    SELECT substr(md5('{tag}' || i) || md5('{tag}' || -i), 1, 40), 'learning', '',
           (SELECT string_agg(md5('{tag}' || (i * 100 + j)), ' ') FROM generate_series(1, 20) AS j),
           '{{}}', '{{}}', 'agent'
    FROM generate_series(1, 2000) AS i
"""


async def _pending_pages(url: str, index: str) -> int:
    """Merges the index's pending list and says how many pages it held."""
    return int(await _scalar(url, f"SELECT gin_clean_pending_list('{index}'::regclass)"))  # type: ignore[arg-type]


async def test_0003_keeps_the_gin_pending_lists_short(scratch: ScratchServer) -> None:
    """Every search reads a GIN index's whole pending list: 0003 caps it at 128 kB (16 pages)."""
    url = scratch.new_database()
    await _upgrade(url, "0002")
    await _execute(url, _MANY_WORDS.format(tag="before"))
    queued = await _pending_pages(url, "engram_items_tsv")
    assert queued > 100  # PostgreSQL's 4 MB default lets it grow this long
    await _execute(url, _MANY_WORDS.format(tag="again"))  # queued again, for the migration to merge
    await _upgrade(url, "0003")
    for index in ("engram_items_tsv", "engram_items_tags", "engram_items_meta"):
        options = await _scalar(url, f"SELECT reloptions FROM pg_class WHERE relname = '{index}'")
        assert options == ["gin_pending_list_limit=128"]
        assert await _pending_pages(url, index) == 0  # merged by the migration
    await _execute(url, _MANY_WORDS.format(tag="after"))
    assert await _pending_pages(url, "engram_items_tsv") <= 17
    await _downgrade(url, "0002")
    assert await _scalar(url, "SELECT reloptions FROM pg_class WHERE relname = 'engram_items_tsv'") is None


async def test_the_vector_column_takes_its_dimension_from_configuration(scratch: ScratchServer) -> None:
    url = scratch.new_database()
    await _upgrade(url, dim=64)
    column = await _scalar(
        url,
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'engram_embeddings'::regclass AND attname = 'embedding'",
    )
    assert column == "vector(64)"
    assert await _scalar(url, "SELECT value FROM engram_settings WHERE key = 'embedding_dim'") == "64"
    index = await _scalar(url, VECTOR_INDEX_DEF)
    assert "::halfvec(64)) halfvec_cosine_ops" in str(index)
    small = WordLlamaEmbedder(64)
    engine = await PostgresEngine.connect(url, small)
    try:
        await engine.store_many(learnings(3))
        page = await engine.fetch(FetchRequest(query="violin", mode="vector", limit=3))
        assert len(page.hits) == 3
    finally:
        await engine.close()


async def test_pgvector_may_live_in_a_schema_of_its_own(scratch: ScratchServer, embedder: WordLlamaEmbedder) -> None:
    """As hosted PostgreSQL often has it (Supabase: "extensions"): vectors still go over in binary and are found."""
    url = scratch.new_database()
    await _execute(url, "CREATE SCHEMA extensions")
    await _execute(url, "CREATE EXTENSION vector SCHEMA extensions")
    name = await _scalar(url, "SELECT current_database()")
    await _execute(url, f'ALTER DATABASE "{name}" SET search_path = "$user", public, extensions')
    await _upgrade(url)
    vector_schema = "SELECT typnamespace::regnamespace::text FROM pg_type WHERE oid = 'vector'::regtype"
    assert await _scalar(url, vector_schema) == "extensions"
    items = learnings(20, tags=["kept"])
    engine = await PostgresEngine.connect(url, embedder)
    try:
        await engine.store_many(items)
        await engine.finish_indexing()
        for request_filter in ({}, {"tags_any": ["kept"]}):
            request = FetchRequest(query=items[7].render_text(), mode="vector", limit=1, filter=request_filter)
            assert [hit.id for hit in (await engine.fetch(request)).hits] == [items[7].fingerprint()]
    finally:
        await engine.close()


async def test_engine_refuses_a_database_whose_schema_is_behind(scratch: ScratchServer) -> None:
    url = scratch.new_database()
    with pytest.raises(ConfigError) as caught:
        await PostgresEngine.connect(url, WordLlamaEmbedder())
    assert caught.value.message == (
        f"configuration error: database schema is at nothing but this version needs {schema.head_revision()}: "
        f"{MIGRATE_HINT}"
    )


async def test_app_startup_fails_on_a_schema_that_is_behind(scratch: ScratchServer) -> None:
    url = scratch.new_database()
    app = create_app(Settings(database_url=url))
    with pytest.raises(ConfigError, match="run `engram migrate`"):
        async with app.router.lifespan_context(app):
            pass
    # Nothing was created behind the user's back: the schema is still absent.
    assert await _version(url) is None


async def test_a_stray_revision_is_refused_too(scratch: ScratchServer) -> None:
    """A database stamped with a revision this version does not know (newer code ran on it)."""
    url = scratch.new_database()
    await _upgrade(url)
    engine = create_async_engine(schema.async_url(url))
    try:
        async with engine.begin() as connection:
            await connection.execute(text("UPDATE alembic_version SET version_num = 'future'"))
    finally:
        await engine.dispose()
    with pytest.raises(ConfigError) as caught:
        await PostgresEngine.connect(url, WordLlamaEmbedder())
    assert "database schema is at future" in caught.value.message


async def test_engram_migrate_is_idempotent_and_keeps_data(scratch: ScratchServer, embedder: WordLlamaEmbedder) -> None:
    url = scratch.new_database()
    first = run_engram("migrate", database_url=url, embedder="wordllama")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip().endswith(f"is at {schema.head_revision()}")
    engine = await PostgresEngine.connect(url, embedder)
    items = learnings(3)
    await engine.store_many(items)
    await engine.close()
    again = run_engram("migrate", database_url=url, embedder="wordllama")
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    assert await _stored_ids(url, embedder) == [item.fingerprint() for item in items]


def test_engram_serve_exits_with_one_line_on_a_schema_that_is_behind(scratch: ScratchServer) -> None:
    url = scratch.new_database()
    result = run_engram("serve", "--port", str(free_port()), database_url=url, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"engram: configuration error: database schema is at nothing but this version needs "
        f"{schema.head_revision()}: {MIGRATE_HINT}"
    )
    assert "Traceback" not in result.stderr + result.stdout
    assert "listening on" not in result.stdout


def test_engram_migrate_reports_an_unreachable_server(tmp_path: Path) -> None:
    result = run_engram("migrate", database_url=f"postgresql://engram:hunter2@/engram?host={tmp_path}", timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("engram: unavailable: ")
    assert "Traceback" not in result.stderr + result.stdout
    assert "hunter2" not in result.stderr + result.stdout


async def test_0004_downgrade_indexes_the_vectors_still_queued(
    scratch: ScratchServer, embedder: WordLlamaEmbedder
) -> None:
    url = scratch.new_database()
    await _upgrade(url)
    items = learnings(8)
    engine = await PostgresEngine.connect(url, embedder, options=QUIET)
    await engine.store_many(items)
    await engine.close()
    assert await _scalar(url, "SELECT count(*) FROM engram_vector_backlog") == 8
    await _downgrade(url, "0003")
    assert await _scalar(url, "SELECT to_regclass('engram_vector_backlog') IS NULL") is True
    assert await _scalar(url, "SELECT count(*) FROM engram_embeddings") == 8
    await _upgrade(url)
    engine = await PostgresEngine.connect(url, embedder)
    try:
        for item in items[:3]:
            page = await engine.fetch(FetchRequest(query=item.render_text(), mode="vector", limit=1))
            assert [hit.id for hit in page.hits] == [item.fingerprint()]
    finally:
        await engine.close()


async def _indexed_neighbours(url: str) -> int:
    """How many rows a walk of the HNSW index itself gives (no scan of the table to fall back on)."""
    engine = create_async_engine(schema.async_url(url))
    try:
        async with engine.begin() as connection:
            await connection.execute(text("SET LOCAL enable_seqscan = off"))
            await connection.execute(text("SET LOCAL hnsw.ef_search = 100"))
            query = """
                SELECT count(*) FROM (
                    SELECT item_id FROM engram_embeddings
                    ORDER BY embedding::halfvec(256) <=> (SELECT embedding::halfvec(256) FROM engram_embeddings LIMIT 1)
                    LIMIT 100
                ) AS nearest
            """
            plan = "\n".join(row[0] for row in await connection.execute(text("EXPLAIN " + query)))
            assert "engram_embeddings_hnsw" in plan
            return int(await connection.scalar(text(query)))  # type: ignore[arg-type]
    finally:
        await engine.dispose()


async def _with_indexed_learnings(scratch: ScratchServer, embedder: WordLlamaEmbedder, count: int) -> str:
    """A new database at head holding ``count`` learnings, every vector in the HNSW index; its URL."""
    url = scratch.new_database()
    await _upgrade(url)
    engine = await PostgresEngine.connect(url, embedder)
    await engine.store_many(learnings(count))
    await engine.finish_indexing()
    await engine.close()
    return url


async def _with_indexed_and_queued_learnings(
    scratch: ScratchServer, embedder: WordLlamaEmbedder, indexed: int, queued: int
) -> str:
    """As _with_indexed_learnings, and ``queued`` more learnings whose vectors wait in the backlog."""
    url = await _with_indexed_learnings(scratch, embedder, indexed)
    engine = await PostgresEngine.connect(url, embedder, options=QUIET)
    await engine.store_many(learnings(queued, topic="queued"))
    await engine.close()
    assert await _scalar(url, "SELECT count(*) FROM engram_vector_backlog") == queued
    return url


async def test_0005_rebuilds_the_vector_index_wider_and_keeps_every_vector_in_it(
    scratch: ScratchServer, embedder: WordLlamaEmbedder
) -> None:
    url = await _with_indexed_learnings(scratch, embedder, 12)
    await _downgrade(url, "0005")
    assert "ef_construction='100'" in str(await _scalar(url, VECTOR_INDEX_DEF))
    await _downgrade(url, "0004")
    assert "ef_construction='40'" in str(await _scalar(url, VECTOR_INDEX_DEF))
    assert await _indexed_neighbours(url) == 12
    await _upgrade(url, "0005")
    assert "ef_construction='100'" in str(await _scalar(url, VECTOR_INDEX_DEF))
    assert await _indexed_neighbours(url) == 12


async def test_0007_rebuilds_the_vector_index_at_the_breadth_the_engine_builds_it_with(
    scratch: ScratchServer, embedder: WordLlamaEmbedder
) -> None:
    url = await _with_indexed_learnings(scratch, embedder, 12)
    # Re-embedding builds the index from hnsw_index_sql: it and the migrations must agree.
    assert f"ef_construction='{HNSWOptions.ef_construction}'" in str(await _scalar(url, VECTOR_INDEX_DEF))
    await _downgrade(url, "0006")
    assert "ef_construction='100'" in str(await _scalar(url, VECTOR_INDEX_DEF))
    assert await _indexed_neighbours(url) == 12
    await _upgrade(url, "0007")
    assert "ef_construction='80'" in str(await _scalar(url, VECTOR_INDEX_DEF))
    assert await _indexed_neighbours(url) == 12


async def test_0008_sketches_every_item_already_stored_from_its_vector(
    scratch: ScratchServer, embedder: WordLlamaEmbedder
) -> None:
    url = await _with_indexed_and_queued_learnings(scratch, embedder, 12, 5)
    await _downgrade(url, "0007")
    column = "SELECT count(*) FROM pg_attribute WHERE attrelid = 'engram_items'::regclass AND attname = 'sketch'"
    assert await _scalar(url, column) == 0
    await _upgrade(url, "0008")
    sketch_type = (
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'engram_items'::regclass AND attname = 'sketch'"
    )
    assert await _scalar(url, sketch_type) == "bit(256)"
    assert await _scalar(url, "SELECT count(*) FROM engram_items WHERE sketch IS NOT NULL") == 17
    assert await _scalar(url, ITEM_SKETCHES_OFF) == 0


async def test_0009_moves_the_sketches_of_indexed_vectors_into_their_own_table(
    scratch: ScratchServer, embedder: WordLlamaEmbedder
) -> None:
    url = await _with_indexed_and_queued_learnings(scratch, embedder, 12, 5)
    await _downgrade(url, "0008")
    assert await _scalar(url, ITEM_SKETCHES_OFF) == 0
    assert await _scalar(url, "SELECT to_regclass('engram_sketches') IS NULL") is True
    await _upgrade(url, "0009")
    # The indexed vectors' sketches; a queued one's is written when the indexer moves it.
    assert await _scalar(url, "SELECT count(*) FROM engram_sketches") == 12
    assert await _scalar(url, NARROW_SKETCHES_OFF) == 0
    column = "SELECT count(*) FROM pg_attribute WHERE attrelid = 'engram_items'::regclass AND attname = 'sketch'"
    assert await _scalar(url, column) == 0
    assert await _scalar(url, _INDEX_COLUMNS.format(index="engram_sketches_keys")) == "tags, lineage"


def _filed(count: int, topic: str) -> list[StoredItem]:
    """Learnings under tags (one repeated) and namespaces: their sketches have keys to be filed under."""
    return [
        learning(
            f"{topic} {n}: the {['harbour', 'violin', 'glacier', 'orchard'][n % 4]} note",
            tags=[["tea"], ["tea", "rust", "tea"], []][n % 3],
            namespace=["team:a/agent:x", "team:a", "root"][n % 3],
        )
        for n in range(count)
    ]


async def test_0010_files_every_indexed_sketch_under_its_items_keys(
    scratch: ScratchServer, embedder: WordLlamaEmbedder
) -> None:
    url = scratch.new_database()
    await _upgrade(url)
    engine = await PostgresEngine.connect(url, embedder, options=QUIET)
    await engine.store_many(_filed(12, "indexed"))
    await engine.finish_indexing()
    await engine.store_many(_filed(6, "queued"))
    await engine.close()
    # Items at the root without tags have no key: 8 of 12 are filed, 3 keys each (tags once, lineage).
    assert await _scalar(url, "SELECT count(*) FROM engram_sketch_postings") == 8 * 3
    assert await _scalar(url, SKETCHES_OFF) == 0

    await _downgrade(url, "0009")
    assert await _scalar(url, "SELECT to_regclass('engram_sketch_postings') IS NULL") is True
    assert await _scalar(url, "SELECT count(*) FROM engram_sketches") == 12
    assert await _scalar(url, NARROW_SKETCHES_OFF) == 0
    await _upgrade(url, "0010")
    assert await _scalar(url, "SELECT to_regclass('engram_sketches') IS NULL") is True
    assert await _scalar(url, "SELECT count(*) FROM engram_sketch_postings") == 8 * 3
    assert await _scalar(url, SKETCHES_OFF) == 0
    assert await _scalar(url, _INDEX_COLUMNS.format(index="engram_sketch_postings_pkey")) == "key, seq, item_id, sketch"
    assert await _scalar(url, _INDEX_COLUMNS.format(index="engram_sketch_postings_item")) == "item_id"
    # Vacuumed often enough that index-only scans seldom read the table.
    options = "SELECT reloptions FROM pg_class WHERE relname = 'engram_sketch_postings'"
    assert await _scalar(url, options) == ["autovacuum_vacuum_insert_scale_factor=0.02"]

    await _upgrade(url)  # the engine runs at the head
    engine = await PostgresEngine.connect(url, embedder, options=QUIET)
    try:
        await engine.finish_indexing()
        assert await _scalar(url, "SELECT count(*) FROM engram_sketch_postings") == 12 * 3
        assert await _scalar(url, SKETCHES_OFF) == 0
        # A forget takes an item's postings with it.
        report = await engine.forget(ForgetByIds(ids=[item.fingerprint() for item in _filed(3, "queued")]))
        assert report.forgotten == 3
    finally:
        await engine.close()
    assert await _scalar(url, "SELECT count(*) FROM engram_sketch_postings") == 10 * 3
    assert await _scalar(url, SKETCHES_OFF) == 0


async def test_0011_counts_the_facets_of_the_items_already_stored(
    scratch: ScratchServer, embedder: WordLlamaEmbedder
) -> None:
    url = scratch.new_database()
    await _upgrade(url)
    engine = await PostgresEngine.connect(url, embedder, options=QUIET)
    await engine.store_many(varied_items(100, seed=11))
    await engine.close()

    await _downgrade(url, "0010")
    assert await _scalar(url, "SELECT to_regclass('engram_facet_counts') IS NULL") is True
    triggers = "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'engram_items'::regclass AND NOT tgisinternal"
    assert await _scalar(url, triggers) == 0
    await _upgrade(url, "0011")
    # Filled from the items: one row a (facet, value), every item counted once under ''.
    assert await _scalar(url, "SELECT n FROM engram_facet_counts WHERE facet = ''") == 100
    assert await _scalar(url, triggers) == 3

    await _upgrade(url)
    engine = await PostgresEngine.connect(url, embedder, options=QUIET)
    try:
        await engine.store_many(varied_items(50, seed=12))
        await assert_counts_match_the_items(engine)
    finally:
        await engine.close()


_INDEX_COLUMNS = """
    SELECT string_agg(a.attname, ', ' ORDER BY k.n) FROM pg_index x
    CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)
    JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
    WHERE x.indexrelid = to_regclass('{index}')
"""


async def test_0006_indexes_words_tags_and_lineage_together_over_the_items_already_stored(
    scratch: ScratchServer, embedder: WordLlamaEmbedder
) -> None:
    url = scratch.new_database()
    await _upgrade(url, "0005")
    for namespace in ("", "team:acme", "team:acme/project:p1/agent:a2"):
        await _execute(
            url,
            "INSERT INTO engram_items (id, kind, namespace, text, meta, item, source_kind) "
            f"VALUES (md5('{namespace}') || '00000000', 'learning', '{namespace}', 'x', '{{}}', '{{}}', 'agent')",
        )
    await _upgrade(url, "0006")
    lineage = "SELECT lineage FROM engram_items WHERE namespace = '{}'"
    assert await _scalar(url, lineage.format("")) == []
    assert await _scalar(url, lineage.format("team:acme")) == ["team:acme"]
    assert await _scalar(url, lineage.format("team:acme/project:p1/agent:a2")) == [
        "team:acme",
        "team:acme/project:p1",
        "team:acme/project:p1/agent:a2",
    ]
    assert await _scalar(url, _INDEX_COLUMNS.format(index="engram_items_terms")) == "tsv, tags, lineage"
    options = await _scalar(url, "SELECT reloptions FROM pg_class WHERE relname = 'engram_items_terms'")
    assert options == ["gin_pending_list_limit=128"]
    for replaced in ("engram_items_tsv", "engram_items_tags"):
        assert await _scalar(url, f"SELECT to_regclass('{replaced}') IS NULL") is True

    await _downgrade(url, "0005")
    assert await _scalar(url, _INDEX_COLUMNS.format(index="engram_items_tsv")) == "tsv"
    assert await _scalar(url, _INDEX_COLUMNS.format(index="engram_items_tags")) == "tags"
    assert await _scalar(url, "SELECT to_regclass('engram_items_terms') IS NULL") is True
    column = "SELECT count(*) FROM pg_attribute WHERE attrelid = 'engram_items'::regclass AND attname = 'lineage'"
    assert await _scalar(url, column) == 0
    assert await _scalar(url, "SELECT count(*) FROM engram_items") == 3


def test_a_role_without_the_privileges_is_a_configuration_error(scratch: ScratchServer) -> None:
    """A managed PostgreSQL's application role often may not create extensions: the command says
    what to do, where it answered "engine error" and left the reason in a log line."""
    url = scratch.new_database()
    scratch.psql("DO $$ BEGIN CREATE ROLE limited LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;")
    result = run_engram("migrate", database_url=url.replace("postgres:@", "limited:@", 1), timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("engram: configuration error: the database role may not")
    assert "Traceback" not in result.stderr + result.stdout
