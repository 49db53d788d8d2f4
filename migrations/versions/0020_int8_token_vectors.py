"""Late-interaction token vectors stored as int8 with a scale a row (app/embeddings/late.py
``packed``): half the bytes of float16, the same recall on the dev split.

The float16 rows written before cannot be read as int8 and are removed; the engine's token writer
(app/engine/postgres/tokens.py) makes them again in the background, and until then each hit keeps
its place's score.

Revision ID: 0020
Revises: 0019
"""

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("TRUNCATE engram_token_vectors")


def downgrade() -> None:
    # The int8 rows cannot be read as float16 either: the writer of that version makes them again.
    op.execute("TRUNCATE engram_token_vectors")
