"""Late-interaction token vectors stored as four bits a component with a scale a row
(app/embeddings/late.py ``packed``): half of int8's bytes, so a typical turn's row stays in the
table's own pages, read with the row instead of from TOAST.

PostgreSQL moves a row's value out of line once the row passes ``toast_tuple_target`` (~2 KB by
default); at 8160 bytes, the most a page holds, an item of up to ~40 word pieces keeps its token
vectors inline. The int8 rows written before cannot be read as four bits and are removed; the engine's
token writer (app/engine/postgres/tokens.py) makes them again in the background, and a read that
meets an item without them makes its own meanwhile.

Revision ID: 0022
Revises: 0021
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("TRUNCATE engram_token_vectors")
    op.execute("ALTER TABLE engram_token_vectors SET (toast_tuple_target = 8160)")


def downgrade() -> None:
    # The four-bit rows cannot be read as int8 either: the writer of that version makes them again.
    op.execute("TRUNCATE engram_token_vectors")
    op.execute("ALTER TABLE engram_token_vectors RESET (toast_tuple_target)")
