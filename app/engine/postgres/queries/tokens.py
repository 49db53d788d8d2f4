"""The statements of late-interaction token vectors (migration 0019): the items that lack them,
their storing, and their reading for a ranking's first hits (app/engine/postgres/tokens.py)."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from app.engine.postgres.queries.statement import Statement

# The items after ``seq`` $2 without token vectors of model $1, oldest first, $3 at most, each row
# with the statement's snapshot bounds (one row of NULL items when none is missing): the write
# transactions below ``xmax`` not yet ended may hold items behind the walk (TokenWriter._missing).
MISSING_AFTER = """
    WITH snapshot AS (SELECT pg_current_snapshot() AS s)
    SELECT pg_snapshot_xmin(snapshot.s)::text::bigint AS xmin, pg_snapshot_xmax(snapshot.s)::text::bigint AS xmax,
           m.seq, m.id, m.text
    FROM snapshot LEFT JOIN LATERAL (
        SELECT i.seq, i.id, i.text FROM engram_items i
        WHERE i.seq > $2 AND NOT EXISTS (
            SELECT 1 FROM engram_token_vectors t WHERE t.item_id = i.id AND t.model = $1
        )
        ORDER BY i.seq LIMIT $3
    ) AS m ON true
    ORDER BY m.seq
"""
# Token vectors stored for the items still there: one a forget is deleting is left (SKIP LOCKED),
# never waited for, and goes with its item.
STORE = """
    WITH alive AS (SELECT i.id FROM engram_items i WHERE i.id = ANY($2) FOR KEY SHARE SKIP LOCKED)
    INSERT INTO engram_token_vectors (item_id, model, vectors)
    SELECT t.id, $1, t.vectors FROM unnest(CAST($2 AS text[]), CAST($3 AS bytea[])) AS t(id, vectors)
    JOIN alive a ON a.id = t.id
    ON CONFLICT (item_id, model) DO NOTHING
"""
READ = "SELECT item_id, vectors FROM engram_token_vectors WHERE model = $1 AND item_id = ANY($2)"


def plan_read(model: str, ids: Sequence[str]) -> Statement:
    """The token vectors of model ``model`` held for ``ids``."""
    return Statement(READ, (model, list(ids)))


def read_rows(rows: Sequence[asyncpg.Record]) -> dict[str, bytes]:
    """Each item's token vectors by id, as ``plan_read`` answered them: packed, as stored
    (``late.stored_maxsim`` scores them so)."""
    return {row["item_id"]: row["vectors"] for row in rows}
