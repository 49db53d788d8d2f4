"""Late-interaction token vectors: ``engram_token_vectors``.

An item's text as one unit vector per word piece (app/embeddings/late.py), float16 row after row,
per model as its vector is in ``engram_embeddings``. Made after the write is acknowledged, by the
engine's token writer (app/engine/postgres/tokens.py), only when ENGRAM_LATE_INTERACTION is on;
forgetting or expiring an item removes them with it. Stored as they are: float16 bytes do not
compress, so PostgreSQL is told not to try.

Revision ID: 0019
Revises: 0018
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE engram_token_vectors (
            item_id text NOT NULL REFERENCES engram_items (id) ON DELETE CASCADE,
            model text NOT NULL,
            vectors bytea NOT NULL,
            PRIMARY KEY (item_id, model)
        )
        """
    )
    op.execute("ALTER TABLE engram_token_vectors ALTER COLUMN vectors SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS engram_token_vectors")
