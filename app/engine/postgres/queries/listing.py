"""Listing in the order items were stored, and getting items by id."""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.postgres.filters import Predicate
from app.engine.postgres.queries.statement import HIT_COLUMNS, Statement


def list_sql(where: str) -> str:
    """A page of the listing after ``:after``, up to ``:ceiling``: the last item stored when the
    first page was read (NULL on the first page, which takes it and answers it in every row).

    Items stored after that are left to a new listing: an item forgotten and stored again while a
    client pages takes a new ``seq``, and without the ceiling a cursor that had passed it met it
    again (contract §5: never returned twice)."""
    return f"""
        SELECT {HIT_COLUMNS}, i.seq, t.ceiling
        FROM engram_items i,
             (SELECT coalesce(CAST(:ceiling AS bigint), (SELECT max(seq) FROM engram_items)) AS ceiling) AS t
        WHERE i.seq > :after AND i.seq <= t.ceiling AND {where}
        ORDER BY i.seq
        LIMIT :count
    """


def plan_list(pred: Predicate, *, after: int, ceiling: int | None, count: int) -> Statement:
    """``count`` items ``pred`` admits after ``seq`` ``after``, up to ``ceiling`` (list_sql)."""
    return Statement.bind(list_sql(pred.sql()), {"after": after, "ceiling": ceiling, "count": count, **pred.params})


def plan_get(pred: Predicate, ids: Sequence[str]) -> Statement:
    """The items of ``ids`` that ``pred`` admits, in no particular order, with when each was stored."""
    sql = f"SELECT {HIT_COLUMNS}, i.stored_at FROM engram_items i WHERE i.id = ANY(:ids) AND {pred.sql()}"
    return Statement.bind(sql, {"ids": list(ids), **pred.params})
