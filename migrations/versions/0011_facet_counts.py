"""Facet counts kept as items come and go: ``engram_facet_counts``.

An explore over everything counted every item's facet value on each request: at 100k items the
tag facet took ~75 ms p50 (19x its 10k figure), and it grows with the store (bench/analysis.md,
2026-12-03). Here each statement that inserts or deletes items adds one row per
(facet, value) it changed, with the number of items gained (or lost, negative): written by
statement triggers from the statement's transition table, so a batch of 100 items adds one
aggregate insert, rows no other write ever updates (concurrent writers never wait on a shared
counter). ``value`` NULL counts the items lacking the facet; facet '' counts every item. An
explore without a filter sums a facet's rows (queries.facets.explore_sql); the service folds them
into one row a value as they pile up (queries.facets.FOLD_FACETS, app/engine/postgres/facets.py).

The facet values repeat queries.facets.FACET_VALUE, frozen here as migrations are: the engine's
tests compare every facet's counts with a count over the items.

Filled from the items in one statement.

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# One row per facet an item counts in: '' (every item), then each facet's value, NULL where the
# item lacks it; a tag once per item however often the item repeats it.
_FACET_ROWS = """
    SELECT '', '' UNION ALL
    SELECT 'kind', i.kind UNION ALL
    SELECT 'source', i.source_kind UNION ALL
    SELECT 'source_id', i.meta->'source'->>'id' UNION ALL
    SELECT 'workspace', i.meta->>'workspace' UNION ALL
    SELECT 'folder', i.meta->>'folder' UNION ALL
    SELECT 'file_path', i.meta->>'file_path' UNION ALL
    SELECT 'language', i.meta->>'language' UNION ALL
    SELECT 'repo', i.meta->>'repo' UNION ALL
    SELECT 'url', i.meta->>'url' UNION ALL
    SELECT 'thread', i.meta->>'thread_id' UNION ALL
    SELECT 'agent', i.meta->>'agent_id' UNION ALL
    SELECT 'tool_call', i.meta->'tool_call'->>'name' UNION ALL
    SELECT 'namespace', CASE WHEN i.namespace = '' THEN 'root' ELSE i.namespace END UNION ALL
    (SELECT DISTINCT 'tag', t FROM unnest(i.tags) AS t) UNION ALL
    SELECT 'tag', NULL WHERE cardinality(i.tags) = 0
"""


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE engram_facet_counts (
            facet text COLLATE "C" NOT NULL,
            value text COLLATE "C",
            n bigint NOT NULL
        )
        """
    )
    op.execute(
        f"""
        INSERT INTO engram_facet_counts (facet, value, n)
        SELECT f.facet, f.value, count(*)
        FROM engram_items i CROSS JOIN LATERAL ({_FACET_ROWS}) AS f(facet, value)
        GROUP BY 1, 2
        """
    )
    op.execute("CREATE INDEX engram_facet_counts_facet ON engram_facet_counts (facet)")
    op.execute(
        f"""
        CREATE FUNCTION engram_count_facets() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO engram_facet_counts (facet, value, n)
            SELECT f.facet, f.value, CASE WHEN TG_OP = 'INSERT' THEN count(*) ELSE -count(*) END
            FROM changed i CROSS JOIN LATERAL ({_FACET_ROWS}) AS f(facet, value)
            GROUP BY 1, 2;
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION engram_forget_facets() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            TRUNCATE engram_facet_counts;
            RETURN NULL;
        END
        $$
        """
    )
    for event, table in (("INSERT", "NEW"), ("DELETE", "OLD")):
        op.execute(
            f"CREATE TRIGGER engram_items_facets_{event.lower()} AFTER {event} ON engram_items "
            f"REFERENCING {table} TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION engram_count_facets()"
        )
    op.execute(
        "CREATE TRIGGER engram_items_facets_truncate AFTER TRUNCATE ON engram_items "
        "FOR EACH STATEMENT EXECUTE FUNCTION engram_forget_facets()"
    )


def downgrade() -> None:
    for event in ("insert", "delete", "truncate"):
        op.execute(f"DROP TRIGGER engram_items_facets_{event} ON engram_items")
    op.execute("DROP FUNCTION engram_count_facets()")
    op.execute("DROP FUNCTION engram_forget_facets()")
    op.execute("DROP TABLE engram_facet_counts")
