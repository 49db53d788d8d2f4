"""A backlog of vectors not yet in the HNSW index: ``engram_vector_backlog``.

A write puts its vectors here, unindexed, and the engine's indexer moves them
into ``engram_embeddings`` (and so into the HNSW index) after the write has been
acknowledged; searches scan the backlog exactly beside the index, so a write is
found as soon as it is acknowledged. HNSW upkeep was ~88% of a raw 100-item batch
at 100k items (bench/analysis.md); it now overlaps the next batch on another core
instead of adding to each. Same columns as ``engram_embeddings``, no vector index;
``queued`` keeps the indexer first in, first out.

Revision ID: 0004
Revises: 0003
"""

from alembic import op

from migrations.support import stored_dimension

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        f"""
        CREATE TABLE engram_vector_backlog (
            queued bigint GENERATED ALWAYS AS IDENTITY,
            item_id text NOT NULL REFERENCES engram_items (id) ON DELETE CASCADE,
            model text NOT NULL,
            embedding vector({stored_dimension()}) NOT NULL,
            PRIMARY KEY (item_id, model)
        )
        """
    )


def downgrade() -> None:
    # Back to vectors indexed as they are written: what waits is indexed now, not lost.
    op.execute(
        "INSERT INTO engram_embeddings (item_id, model, embedding) "
        "SELECT item_id, model, embedding FROM engram_vector_backlog ORDER BY queued "
        "ON CONFLICT (item_id, model) DO NOTHING"
    )
    op.execute("DROP TABLE engram_vector_backlog")
