"""An item's row is made from one dump of it (engine.item_row): it must hold what the item's own methods give."""

from __future__ import annotations

import json

from app.contract.items import ITEM_ADAPTER, StoredItem
from app.engine.postgres.rows import item_row
from tests.engine.test_facet_counts import varied_items

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
    return [item.validate() for item in given]


def test_a_row_holds_the_items_json_meta_and_fingerprint() -> None:
    for item in items():
        row = item_row(item, item.render_text())
        assert row.id == item.fingerprint()
        assert json.loads(row.item) == json.loads(item.model_dump_json(exclude_none=True))
        assert json.loads(row.meta) == item.meta.model_dump(mode="json", exclude_none=True)
        assert (row.kind, row.namespace, row.text) == (item.type, item.meta.namespace or "", item.render_text())
        assert row.observed_at == item.meta.model_dump(mode="json").get("observed_at")
        assert row.source_kind == item.meta.source.kind  # type: ignore[union-attr]
