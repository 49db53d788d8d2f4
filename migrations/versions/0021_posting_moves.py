"""Which transaction filed each sketch posting: ``engram_sketch_postings.moved``.

A service process may keep a filter key's postings in memory and scan them there
(app/engine/postgres/mirror.py): PostgreSQL spends ~0.2 µs a posting reading and ranking them, NumPy
a fraction of that (docs/tuning.md#filters-at-a-million-items). The copy is as of a snapshot; the
postings filed since, by any process, are the ones whose transaction that snapshot does not see,
found through the index on (key, moved) from the snapshot's xmin on. The rows there now were filed
before this migration, which every later snapshot sees: they take its transaction's id.

Revision ID: 0021
Revises: 0020
"""

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE engram_sketch_postings ADD COLUMN moved xid8 NOT NULL DEFAULT pg_current_xact_id()")
    op.execute("SET LOCAL maintenance_work_mem = '512MB'")
    op.execute("CREATE INDEX engram_sketch_postings_moved ON engram_sketch_postings (key, moved)")


def downgrade() -> None:
    op.execute("DROP INDEX engram_sketch_postings_moved")
    op.execute("ALTER TABLE engram_sketch_postings DROP COLUMN moved")
