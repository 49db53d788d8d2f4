"""Rows to and from ``engram_items``: an item's row as a write inserts it, a hit from a read's row."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel

from app.contract.items import StoredItem, fingerprint_of
from app.contract.meta import Meta, Source, ToolCall, TurnRange
from app.contract.requests import Hit
from app.engine.postgres.queries.writes import ItemRow


def item_row(item: StoredItem, text: str) -> ItemRow:
    """``item``'s row from one dump of it: what is stored of it is read first, then its id is taken
    over the same values made canonical (which changes them): one dump, not one per use
    (docs/tuning.md#row-hydration).
    """
    data = item.as_json()
    meta = data["meta"]
    meta_json, item_json = orjson.dumps(meta).decode(), orjson.dumps(data).decode()
    observed_at, source_kind = meta.get("observed_at"), meta["source"]["kind"]
    return ItemRow(
        id=fingerprint_of(data),
        kind=item.type,
        namespace=item.meta.namespace or "",
        text=text,
        meta=meta_json,
        item=item_json,
        confidence=getattr(item, "confidence", None),
        observed_at=observed_at,
        source_kind=source_kind,
    )


_set_attribute = object.__setattr__
Model = TypeVar("Model", bound=BaseModel)


@functools.cache
def _unset(model: type[BaseModel]) -> dict[str, None]:
    """Every field of ``model`` as None, which must be each optional field's default."""
    defaults = {name: field.default for name, field in model.model_fields.items() if not field.is_required()}
    if any(value is not None or model.model_fields[name].default_factory for name, value in defaults.items()):
        raise TypeError(f"{model.__name__} has a default other than None: build it with model_construct")
    return dict.fromkeys(model.model_fields)


def built(model: type[Model], values: dict[str, Any]) -> Model:
    """``model`` from values this engine validated on the way in, as ``model_construct`` makes it
    (the same instance state) without its per-field default lookup (docs/tuning.md#row-hydration).
    tests/engine/postgres/test_rows.py checks the result equals the validated model, so a pydantic
    that lays instances out differently fails there first.
    """
    instance = model.__new__(model)
    _set_attribute(instance, "__dict__", {**_unset(model), **values})
    _set_attribute(instance, "__pydantic_fields_set__", set(values))
    _set_attribute(instance, "__pydantic_extra__", None)
    _set_attribute(instance, "__pydantic_private__", None)
    return instance


def meta_of(stored: dict[str, Any]) -> Meta:
    """Meta from the JSON this engine wrote, validated on the way in: built, not re-validated
    (``Meta.model_validate`` per row cost more than the statement; docs/tuning.md#row-hydration)."""
    fields: dict[str, Any] = dict(stored)
    if "source" in fields:
        fields["source"] = built(Source, fields["source"])
    if "tool_call" in fields:
        fields["tool_call"] = built(ToolCall, fields["tool_call"])
    if "turns" in fields:
        fields["turns"] = built(TurnRange, fields["turns"])
    if "observed_at" in fields:
        fields["observed_at"] = datetime.fromisoformat(fields["observed_at"])
    return built(Meta, fields)


def hit_of(row: Mapping[str, Any], score: float, *, stored: bool = False) -> Hit:
    """A hit from an ``engram_items`` row (HIT_COLUMNS), with its ``stored_at`` when ``stored`` (the
    row then has it: queries.listing.plan_get)."""
    return built(
        Hit,
        {
            "id": row["id"],
            "kind": row["kind"],
            "text": row["text"],
            "meta": meta_of(row["meta"]),
            "score": score,
            "confidence": row["confidence"],
            "stored_at": row["stored_at"] if stored else None,
        },
    )
