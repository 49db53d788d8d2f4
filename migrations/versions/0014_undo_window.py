"""Forgotten items kept for the undo window: ``engram_forgotten``.

A forget moves its items here (the item as stored and its vector) under the receipt it answers,
in the statement that deletes them, so every read stops seeing them at once and ``POST
/v1/restore`` can bring them back; a sweeper drops what is older than the window. A purge (an
erasure) keeps nothing here.

Revision ID: 0014
Revises: 0013
"""

from alembic import op

from migrations.support import stored_dimension

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        f"""
        CREATE TABLE engram_forgotten (
            receipt text NOT NULL,
            id text NOT NULL,
            seq bigint NOT NULL,
            namespace text COLLATE "C" NOT NULL,
            item jsonb NOT NULL,
            model text,
            embedding vector({stored_dimension()}),
            forgotten_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (receipt, id)
        )
        """
    )
    op.execute("CREATE INDEX engram_forgotten_at ON engram_forgotten (forgotten_at)")
    op.execute("CREATE INDEX engram_forgotten_id ON engram_forgotten (id)")


def downgrade() -> None:
    op.execute("DROP TABLE engram_forgotten")
