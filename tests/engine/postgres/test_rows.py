"""Rows to and from engram_items (app/engine/postgres/rows.py): an item's row holds what the item's own
methods give, and hits built from rows are the models validation would make."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from app.contract.items import ITEM_ADAPTER, StoredItem
from app.contract.meta import Meta
from app.contract.requests import Hit
from app.engine.postgres.rows import built, hit_of, item_row, meta_of
from tests.engine.postgres.test_facet_counts import varied_items

# What making an item canonical drops, which its stored JSON keeps: when it was observed.
OBSERVED = [
    {"type": "learning", "text": "observed", "kind": "fact", "confidence": 0.25, "meta": {"observed_at": at}}
    for at in ("2026-01-02T03:04:05Z", "2026-01-02T04:04:05.5+01:00")
] + [
    {
        "type": "conversation",
        "turns": [{"role": "user", "text": "hi", "at": "2026-01-02T03:04:05Z", "tool_calls": []}],
        "meta": {"observed_at": "2026-01-02T03:04:05Z", "namespace": "root", "tags": []},
    }
]


def items() -> list[StoredItem]:
    """As store_many has them: validated."""
    given = [*varied_items(300, seed=11), *(ITEM_ADAPTER.validate_python(data) for data in OBSERVED)]
    return [item.checked() for item in given]


def test_a_row_holds_the_items_json_meta_and_fingerprint() -> None:
    for item in items():
        row = item_row(item, item.render_text())
        assert row.id == item.fingerprint()
        assert json.loads(row.item) == json.loads(item.model_dump_json(exclude_none=True))
        assert json.loads(row.meta) == item.meta.model_dump(mode="json", exclude_none=True)
        assert (row.kind, row.namespace, row.text) == (item.type, item.meta.namespace or "", item.render_text())
        assert row.observed_at == item.meta.model_dump(mode="json").get("observed_at")
        assert row.source_kind == item.meta.source.kind  # type: ignore[union-attr]


FULL_META = {
    "namespace": "team:acme/project:p1",
    "workspace": "ws",
    "folder": "src/app",
    "file_path": "src/app/main.py",
    "language": "python",
    "repo": "acme/app",
    "commit": "abc123",
    "url": "https://example.com/x",
    "thread_id": "t-1",
    "turns": {"first": 2, "last": 5},
    "agent_id": "writer",
    "tool_call": {"name": "search", "id": "call-1"},
    "source": {"kind": "import", "id": "s-1"},
    "tags": ["ml", "auth"],
    "observed_at": "2026-11-30T08:04:02Z",
}


def _stored(meta: dict[str, Any]) -> tuple[dict[str, Any], Meta, float | None]:
    """The meta JSON as the engine writes it, the validated meta it came from, and the confidence."""
    item = ITEM_ADAPTER.validate_python(
        {"type": "learning", "text": "a stored learning", "kind": "fact", "confidence": 0.7, "meta": meta}
    ).checked()
    return item.meta.model_dump(mode="json", exclude_none=True), item.meta, item.confidence


@pytest.mark.parametrize("meta", [FULL_META, {}, {"tags": ["x"]}], ids=["every field", "nothing", "tags"])
def test_a_built_hit_is_the_validated_one(meta: dict[str, Any]) -> None:
    stored, validated, confidence = _stored(meta)
    assert meta_of(stored) == validated
    assert meta_of(stored).model_dump_json(exclude_none=True) == validated.model_dump_json(exclude_none=True)
    row = {"id": "f" * 40, "kind": "learning", "text": "a stored learning", "meta": stored, "confidence": confidence}
    hit = hit_of(row, 0.5)
    expected = Hit(id="f" * 40, kind="learning", text="a stored learning", meta=validated, score=0.5, confidence=0.7)
    assert hit == expected
    assert hit.model_dump_json(exclude_none=True) == expected.model_dump_json(exclude_none=True)
    assert hit.model_fields_set == Hit.model_construct(**dict(expected)).model_fields_set


def test_a_hit_built_for_get_carries_its_stored_time() -> None:
    stored, validated, confidence = _stored({"tags": ["x"]})
    when = datetime(2026, 12, 5, 6, 3, 0, 120000, tzinfo=UTC)
    row = {"id": "f" * 40, "kind": "learning", "text": "a stored learning", "meta": stored, "confidence": confidence}
    hit = hit_of({**row, "stored_at": when}, 0.0, stored=True)
    expected = Hit(id="f" * 40, kind="learning", text="a stored learning", meta=validated, score=0.0, confidence=0.7,
                   stored_at=when)  # fmt: skip
    assert hit == expected
    assert hit.model_dump_json(exclude_none=True) == expected.model_dump_json(exclude_none=True)
    assert '"stored_at":"2026-12-05T06:03:00.12Z"' in hit.model_dump_json()
    assert "stored_at" not in hit_of(row, 0.0).model_dump_json(exclude_none=True)


def test_fields_set_are_the_ones_given() -> None:
    stored, _, _ = _stored({"tags": ["x"]})
    assert meta_of(stored).model_fields_set == set(stored)


def test_a_model_with_other_defaults_is_refused() -> None:
    class Counted(BaseModel):
        count: int = 0

    with pytest.raises(TypeError, match="default other than None"):
        built(Counted, {})
