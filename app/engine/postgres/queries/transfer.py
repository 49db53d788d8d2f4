"""Export: every item a filter admits, in the order stored, with its vector when asked."""

from __future__ import annotations

from app.engine.postgres.filters import Predicate
from app.engine.postgres.queries.statement import Statement


def plan_export(pred: Predicate, *, after: int, ceiling: int | None, count: int, model: str | None) -> Statement:
    """``count`` items ``pred`` admits after ``seq`` ``after`` up to ``ceiling`` (the last item when the
    export began: NULL on the first page, which takes it), each with its vector of ``model`` when
    given: indexed, or still waiting in the backlog."""
    vector, joins = "NULL", ""
    if model is not None:
        vector = "coalesce(e.embedding, b.embedding)"
        joins = """
            LEFT JOIN engram_embeddings e ON e.item_id = i.id AND e.model = :model
            LEFT JOIN engram_vector_backlog b ON b.item_id = i.id AND b.model = :model"""
    sql = f"""
        SELECT i.seq, i.id, i.item, {vector} AS vector, t.ceiling
        FROM engram_items i
        CROSS JOIN (SELECT coalesce(CAST(:ceiling AS bigint), (SELECT max(seq) FROM engram_items)) AS ceiling) AS t
        {joins}
        WHERE i.seq > :after AND i.seq <= t.ceiling AND {pred.sql()}
        ORDER BY i.seq
        LIMIT :count
    """
    params = {"after": after, "ceiling": ceiling, "count": count, **pred.params}
    if model is not None:
        params["model"] = model
    return Statement.bind(sql, params)
