"""Retention policies and legal holds per namespace, and each item's expiry: ``engram_retention``.

A row holds what is set at one namespace: a time to live (``ttl`` as it was given, ``span`` the
interval it adds) and whether a legal hold stands there. ``engram_items.expires_at`` is each
item's expiry under them (NULL: never), written with the item and written again for a subtree
when a policy or hold above it changes (app/engine/postgres/queries/retention.py). Reads leave out
what has expired; the partial index finds the expired items for the sweeper and for the reads
that do not visit items (facet counts, sketch postings), and it is empty while nothing expires.

Revision ID: 0015
Revises: 0014
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE engram_retention (
            namespace text COLLATE "C" PRIMARY KEY,
            ttl text,
            span interval,
            hold boolean NOT NULL DEFAULT false,
            updated_at timestamptz NOT NULL DEFAULT now(),
            CHECK ((ttl IS NULL) = (span IS NULL)),
            CHECK (ttl IS NOT NULL OR hold)
        )
        """
    )
    op.execute("ALTER TABLE engram_items ADD COLUMN expires_at timestamptz")
    op.execute("CREATE INDEX engram_items_expires_at ON engram_items (expires_at) WHERE expires_at IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX engram_items_expires_at")
    op.execute("ALTER TABLE engram_items DROP COLUMN expires_at")
    op.execute("DROP TABLE engram_retention")
