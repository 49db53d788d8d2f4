"""Each thread's items in the order they were stored: ``engram_items_thread``.

An item of a thread is embedded after the text of the item stored before it in that thread
(app/engine/context.py), so a write looks up each thread's latest item, and ``engram
reembed`` each item's predecessor: one index probe each. Partial: items without a thread
are most items and are never looked up this way.

Revision ID: 0012
Revises: 0011
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX engram_items_thread ON engram_items (namespace, (meta->>'thread_id'), seq) "
        "WHERE meta ? 'thread_id'"
    )


def downgrade() -> None:
    op.execute("DROP INDEX engram_items_thread")
