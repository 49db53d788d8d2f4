"""The wire form of an answer: JSON with unset fields omitted (never ``null`` in responses)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def wire_json(answer: BaseModel) -> str:
    """Serialised once, in pydantic's core: no per-model Python hook on the hot path."""
    return answer.model_dump_json(exclude_none=True)


def wire_dict(answer: BaseModel) -> dict[str, Any]:
    return answer.model_dump(mode="json", exclude_none=True)
