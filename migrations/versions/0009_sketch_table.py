"""The sketches in a narrow table of their own, with the keys a filter finds them by: ``engram_sketches``.

Migration 0008 put each item's sketch (its vector's signs) on the item's own row, so ranking
a filter that admits a few thousand items read a few thousand wide rows, nearly one heap
block each (4,374 blocks for 4,936 items at 100k). Here a row is the item's id, seq, tags,
namespace lineage and sketch (~100 bytes), and one GIN index over tags and lineage finds a
filter's rows: at 100k (bench corpus, raw SQL, 200 questions interleaved, 2026-12-02)
the sketch scan p50 7.2 -> 3.4 ms with a tag and 7.9 -> 3.8 with a subtree, p95 35.7 -> 8.0
and 39.1 -> 13.6 (bench/analysis.md). 25 MB at 100k.

The vector indexer writes an item's sketch when it moves the item's vector into the HNSW
index, in the same transaction (queries.backlog.MOVE_BACKLOG): a write is no slower than before
0008, and a vector still queued is ranked exactly beside the sketches, as the walk ranks it.
Items are never updated, so the copied tags and lineage never go stale; a forget takes the
sketch with the item (ON DELETE CASCADE).

Filled from the indexed vectors in one statement (~3 s at 100k items); the items' own sketch
column goes.

Revision ID: 0009
Revises: 0008
"""

from alembic import op

from migrations.support import stored_dimension

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
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
    # Built in memory when it fits; a short pending list, as every GIN index here (migration 0003).
    op.execute("SET LOCAL maintenance_work_mem = '512MB'")
    op.execute(
        "CREATE INDEX engram_sketches_keys ON engram_sketches USING gin (tags, lineage) "
        "WITH (gin_pending_list_limit = 128)"
    )
    op.execute("ALTER TABLE engram_items DROP COLUMN sketch")


def downgrade() -> None:
    op.execute(f"ALTER TABLE engram_items ADD COLUMN sketch bit({stored_dimension()})")
    op.execute(
        """
        UPDATE engram_items i SET sketch = binary_quantize(v.embedding)
        FROM (
            SELECT item_id, embedding FROM engram_embeddings
            UNION ALL
            SELECT item_id, embedding FROM engram_vector_backlog
        ) AS v
        WHERE v.item_id = i.id
        """
    )
    op.execute("DROP TABLE engram_sketches")
