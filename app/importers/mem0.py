"""mem0's memories (``Memory.get_all()`` as JSON, or a list of them) as learnings.

A memory ``{id, memory, user_id?, agent_id?, run_id?, metadata?, categories?, created_at,
updated_at?}`` becomes a learning of kind ``fact`` and confidence 0.8 (mem0 keeps no confidence)
whose text is ``memory``, in ``user:<user_id>/agent:<agent_id>`` below the given namespace,
with ``run_id`` as its ``thread_id``, its categories (and ``metadata.tags``) as tags, its last
update as ``observed_at``, and ``{"kind": "import", "id": "mem0:<id>"}`` as its source.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import orjson

from app.importers.segments import below, segment_id

CONFIDENCE = 0.8


def memories(document: Any) -> list[Any]:
    """The memories of a ``get_all()`` answer (``{"results": [...]}``) or of a bare list."""
    if isinstance(document, dict) and isinstance(document.get("results"), list):
        return list(document["results"])
    if isinstance(document, list):
        return document
    raise ValueError('a mem0 export is {"results": [...]} or a list of memories')


def learning(memory: Any, namespace: str | None = None) -> dict[str, Any]:
    """One memory as an item (a value the contract refuses is left for the import to report)."""
    if not isinstance(memory, dict):
        return {"memory": memory}  # not an item: refused with its number
    segments = []
    if memory.get("user_id") is not None:
        segments.append(f"user:{segment_id(memory['user_id'])}")
    if memory.get("agent_id") is not None:
        segments.append(f"agent:{segment_id(memory['agent_id'])}")
    metadata = memory.get("metadata") if isinstance(memory.get("metadata"), dict) else {}
    tags = [*(memory.get("categories") or []), *(metadata.get("tags") or [])]
    meta: dict[str, Any] = {"source": {"kind": "import", "id": f"mem0:{memory.get('id')}"}}
    if (ns := below(namespace, *segments)) is not None:
        meta["namespace"] = ns
    if memory.get("run_id") is not None:
        meta["thread_id"] = str(memory["run_id"])
    if tags:
        meta["tags"] = [str(tag) for tag in dict.fromkeys(tags)]
    if observed := memory.get("updated_at") or memory.get("created_at"):
        meta["observed_at"] = observed
    return {"type": "learning", "text": memory.get("memory"), "kind": "fact", "confidence": CONFIDENCE, "meta": meta}


def read_export(content: bytes) -> list[Any]:
    """The memories of a mem0 export file; ``ValueError`` when it is not JSON or not mem0's shape."""
    return memories(json.loads(content))


async def mem0_lines(found: list[Any], namespace: str | None = None) -> AsyncIterator[bytes]:
    """Memories as import lines, one a memory, in the file's order."""
    for memory in found:
        yield orjson.dumps({"item": learning(memory, namespace)}) + b"\n"
