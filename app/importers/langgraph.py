"""Rows of LangGraph's PostgresStore (its ``store`` table) as documents.

A row ``(prefix, key, value, updated_at)`` — ``prefix`` is the namespace tuple joined by ``.`` —
becomes a document titled ``key`` in the given namespace, filed under the folder
``/<prefix parts joined by />`` (so a folder filter selects a LangGraph namespace and its
children), observed at ``updated_at``, with ``{"kind": "import", "id": "langgraph:<prefix>/<key>"}``
as its source. Its body is the value's ``content``, ``text``, ``memory`` or ``data`` when that is
a string, else the value as JSON (keys sorted, mime ``application/json``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import orjson

from app.engine.postgres.schema import driver_url

TEXT_FIELDS = ("content", "text", "memory", "data")
PAGE = 1000


def document(prefix: str, key: str, value: Any, updated_at: Any, namespace: str | None = None) -> dict[str, Any]:
    text = next((value[f] for f in TEXT_FIELDS if isinstance(value, dict) and isinstance(value.get(f), str)), None)
    item: dict[str, Any] = {"type": "document", "title": key}
    if text is not None and text.strip():
        item["body"] = {"text": text}
    else:
        item["body"] = {"text": orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()}
        item["mime"] = "application/json"
    meta: dict[str, Any] = {
        "folder": "/" + "/".join(prefix.split(".")),
        "source": {"kind": "import", "id": f"langgraph:{prefix}/{key}"},
    }
    if namespace:
        meta["namespace"] = namespace
    if updated_at is not None:
        meta["observed_at"] = updated_at.isoformat() if hasattr(updated_at, "isoformat") else str(updated_at)
    item["meta"] = meta
    return item


async def langgraph_lines(dsn: str, namespace: str | None = None) -> AsyncIterator[bytes]:
    """Every row of the store at ``dsn`` as an import line, by prefix and key."""
    connection = await asyncpg.connect(driver_url(dsn))
    try:
        after: tuple[str, str] = ("", "")
        while True:
            rows = await connection.fetch(
                "SELECT prefix, key, value::text AS value, updated_at FROM store"
                " WHERE (prefix, key) > ($1, $2) ORDER BY prefix, key LIMIT $3",
                *after,
                PAGE,
            )
            for row in rows:
                item = document(row["prefix"], row["key"], orjson.loads(row["value"]), row["updated_at"], namespace)
                yield orjson.dumps({"item": item}) + b"\n"
            if len(rows) < PAGE:
                return
            after = (rows[-1]["prefix"], rows[-1]["key"])
    finally:
        await connection.close()
