"""GIN indexes with short pending lists (128 kB instead of PostgreSQL's 4 MB).

A GIN index with ``fastupdate`` queues new entries in an unsorted pending list
that every search reads in full until it is merged. At 100k items (bench corpus,
raw keyword statement, 200 questions) a full 4 MB list cost ~7 ms a query and
more for a filtered one: p50 / p95 unfiltered 15.3 / 25.3 -> 12.8 / 20.0 ms, with a
tag filter 17.7 / 33.3 -> 8.6 / 20.6 ms once merged. Turning ``fastupdate`` off
added ~10 ms to each 100-item insert; a 128 kB list costs inserts nothing
measurable (merging a short sorted batch is cheap) and a search at most ~16 pages.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

GIN_INDEXES = ("engram_items_tsv", "engram_items_tags", "engram_items_meta")


def upgrade() -> None:
    for index in GIN_INDEXES:
        op.execute(f"ALTER INDEX {index} SET (gin_pending_list_limit = 128)")
        # What is queued now is merged here, not by the first searches after the upgrade.
        op.execute(f"SELECT gin_clean_pending_list('{index}'::regclass)")


def downgrade() -> None:
    for index in GIN_INDEXES:
        op.execute(f"ALTER INDEX {index} RESET (gin_pending_list_limit)")
