"""The schema stays ready for the Citus layout of docs/scaling.md, read from a migrated database's catalog.

Every table has its place in the layout: distributed by item id (co-located, so each foreign key
stays inside a shard), a reference table (copied to every node), the coordinator's own, or one the
layout replaces. Then what distribution would break is looked for: a sequence that is not a bigint
identity, a foreign key that leaves a shard or points from a reference table into a distributed
one, a unique index without its table's distribution column, a trigger on a distributed table. What
is found must be exactly what docs/scaling.md lists under "What must change", so a new table,
constraint, sequence or trigger fails here until the layout (and that page) says where it goes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from app.engine.postgres.schema import driver_url

# The distribution column of each distributed table: an item's id, under whatever name it has there.
DISTRIBUTED = {
    "engram_items": "id",
    "engram_embeddings": "item_id",
    "engram_vector_backlog": "item_id",
    "engram_sketch_postings": "item_id",
    "engram_token_vectors": "item_id",
    "engram_forgotten": "id",
}
REFERENCE = {"engram_settings", "engram_keys", "engram_retention"}
COORDINATOR = {"alembic_version"}
REPLACED = {"engram_facet_counts"}  # kept facet counts, written by triggers: a fan-out count instead

# Unique indexes without the distribution column, each changed by the migration that distributes
# (docs/scaling.md#what-must-change), not before: every single-node deployment would rebuild them
# for a layout it may never use.
UNIQUE_WITHOUT_DISTRIBUTION = {
    ("engram_items", "engram_items_seq"),  # becomes (seq, id)
    ("engram_sketch_postings", "engram_sketch_postings_pkey"),  # becomes (key, seq, item_id)
}
TRIGGERS_REPLACED = {
    ("engram_items", "engram_items_facets_insert"),
    ("engram_items", "engram_items_facets_delete"),
    ("engram_items", "engram_items_facets_truncate"),
}


@pytest.fixture
async def catalog(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection to the run's database, migrated to the latest revision by the session fixture."""
    connection = await asyncpg.connect(driver_url(database_url))
    try:
        yield connection
    finally:
        await connection.close()


async def test_every_table_has_its_place_in_the_layout(catalog: asyncpg.Connection) -> None:
    tables = {
        row["relname"]
        for row in await catalog.fetch(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p')"
        )
    }
    placed = set(DISTRIBUTED) | REFERENCE | COORDINATOR | REPLACED
    assert tables == placed, f"unplaced: {sorted(tables - placed)}; gone: {sorted(placed - tables)}"
    for table, column in DISTRIBUTED.items():
        kind = await catalog.fetchval(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2",
            table,
            column,
        )
        assert kind == "text", f"{table}.{column}: co-located tables share the distribution column's type"


async def test_every_sequence_is_a_bigint_identity(catalog: asyncpg.Connection) -> None:
    """Citus distributes bigint identity columns (from 11.2); a serial default or a free-standing or
    smaller sequence would have to be dropped or widened first."""
    sequences = await catalog.fetch(
        """
        SELECT s.relname AS sequence, t.relname AS table, a.attname AS column, a.attidentity::text AS attidentity,
               format_type(a.atttypid, a.atttypmod) AS type
        FROM pg_class s
        LEFT JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = s.oid AND d.deptype = 'i'
        LEFT JOIN pg_class t ON t.oid = d.refobjid
        LEFT JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
        WHERE s.relkind = 'S' AND s.relnamespace = 'public'::regnamespace
        """
    )
    found = {(row["table"], row["column"]): (row["attidentity"], row["type"]) for row in sequences}
    assert found == {("engram_items", "seq"): ("a", "bigint"), ("engram_vector_backlog", "queued"): ("a", "bigint")}
    serial = await catalog.fetch(
        """
        SELECT c.relname, pg_get_expr(d.adbin, d.adrelid) AS expression FROM pg_attrdef d
        JOIN pg_class c ON c.oid = d.adrelid
        WHERE c.relnamespace = 'public'::regnamespace AND pg_get_expr(d.adbin, d.adrelid) LIKE '%nextval(%'
        """
    )
    assert [dict(row) for row in serial] == [], "a serial column: make it a bigint identity"


async def test_every_foreign_key_stays_inside_a_shard(catalog: asyncpg.Connection) -> None:
    keys = await catalog.fetch(
        """
        SELECT c.conname, f.relname AS child, p.relname AS parent,
               array(SELECT attname FROM pg_attribute
                     WHERE attrelid = c.conrelid AND attnum = ANY (c.conkey)) AS columns,
               array(SELECT attname FROM pg_attribute
                     WHERE attrelid = c.confrelid AND attnum = ANY (c.confkey)) AS refs
        FROM pg_constraint c JOIN pg_class f ON f.oid = c.conrelid JOIN pg_class p ON p.oid = c.confrelid
        WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace
        """
    )
    assert keys, "the items' dependents refer to their items"
    for key in keys:
        child, parent = key["child"], key["parent"]
        if parent in REFERENCE:
            assert child not in COORDINATOR | REPLACED, f"{key['conname']}: only placed tables may refer to it"
            continue
        assert child in DISTRIBUTED and parent in DISTRIBUTED, f"{key['conname']}: a reference table refers out"
        assert list(key["columns"]) == [DISTRIBUTED[child]] and list(key["refs"]) == [DISTRIBUTED[parent]], (
            f"{key['conname']} joins {child}{list(key['columns'])} to {parent}{list(key['refs'])}: "
            "not on both distribution columns, it would cross shards"
        )


async def test_unique_indexes_hold_their_distribution_column_but_for_the_listed_ones(
    catalog: asyncpg.Connection,
) -> None:
    unique = await catalog.fetch(
        """
        SELECT t.relname AS table, x.relname AS index,
               array(SELECT attname FROM pg_attribute WHERE attrelid = i.indrelid
                     AND attnum = ANY (i.indkey[0:i.indnkeyatts - 1])) AS columns
        FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class x ON x.oid = i.indexrelid
        WHERE i.indisunique AND t.relnamespace = 'public'::regnamespace
        """
    )
    without = {
        (row["table"], row["index"])
        for row in unique
        if row["table"] in DISTRIBUTED and DISTRIBUTED[row["table"]] not in row["columns"]
    }
    assert without == UNIQUE_WITHOUT_DISTRIBUTION


async def test_no_trigger_on_a_distributed_table_but_the_replaced_facet_counts(catalog: asyncpg.Connection) -> None:
    triggers = await catalog.fetch(
        "SELECT c.relname, t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "WHERE NOT t.tgisinternal AND c.relnamespace = 'public'::regnamespace"
    )
    assert {(row["relname"], row["tgname"]) for row in triggers} == TRIGGERS_REPLACED
