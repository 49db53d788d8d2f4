"""Stores and forgets: the items' rows, their thread context, their vectors into the backlog."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import numpy as np

from app.contract.requests import PREVIEW_IDS
from app.engine.postgres.filters import Predicate, live
from app.engine.postgres.queries.retention import POLICIES_SHARED, expiry_sql
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.vectors import vector_array


class ItemRow(NamedTuple):
    """One item as INSERT_ITEMS takes it (its columns in INSERT_ITEMS_COLUMNS order)."""

    id: str
    kind: str
    namespace: str
    text: str
    meta: str
    item: str
    confidence: float | None
    observed_at: str | None
    source_kind: str
    stored_at: datetime | None = None  # None: now; a restore gives the time the item was first stored


# Overlapping batches written at once wait on each other's new rows in batch order,
# and two batches in opposite orders deadlock. One lock per id, taken in one global
# order first, makes the later batch wait for the earlier instead. Before them (the one-time
# filter runs first), the retention policies are locked shared: a policy change waits for the
# writes under way and the writes after it read its policies (queries/retention.py).
LOCK_IDS = (
    "SELECT pg_advisory_xact_lock(hashtext('engram_items'), h) FROM "
    "(SELECT DISTINCT hashtext(k) AS h FROM unnest(CAST(:ids AS text[])) AS k ORDER BY h) AS locks "
    f"WHERE ({POLICIES_SHARED})"
)

# An expired copy of an item written again is erased first, so the item is stored anew (with a new
# expiry) as it would be once the sweeper had erased it: never a replay of something no read returns.
DROP_EXPIRED = "DELETE FROM engram_items i WHERE i.id = ANY(CAST(:ids AS text[])) AND i.expires_at <= now()"

# Each item's stored_at is now, unless the row gives one (a restore); its expiry under the policies
# of its namespace is measured from when it was observed, or from its stored_at when it carries no
# observation time.
INSERT_ITEMS = f"""
    INSERT INTO engram_items
        (id, kind, namespace, text, meta, item, confidence, observed_at, tags, source_kind, stored_at, expires_at)
    SELECT t.id, t.kind, t.ns, t.text, t.meta::jsonb, t.item::jsonb, t.conf, t.obs::timestamptz,
           ARRAY(SELECT jsonb_array_elements_text(coalesce(t.meta::jsonb->'tags', '[]'))), t.src,
           coalesce(t.stored, now()),
           {expiry_sql("t.ns", "coalesce(CAST(t.obs AS timestamptz), t.stored, now())")}
    FROM unnest(CAST(:ids AS text[]), CAST(:kinds AS text[]), CAST(:nss AS text[]), CAST(:texts AS text[]),
                CAST(:metas AS text[]), CAST(:items AS text[]), CAST(:conf AS float8[]),
                CAST(:obs AS text[]), CAST(:srcs AS text[]), CAST(:stored AS timestamptz[]))
         WITH ORDINALITY AS t(id, kind, ns, text, meta, item, conf, obs, src, stored, ord)
    ORDER BY t.ord
    ON CONFLICT (id) DO NOTHING
    RETURNING id
"""
# INSERT_ITEMS's parameters, one array each, in the order of ItemRow's fields.
INSERT_ITEMS_COLUMNS = ("ids", "kinds", "nss", "texts", "metas", "items", "conf", "obs", "srcs", "stored")

# Which of a batch's ids are held already (and not expired): their items are not embedded again.
HELD_IDS = f"SELECT i.id FROM engram_items i WHERE i.id = ANY(CAST(:ids AS text[])) AND {live()}"

# Each thread's latest :before items' texts, oldest first (engram_items_thread, migration 0012):
# what a new item of the thread is embedded after (app/engine/context.py).
THREAD_LATEST = f"""
    SELECT t.ns, t.thread, ARRAY(
        SELECT l.text FROM (
            SELECT b.text, b.seq FROM engram_items b
            WHERE b.namespace = t.ns AND b.meta ? 'thread_id' AND b.meta->>'thread_id' = t.thread AND {live("b")}
            ORDER BY b.seq DESC LIMIT :before
        ) AS l ORDER BY l.seq
    ) AS texts
    FROM unnest(CAST(:nss AS text[]), CAST(:threads AS text[])) AS t(ns, thread)
