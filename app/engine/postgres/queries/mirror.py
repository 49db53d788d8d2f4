"""The statements of a filter key's postings copied into the service's memory (app/engine/postgres/mirror.py):
the copy's reading, the postings filed since, and the ranking of the candidates the copy's scan chose."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.engine.postgres.filters import EXPIRED_IDS
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.queries.vector import candidates_ranked_sql
from app.engine.postgres.vectors import query_vector

# A key's postings as of the statement's snapshot (returned beside them): seqs, item ids and sketches
# in one row, the sketches as one bytea of varbit_send's (a length word, then the bits) end to end.
READ_KEY = """
    SELECT pg_current_snapshot()::text AS snapshot,
           coalesce(array_agg(p.seq ORDER BY p.seq), '{}') AS seqs,
           coalesce(array_agg(p.item_id ORDER BY p.seq), '{}') AS ids,
           coalesce(string_agg(varbit_send(p.sketch), ''::bytea ORDER BY p.seq), ''::bytea) AS sketches
    FROM engram_sketch_postings p WHERE p.key = $1
"""

# The postings a copy as of snapshot :snapshot lacks: filed by a transaction it does not see
# (the index on (key, moved) reads only those from its xmin on).
_FILED_SINCE = """
    SELECT p.key, p.seq, p.item_id, p.sketch FROM engram_sketch_postings p
    JOIN unnest(CAST(:keys AS text[]), CAST(CAST(:snapshots AS text[]) AS pg_snapshot[])) AS k(key, snapshot)
        ON p.key = k.key
    WHERE p.moved >= pg_snapshot_xmin(k.snapshot) AND NOT pg_visible_in_snapshot(p.moved, k.snapshot)
"""
# Those postings (to fold into the copy), each beside the statement's snapshot; one row without a
# posting when there are none.
FILED_SINCE = f"""
    SELECT s.snapshot, f.key, f.seq, f.item_id, varbit_send(f.sketch) AS sketch
    FROM (SELECT pg_current_snapshot()::text AS snapshot) AS s
    LEFT JOIN ({_FILED_SINCE}) AS f ON true
"""


def plan_read_key(key: str) -> Statement:
    return Statement(READ_KEY, (key,))


def plan_filed_since(keys: Sequence[str], snapshots: Sequence[str]) -> Statement:
    """The postings of each key filed since its copy's snapshot (pairwise), and the snapshot now."""
    sql = FILED_SINCE.replace(":keys", "$1").replace(":snapshots", "$2")
    return Statement(sql, (list(keys), list(snapshots)))


def mirrored_sql(where: str, *, live: bool) -> str:
    """The vector ranking of a filter whose postings the service scanned in memory: the candidates
    it chose (:ids, :seqs) and the postings filed since its copy (every one: they are few), ranked
    as the sketch statement's are (queries.vector.candidates_ranked_sql). An item filed under several
    keys, or forgotten since the copy, is ranked once or not at all (it has no vector left)."""
    candidates = f"""
            SELECT c.id, c.seq FROM unnest(CAST(:ids AS text[]), CAST(:seqs AS bigint[])) AS c(id, seq)
            UNION
            SELECT f.item_id, f.seq FROM ({_FILED_SINCE}) AS f"""
    alive = f" WHERE c.id NOT IN ({EXPIRED_IDS})" if live else ""
    return candidates_ranked_sql(candidates, where, alive=alive)


def plan_mirrored(
    vector: Sequence[float] | np.ndarray,
    where: str,
    params: dict[str, object],
    *,
    live: bool,
    model: str,
    ids: Sequence[str],
    seqs: Sequence[int],
    keys: Sequence[str],
    snapshots: Sequence[str],
    offset: int,
    count: int,
) -> Statement:
    """``count`` rows of the vector ranking from ``offset`` (mirrored_sql) under the filter ``where``
    with its ``params``, ``live`` leaving the expired out."""
    values = {
        "vec": query_vector(vector),
        "model": model,
        "ids": list(ids),
        "seqs": list(seqs),
        "keys": list(keys),
        "snapshots": list(snapshots),
        "depth": offset + count,
        "offset": offset,
        **params,
    }
    return Statement.bind(mirrored_sql(where, live=live), values)
