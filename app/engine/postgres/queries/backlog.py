"""The vector backlog: queued vectors claimed and moved into the HNSW index by the indexer
(app/engine/postgres/indexer.py), each with its sketches filed beside it."""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.postgres.queries.statement import Statement

BACKLOG_SIZE = Statement("SELECT count(*) FROM engram_vector_backlog")

# The backlog is a queue: every move deletes what a write inserted, and until a vacuum the table
# keeps the pages of every vector since (~1.1 kB a vector), which the claim, the count and each
# search's exact part over the backlog read. Autovacuum comes by once a minute at most; the
# indexer vacuums it itself when it has emptied it (indexer.VACUUM_AFTER).
VACUUM_BACKLOG = "VACUUM engram_vector_backlog"

# Tables are locked items, then backlog, then embeddings, then sketch postings, by every writer
# and every statement that locks whole tables (reembed, TRUNCATE): the indexer's claim reads the
# backlog before the items, so it takes its lock on the items first, the weakest there is (what
# FOR KEY SHARE takes anyway).
INDEXER_LOCK_ORDER = "LOCK TABLE engram_items IN ROW SHARE MODE"

# A move's commit does not wait for its WAL to reach the disk: a crash undoes the move whole and
# its vectors, still queued, are moved again (docs/tuning.md#asynchronous-moves). LOCAL: the
# connection goes back to the pool, to writers, as it came.
MOVE_COMMITS_ASYNC = "SET LOCAL synchronous_commit = off"
# Sent first in every move's transaction, in one round trip.
BEGIN_MOVE = Statement(f"{INDEXER_LOCK_ORDER}; {MOVE_COMMITS_ASYNC}")

# The oldest queued vectors no other indexer holds, whose items no forget is deleting: both
# locked until the move commits, neither ever waited for (SKIP LOCKED), so an indexer is never
# part of a deadlock. Holding the item (KEY SHARE) is what lets the move's foreign-key check on
# it pass without waiting; a vector whose item is being deleted is left to go with it.
# How many: at most :n, and no more than a worker's share of what its indexer's workers do not
# hold yet (:held of the queue, :workers of them), but at least :least. So the last vectors of a
# burst are split among the workers instead of left to one while the others idle (indexer.Share).
_CLAIM = """
    WITH oldest AS (
        SELECT b.item_id, b.model FROM engram_vector_backlog b
        ORDER BY b.queued
        LIMIT {limit}
        FOR UPDATE SKIP LOCKED
    )
    SELECT o.item_id, o.model FROM oldest o JOIN engram_items i ON i.id = o.item_id
    FOR KEY SHARE OF i SKIP LOCKED
"""
CLAIM_BACKLOG = _CLAIM.format(
    limit="""CAST(greatest(:least, least(:n, ceil(
            ((SELECT count(*) FROM engram_vector_backlog) - :held) / CAST(:workers AS numeric)
        ))) AS bigint)"""
)
# The same claim of :n at most, for one indexer alone (a rebuild): no share to count the queue for.
CLAIM_OLDEST = _CLAIM.format(limit=":n")

# The keys an item's sketch is filed under (migration 0010; filters.tag_posting_key, filters.lineage_posting_key):
# each of its tags and each key of its namespace's lineage, prefixed so a tag never reads as a
# namespace, each once however often the item repeats a tag.
POSTING_KEYS = "SELECT 't:' || t FROM unnest(i.tags) AS t UNION SELECT 'n:' || l FROM unnest(i.lineage) AS l"

# The claimed vectors into the index, and their sketches beside it (sketch_sql), in one
# statement; how many moved. A sketch is filed under its item's keys with the item's seq: items
# are never updated, so the copy never goes stale.
MOVE_BACKLOG = f"""
    WITH moved AS (
        DELETE FROM engram_vector_backlog b
        USING unnest(CAST(:ids AS text[]), CAST(:models AS text[])) AS c(item_id, model)
        WHERE b.item_id = c.item_id AND b.model = c.model
        RETURNING b.item_id, b.model, b.embedding, b.queued
    ),
    indexed AS (
        INSERT INTO engram_embeddings (item_id, model, embedding)
        SELECT item_id, model, embedding FROM moved ORDER BY queued
        ON CONFLICT (item_id, model) DO NOTHING
    ),
    sketched AS (
        INSERT INTO engram_sketch_postings (key, seq, item_id, sketch)
        SELECT k.key, i.seq, m.item_id, binary_quantize(m.embedding)
        FROM moved m JOIN engram_items i ON i.id = m.item_id CROSS JOIN LATERAL ({POSTING_KEYS}) AS k(key)
        ON CONFLICT (key, seq) DO NOTHING
    )
    SELECT count(*) FROM moved
"""


def plan_claim(*, n: int, least: int, held: int, workers: int) -> Statement:
    """Claim the oldest free queued vectors: at most ``n``, a worker's share of what the indexer's
    ``workers`` do not hold (``held``) yet, at least ``least``; rows of (item_id, model)."""
    return Statement.bind(CLAIM_BACKLOG, {"n": n, "least": least, "held": held, "workers": workers})


def plan_claim_oldest(n: int) -> Statement:
    """Claim the oldest ``n`` free queued vectors at most; rows of (item_id, model)."""
    return Statement.bind(CLAIM_OLDEST, {"n": n})


def plan_move(ids: Sequence[str], models: Sequence[str]) -> Statement:
    """Move the claimed vectors (item ids and models, pairwise) into the index; it returns how many moved."""
    return Statement.bind(MOVE_BACKLOG, {"ids": list(ids), "models": list(models)})


# The vector index's own definition, to build it again as it was (whatever migration or reembed made it).
HNSW_DEFINITION = Statement(
    "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indexrelid = to_regclass('engram_embeddings_hnsw')"
)
# What the index holds, as the statistics last counted it (-1 before any count); exact enough to
# decide between building the index afresh and inserting the backlog into it.
INDEXED_ESTIMATE = Statement("SELECT reltuples::bigint FROM pg_class WHERE oid = 'engram_embeddings'::regclass")
INDEXED_COUNT = Statement("SELECT count(*) FROM engram_embeddings")
DROP_HNSW = "DROP INDEX engram_embeddings_hnsw"