"""

# A write queues its vectors in the backlog (migration 0004), unindexed, and says how many wait
# there now, its own included (the count does not see the rows this statement adds); the indexer
# (app/engine/postgres/indexer.py) moves them into engram_embeddings and so into the HNSW index.
QUEUE_VECTORS = """
    WITH queued AS (
        INSERT INTO engram_vector_backlog (item_id, model, embedding)
        SELECT t.id, :model, t.v FROM unnest(CAST(:ids AS text[]), CAST(:vs AS vector[])) AS t(id, v)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM queued) + (SELECT count(*) FROM engram_vector_backlog) AS backlog
"""
QUEUE_VECTORS_UNCOUNTED = QUEUE_VECTORS.replace(" + (SELECT count(*) FROM engram_vector_backlog)", "")


def plan_held(ids: Sequence[str]) -> Statement:
    """Which of ``ids`` are stored already."""
    return Statement.bind(HELD_IDS, {"ids": list(ids)})


def plan_thread_latest(threads: Sequence[tuple[str, str]], before: int) -> Statement:
    """The latest ``before`` texts of each (namespace, thread), oldest first."""
    return Statement.bind(
        THREAD_LATEST, {"nss": [ns for ns, _ in threads], "threads": [t for _, t in threads], "before": before}
    )


def plan_lock_ids(ids: Sequence[str]) -> Statement:
    """The write's per-id locks, in one global order (taken first in its transaction)."""
    return Statement.bind(LOCK_IDS, {"ids": list(ids)})


def plan_drop_expired(ids: Sequence[str]) -> Statement:
    """Erase the expired copies of ``ids`` (DROP_EXPIRED), after the write's locks."""
    return Statement.bind(DROP_EXPIRED, {"ids": list(ids)})


def plan_insert(rows: Sequence[ItemRow]) -> Statement:
    """The items' rows, one array a column; it returns the ids it inserted."""
    columns = dict(zip(INSERT_ITEMS_COLUMNS, zip(*rows, strict=True), strict=True))
    return Statement.bind(INSERT_ITEMS, {name: list(column) for name, column in columns.items()})


def plan_queue_vectors(model: str, vectors: Mapping[str, np.ndarray], *, counted: bool = True) -> Statement:
    """The vectors of the items by id into the backlog; it returns how many wait for the index now,
    or, not ``counted`` (a bulk load's: the count reads the whole backlog), how many it queued."""
    return Statement.bind(
        QUEUE_VECTORS if counted else QUEUE_VECTORS_UNCOUNTED,
        {"model": model, "ids": list(vectors), "vs": vector_array(list(vectors.values()))},
    )


@dataclass(frozen=True)
class Keep:
    """Where a forget keeps its items for the undo window: under ``receipt``, with ``model``'s vectors."""

    receipt: str
    model: str


def _delete(where: str, params: Mapping[str, object], keep: Keep | None) -> Statement:
    """Delete what ``where`` admits, kept in ``engram_forgotten`` when ``keep`` says where; it returns
    how many. One statement: its parts read one snapshot, so the vectors are copied as they were
    before the delete's cascade removes them. What ``where`` admits that has expired is deleted
    too, but neither kept (an undo would bring back what expired) nor counted (no read saw it)."""
    returned = f"i.id, i.seq, i.namespace, i.item, i.stored_at, {live()} AS live"
    gone = f"DELETE FROM engram_items i WHERE {where} RETURNING {returned}"
    if keep is None:
        return Statement.bind(f"WITH gone AS ({gone}) SELECT count(*) FILTER (WHERE live) FROM gone", params)
    sql = f"""
        WITH gone AS ({gone}),
        kept AS (
            INSERT INTO engram_forgotten (receipt, id, seq, namespace, item, stored_at, model, embedding)
            SELECT :receipt, g.id, g.seq, g.namespace, g.item, g.stored_at, :model, coalesce(e.embedding, b.embedding)
            FROM gone g
            LEFT JOIN engram_embeddings e ON e.item_id = g.id AND e.model = :model
            LEFT JOIN engram_vector_backlog b ON b.item_id = g.id AND b.model = :model
            WHERE g.live
            RETURNING 1
        )
        SELECT count(*) FROM kept
    """
    return Statement.bind(sql, {**params, "receipt": keep.receipt, "model": keep.model})


