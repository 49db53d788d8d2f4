"""The vector index rebuilt at ef_construction 100 (was 40).

A graph built with a wider candidate list is better connected, so a search finds
the same share of the true neighbours at a much smaller ``hnsw.ef_search``. At 100k
items (bench corpus, 200 questions, recall@10 against an exact scan, 2026-12-01):
ef_construction 40 needed ef_search 300 for 0.972 unfiltered (14.2 ms) and 500 for
0.919 / 0.922 with a tag / subtree filter (24.8 / 27.0 ms); at 100, ef_search 150
gives 0.965 (6.5 ms) and 200 gives 0.921 / 0.932 (19.0 / 19.7 ms) (app/settings.py
has the breadths). The price is graph upkeep on every write: the bench's 100k ingest,
one indexer, went from 422 to 270 items/s (docs/tuning.md#hnsw-build). The
rebuild reads every stored vector once: minutes at a million items.

Revision ID: 0005
Revises: 0004
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _rebuild(ef_construction: int) -> None:
    # A graph that fits in maintenance_work_mem is built in memory, many times faster than on disk.
    op.execute("SET LOCAL maintenance_work_mem = '512MB'")
    op.execute(f"ALTER INDEX engram_embeddings_hnsw SET (ef_construction = {ef_construction})")
    op.execute("REINDEX INDEX engram_embeddings_hnsw")


def upgrade() -> None:
    _rebuild(100)


def downgrade() -> None:
    _rebuild(40)
