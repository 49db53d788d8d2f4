"""Stores and forgets: the items' rows, their thread context, their vectors into the backlog."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import numpy as np

from app.contract.requests import PREVIEW_IDS
from app.engine.postgres.filters import Predicate, live
from app.engine.postgres.queries.statement import Statement
from app.engine.postgres.vectors import vector_array


class ItemRow(NamedTuple):
    """One item as WRITE_ITEMS takes it (its columns in ITEM_COLUMNS order)."""

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


# A write's steps, in one round trip (migration 0018, ``engram_write_items``): its transaction id
# taken before any item draws a seq (migration 0023: the token writer's walk counts it), the retention
# policies locked shared (a policy change waits for the writes under way, and the writes after it
# read its policies: queries/retention.py), then one lock per id in one global order (overlapping
# batches wait for each other instead of deadlocking); an expired copy of an item written again
# erased (the item is stored anew, with a new expiry, as once the sweeper had erased it: never a
# replay of something no read returns); the rows inserted (each item's stored_at now unless the row
# gives one, a restore's; its expiry under its namespace's policies measured from when it was
# observed, else from its stored_at), those already held left as they are; the new items' vectors
# queued in the backlog (migration 0004) for the indexer (app/engine/postgres/indexer.py). It
# answers the ids inserted and, when asked, how many vectors wait for the index now, its own
# included. docs/tuning.md#one-round-trip-writes
WRITE_ITEMS = """
    SELECT inserted_ids, backlog FROM engram_write_items(
        :ids, :kinds, :nss, :texts, :metas, :items, :conf, :obs, :srcs, :stored,
        :model, :vector_ids, CAST(:vectors AS vector[]), :count_backlog
    )
"""
# WRITE_ITEMS's item parameters, one array each, in the order of ItemRow's fields.
ITEM_COLUMNS = ("ids", "kinds", "nss", "texts", "metas", "items", "conf", "obs", "srcs", "stored")
# What engram_write_items raises, writing nothing, when an item it would insert came without its
# vector: held when the write began, forgotten since (the engine embeds it and writes again).
UNVECTORED = "EG001"

# Before a write embeds anything, in one statement: which of its ids are held already (and not
# expired), whose items are not embedded again (rows with an ``id``); and each thread's latest
# :before items' texts, oldest first (engram_items_thread, migration 0012), what a new item of the
# thread is embedded after (app/engine/context.py; rows with a ``thread``).
PRIOR = f"""
    SELECT i.id, NULL AS ns, NULL AS thread, NULL AS texts
    FROM engram_items i WHERE i.id = ANY(CAST(:ids AS text[])) AND {live()}
    UNION ALL
    SELECT NULL, t.ns, t.thread, ARRAY(
        SELECT l.text FROM (
            SELECT b.text, b.seq FROM engram_items b
            WHERE b.namespace = t.ns AND b.meta ? 'thread_id' AND b.meta->>'thread_id' = t.thread AND {live("b")}
            ORDER BY b.seq DESC LIMIT :before
        ) AS l ORDER BY l.seq
    )
    FROM unnest(CAST(:nss AS text[]), CAST(:threads AS text[])) AS t(ns, thread)
"""


def plan_prior(ids: Sequence[str], threads: Sequence[tuple[str, str]], before: int) -> Statement:
    """Which of ``ids`` are stored already, and the latest ``before`` texts of each (namespace, thread).

    On one generic plan: the values change no plan (ids by primary key, each thread by its index),
    and planning was half the statement's time (docs/tuning.md#one-round-trip-writes).
    """
    return Statement.bind(
        PRIOR,
        {"ids": list(ids), "nss": [ns for ns, _ in threads], "threads": [t for _, t in threads], "before": before},
        generic_plan=True,
    )


def plan_write(
    rows: Sequence[ItemRow], model: str, vectors: Mapping[str, np.ndarray], *, count_backlog: bool
) -> Statement:
    """The items' rows, one array a column, and the vectors of the new ones by id (WRITE_ITEMS)."""
    columns = dict(zip(ITEM_COLUMNS, zip(*rows, strict=True), strict=True))
    params: dict[str, object] = {name: list(column) for name, column in columns.items()}
    params |= {
        "model": model,
        "vector_ids": list(vectors),
        "vectors": vector_array(list(vectors.values())) if vectors else [],
        "count_backlog": count_backlog,
    }
    return Statement.bind(WRITE_ITEMS, params)


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