def plan_forget_ids(ids: Sequence[str], pred: Predicate | None = None, keep: Keep | None = None) -> Statement:
    """Forget the items of ``ids`` (each once), only those ``pred`` (expired ones included: _delete)
    admits when given; it returns how many."""
    ids = list(dict.fromkeys(ids))
    if pred is None:
        return _delete("i.id = ANY(:ids)", {"ids": ids}, keep)
    return _delete(f"i.id = ANY(:ids) AND {pred.sql()}", {"ids": ids, **pred.params}, keep)


def plan_erase_kept(ids: Sequence[str], pred: Predicate | None = None) -> Statement:
    """Drop the copies of ``ids`` held for the undo window (an erasure by ids), only those in the
    namespaces ``pred`` (a reach alone) admits when given."""
    where = "i.id = ANY(:ids)" + (f" AND {pred.sql()}" if pred is not None else "")
    params = {"ids": list(dict.fromkeys(ids)), **(pred.params if pred is not None else {})}
    return Statement.bind(f"DELETE FROM engram_forgotten i WHERE {where}", params)


# engram_forgotten's rows with the columns of engram_items a filter reads (filters.py), taken from
# the item kept: its meta is the row's meta (rows.item_row writes both from one dump).
_KEPT_AS_ITEMS = """
    SELECT f.receipt, f.id, f.namespace, f.item->'meta' AS meta, f.item->>'type' AS kind,
           f.item->'meta'->'source'->>'kind' AS source_kind,
           ARRAY(SELECT jsonb_array_elements_text(coalesce(f.item->'meta'->'tags', '[]'))) AS tags,
           CAST(f.item->'meta'->>'observed_at' AS timestamptz) AS observed_at
    FROM engram_forgotten f
"""


def plan_erase_kept_filter(pred: Predicate) -> Statement:
    """Drop the copies held for the undo window that ``pred`` (a filter, without ``live``) admits:
    an erasure by filter reaches what earlier forgets kept, as it reaches the items."""
    sql = f"""
        DELETE FROM engram_forgotten k USING ({_KEPT_AS_ITEMS}) AS i
        WHERE k.receipt = i.receipt AND k.id = i.id AND {pred.sql()}
    """
    return Statement.bind(sql, pred.params)


def plan_kept(receipt: str, window_s: float) -> Statement:
    """What a receipt kept, while the window holds it, in the order the items were stored (with
    when: NULL for what was kept before migration 0017)."""
    sql = """
        SELECT id, item, stored_at, model, embedding FROM engram_forgotten
        WHERE receipt = :receipt AND forgotten_at > now() - make_interval(secs => :window)
        ORDER BY seq
    """
    return Statement.bind(sql, {"receipt": receipt, "window": window_s})


def plan_drop_receipt(receipt: str) -> Statement:
    return Statement.bind("DELETE FROM engram_forgotten WHERE receipt = :receipt", {"receipt": receipt})


def _preview(where: str, params: Mapping[str, object]) -> Statement:
    sql = f"""
        SELECT (SELECT count(*) FROM engram_items i WHERE {where}) AS n,
               ARRAY(SELECT i.id FROM engram_items i WHERE {where} ORDER BY i.seq LIMIT :first) AS first_ids
    """
    return Statement.bind(sql, {**params, "first": PREVIEW_IDS})


def plan_preview_ids(ids: Sequence[str], pred: Predicate | None = None) -> Statement:
    """What ``plan_forget_ids`` would forget (of the live items): how many, and the first ids in the order stored."""
    ids = list(dict.fromkeys(ids))
    if pred is None:
        return _preview(f"i.id = ANY(:ids) AND {live()}", {"ids": ids})
    return _preview(f"i.id = ANY(:ids) AND {pred.sql()}", {"ids": ids, **pred.params})


def plan_preview_filter(pred: Predicate) -> Statement:
    """What ``plan_forget_filter`` would forget."""
    return _preview(pred.sql(), pred.params)


def plan_forget_filter(pred: Predicate, keep: Keep | None = None) -> Statement:
    """Forget every item ``pred`` admits; it returns how many."""
    return _delete(pred.sql(), pred.params, keep)
