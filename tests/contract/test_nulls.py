"""``null`` means unset at every depth of every request body (contract, introduction).

The cases are derived from the request models (tests/support/bodies.py): a new field is covered
without a new test.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from tests.support.bodies import BodyField, all_fields, request_bodies

FIELDS = all_fields()
ADAPTERS: dict[str, TypeAdapter[Any]] = {route: TypeAdapter(annotation) for route, annotation in request_bodies()}


def dumped(field: BodyField, body: Any) -> Any:
    value = ADAPTERS[field.route].validate_python(body)
    return getattr(value, "model_dump", lambda: value)()


@pytest.mark.parametrize("field", [f for f in FIELDS if not f.required], ids=str)
def test_a_null_optional_field_validates_as_the_field_left_out(field: BodyField) -> None:
    assert dumped(field, field.body(None)) == dumped(field, field.without())


@pytest.mark.parametrize("field", [f for f in FIELDS if f.required], ids=str)
def test_a_null_required_field_is_missing(field: BodyField) -> None:
    with pytest.raises(ValidationError) as raised:
        dumped(field, field.body(None))
    errors = raised.value.errors()
    missing = [e for e in errors if e["type"] == "missing" and e["loc"][-1] == field.path[-1]]
    untagged = [e for e in errors if e["type"] == "union_tag_not_found"]
    assert missing or untagged, errors


def test_every_route_with_a_body_is_walked() -> None:
    routes = {field.route for field in FIELDS}
    assert routes == {route for route, _ in request_bodies()}
    assert len(routes) == 12


@pytest.mark.parametrize(
    "name",
    ["body.uri", "meta.source.id", "turns[0].tool_calls[0].id", "filter.reach.at", "scan_limit", "filter.kinds"],
)
def test_the_walk_reaches_nested_optionals(name: str) -> None:
    assert any(field.name == name and not field.required for field in FIELDS)


def test_a_text_body_with_a_null_uri_is_a_text_body() -> None:
    from app.contract.items import ITEM_ADAPTER, TextBody

    item = ITEM_ADAPTER.validate_python({"type": "document", "body": {"text": "x", "uri": None}})
    assert item.body == TextBody(text="x")  # type: ignore[union-attr]


def test_an_unknown_key_given_null_is_still_unknown() -> None:
    from app.contract.requests import FetchRequest

    with pytest.raises(ValidationError) as raised:
        FetchRequest.model_validate({"query": "x", "mode": "keyword", "limit": 1, "colour": None})
    assert [error["type"] for error in raised.value.errors()] == ["extra_forbidden"]
