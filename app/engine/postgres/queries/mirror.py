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

# The postings a copy as of a snapshot lacks: filed by a transaction that began after it was taken (from
# its xmax on) or was running then (its xip list). Each part reads only those rows from the index on
# (key, moved), however far back a transaction left open elsewhere holds the snapshot's xmin.
_FILED_SINCE = """
    SELECT p.key, p.seq, p.item_id, p.sketch
    FROM unnest(CAST(:keys AS text[]), CAST(CAST(:xmaxs AS text[]) AS xid8[])) AS k(key, xmax)
    JOIN engram_sketch_postings p ON p.key = k.key AND p.moved >= k.xmax
    UNION ALL
    SELECT p.key, p.seq, p.item_id, p.sketch
    FROM unnest(CAST(:running_keys AS text[]), CAST(CAST(:running AS text[]) AS xid8[])) AS r(key, xid)
    JOIN engram_sketch_postings p ON p.key = r.key AND p.moved = r.xid
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


def unseen(keys: Sequence[str], snapshots: Sequence[str]) -> dict[str, list[str]]:
    """What each key's snapshot (pairwise; ``pg_current_snapshot()`` as text, ``xmin:xmax:xip,...``)
    does not see, as _FILED_SINCE's parameters: its xmax, and each transaction running when it was
    taken beside its key."""
    xmaxs, running_keys, running = [], [], []
    for key, snapshot in zip(keys, snapshots, strict=True):
        _, xmax, xips = snapshot.split(":")
        xmaxs.append(xmax)
        for xid in filter(None, xips.split(",")):
            running_keys.append(key)
            running.append(xid)
    return {"keys": list(keys), "xmaxs": xmaxs, "running_keys": running_keys, "running": running}


def plan_filed_since(keys: Sequence[str], snapshots: Sequence[str]) -> Statement:
    """The postings of each key filed since its copy's snapshot (pairwise), and the snapshot now."""
    return Statement.bind(FILED_SINCE, unseen(keys, snapshots))


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
        **unseen(keys, snapshots),
        "depth": offset + count,
        "offset": offset,
        **params,
    }
    return Statement.bind(mirrored_sql(where, live=live), values)
