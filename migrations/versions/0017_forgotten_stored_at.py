"""A forgotten item keeps when it was stored: ``engram_forgotten.stored_at``.

``get`` answers each item's ``stored_at``; an undo (``POST /v1/restore``) brings an item back as it
was, so it must not answer the time of the restore instead. Items kept before this revision have
none and are restored with the time of their restore, as every restore was before.

Revision ID: 0017
Revises: 0016
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE engram_forgotten ADD COLUMN stored_at timestamptz")


def downgrade() -> None:
    op.execute("ALTER TABLE engram_forgotten DROP COLUMN stored_at")
