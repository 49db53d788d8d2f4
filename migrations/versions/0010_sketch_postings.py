"""The sketches filed under the keys a filter finds them by: ``engram_sketch_postings``.

Migration 0009 kept one row per item (id, seq, tags, lineage, sketch) and found a filter's rows
through a GIN index over tags and lineage: one tag's few thousand items lay scattered over
the table, nearly one heap block each (2,388 blocks for 4,936 items at 100k). Here an item's
sketch is filed once under each of its tags (``t:<tag>``) and each key of its namespace's
lineage (``n:<key>``), in a btree over (key, seq) that holds the item's id and sketch: a key's
sketches lie on consecutive index pages and are read without visiting the table (an
index-only scan; vacuum keeps the visibility map that allows it). At 100k (a store the service
grew by its own inserts, the bench's 200 questions, raw SQL, the two statements alternated,
three passes, 2026-12-03) the sketch statement's p50 3.1-5.0 -> 1.5-2.5 ms with a
tag and 3.9-4.5 -> 1.8-2.1 with a subtree, p95 13-17 -> 6-8, every page the same.

What it costs: ~3.6 rows an item (the bench's corpus: 360,876 for 100k items), 94 MB at 100k
against the narrow table's 40, written by the vector indexer as before (queries.backlog.MOVE_BACKLOG).
A forget takes the postings with the item (ON DELETE CASCADE, through the index on item_id).

Filled from the narrow table in one statement; the narrow table goes.

Revision ID: 0010
Revises: 0009
"""

from alembic import op

from migrations.support import stored_dimension

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        f"""
        CREATE TABLE engram_sketch_postings (
            key text NOT NULL,
            seq bigint NOT NULL,
            item_id text NOT NULL,
            sketch bit({stored_dimension()}) NOT NULL
        )
        """
    )
    # Each key once per item, however often the item repeats a tag (queries.backlog.POSTING_KEYS).
    op.execute(
        """
        INSERT INTO engram_sketch_postings (key, seq, item_id, sketch)
        SELECT k.key, s.seq, s.item_id, s.sketch
        FROM engram_sketches s
        CROSS JOIN LATERAL (
            SELECT 't:' || t FROM unnest(s.tags) AS t UNION SELECT 'n:' || l FROM unnest(s.lineage) AS l
        ) AS k(key)
        ORDER BY 1, 2
        """
    )
    # Indexes and the foreign key after the rows: one sorted build each, not one insert per row.
    op.execute("SET LOCAL maintenance_work_mem = '512MB'")
    op.execute("ALTER TABLE engram_sketch_postings ADD PRIMARY KEY (key, seq) INCLUDE (item_id, sketch)")
    op.execute("CREATE INDEX engram_sketch_postings_item ON engram_sketch_postings (item_id)")
    op.execute(
        "ALTER TABLE engram_sketch_postings ADD FOREIGN KEY (item_id) REFERENCES engram_items (id) ON DELETE CASCADE"
    )
    # The index-only scan skips the table only for pages vacuum has marked all-visible; the
    # postings of items added since the last vacuum are read from the table as well. By default
    # autovacuum visits an insert-only table after it grows by a fifth: 20,000 items added to the
    # 100k store (16% of the postings unvacuumed) took the sketch statement from 4.5-5.2 to
    # 5.8-6.4 ms p50 with a tag and 4.6-4.7 to 6.4-6.7 with a subtree, p95 11-12.5 to 14-15
    # (2026-12-03). Vacuuming after 2% keeps that within a few percent, and vacuuming
    # an insert-only table is cheap: it reads only the pages not yet marked.
    op.execute("ALTER TABLE engram_sketch_postings SET (autovacuum_vacuum_insert_scale_factor = 0.02)")
    op.execute("DROP TABLE engram_sketches")


def downgrade() -> None:
    op.execute(
        f"""
        CREATE TABLE engram_sketches (
            item_id text PRIMARY KEY REFERENCES engram_items (id) ON DELETE CASCADE,
            seq bigint NOT NULL,
            tags text[] NOT NULL,
            lineage text[] NOT NULL,
            sketch bit({stored_dimension()}) NOT NULL
        )
        """
    )
    op.execute(
        """
        INSERT INTO engram_sketches (item_id, seq, tags, lineage, sketch)
        SELECT i.id, i.seq, i.tags, i.lineage, binary_quantize(e.embedding)
        FROM engram_embeddings e JOIN engram_items i ON i.id = e.item_id
        ORDER BY i.seq
        """
    )
    op.execute("SET LOCAL maintenance_work_mem = '512MB'")
    op.execute(
        "CREATE INDEX engram_sketches_keys ON engram_sketches USING gin (tags, lineage) "
        "WITH (gin_pending_list_limit = 128)"
    )
    op.execute("DROP TABLE engram_sketch_postings")
