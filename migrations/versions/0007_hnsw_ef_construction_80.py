"""The vector index rebuilt at ef_construction 80 (was 100, migration 0005).

Every vector a write acknowledges is inserted into this graph (app/engine/postgres/indexer.py),
and that upkeep is most of what ingest costs: in the bench's 100k run (2026-12-02, 10k + 100k,
the graph grown by inserts as in service, the same machine state as the run before it: LangGraph's
own ingest 660 s against 662) Engram ingested 227 -> 265 items/s, 1.51x -> 1.76x LangGraph's.
What it costs is the graph's reach, bought back by nothing cheaper: recall@10 against an exact
scan at the same ef_search (150 unfiltered, 200 filtered) 0.967 -> 0.963 unfiltered, 0.930 ->
0.919 with a tag, 0.933 -> 0.930 with a subtree; vector p50 the same within noise. 64 (LangGraph's
default) was measured too: filtered recall 0.904 / 0.920 on a bulk-built graph, too near the
0.9 the bench holds it to (bench/analysis.md, 2026-12-02).

The rebuild reads every stored vector once and builds the graph in memory: 84 s on the bench's
100k copy on 2 cores, in one transaction that locks the embeddings table (stop the service).

Revision ID: 0007
Revises: 0006
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _rebuild(ef_construction: int) -> None:
    # A graph that fits in maintenance_work_mem is built in memory, many times faster than on disk.
    op.execute("SET LOCAL maintenance_work_mem = '512MB'")
    op.execute(f"ALTER INDEX engram_embeddings_hnsw SET (ef_construction = {ef_construction})")
    op.execute("REINDEX INDEX engram_embeddings_hnsw")


def upgrade() -> None:
    _rebuild(80)


def downgrade() -> None:
    _rebuild(100)
