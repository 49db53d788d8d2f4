"""Over the wire, for every field at every depth of every request body (derived from the models):
``null`` is the field left out, and a wrong value gets a precise 422 (contract, introduction, §7).
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.support.bodies import all_fields, request_bodies, wrong_values
from tests.support.engines import ClientFactory

FIELDS = all_fields()
# A configured key: the first key made through /v1/keys would otherwise close an open service.
KEY = "nulls-key"
ROUTES = [route for route, _ in request_bodies()]
_QUOTED = re.compile(r"'[^']*'")
# Python's words for a value, where the client sent JSON: None, 'True', {'k': 1}; and pydantic's own.
_REPR = re.compile(r"\bNone\b|'(True|False)'|\{'|\['|value error")


async def answer(client: httpx.AsyncClient, route: str, body: Any) -> tuple[int, Any]:
    """Status and body, without what differs between any two calls: the request id, and a new
    key's id, secret and creation time."""
    response = await client.post(route, json=body)
    payload = response.json()
    if isinstance(payload, dict):
        payload.pop("request_id", None)
        payload.pop("secret", None)
        if isinstance(payload.get("key"), dict):
            payload["key"] = {k: v for k, v in payload["key"].items() if k not in ("id", "created_at")}
    return response.status_code, payload


def style_slips(text: str) -> list[str]:
    """What contract §7 forbids in a message or a problem: Python reprs, capitals, end punctuation."""
    bare = _QUOTED.sub("''", text)
    slips = []
    if _REPR.search(text):
        slips.append("a python repr")
    if bare != bare.lower():
        slips.append("uppercase outside a quoted value")
    if text != text.strip() or text[-1:] in tuple(".!?;:,"):
        slips.append("trailing punctuation or space")
    return slips


@pytest.mark.parametrize("route", ROUTES)
async def test_a_null_optional_field_answers_as_the_field_left_out(make_client: ClientFactory, route: str) -> None:
    differ = []
    async with make_client(api_keys=KEY) as client:
        client.headers["authorization"] = f"Bearer {KEY}"
        for field in (f for f in FIELDS if f.route == route and not f.required):
            await client.post(route, json=field.without())  # a store is a replay from here on
            with_null = await answer(client, route, field.body(None))
            left_out = await answer(client, route, field.without())
            if with_null != left_out:
                differ.append(f"{field.name}: {with_null} != {left_out}")
    assert not differ, "\n".join(differ)


@pytest.mark.parametrize("route", ROUTES)
async def test_a_null_required_field_is_a_422_naming_it(make_client: ClientFactory, route: str) -> None:
    wrong = []
    async with make_client(api_keys=KEY) as client:
        client.headers["authorization"] = f"Bearer {KEY}"
        for field in (f for f in FIELDS if f.route == route and f.required):
            status, body = await answer(client, route, field.body(None))
            details = {d["field"]: d["problem"] for d in body.get("details", [])} if status == 422 else {}
            if body.get("code") != "invalid_request" or details.get(field.name) != "field required (null means unset)":
                wrong.append(f"{field.name}: {status} {body}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("route", ROUTES)
async def test_wrong_values_in_every_field_get_precise_messages(make_client: ClientFactory, route: str) -> None:
    slips = []
    async with make_client(api_keys=KEY) as client:
        client.headers["authorization"] = f"Bearer {KEY}"
        for field in (f for f in FIELDS if f.route == route):
            for value in [None, *wrong_values(field.annotation)]:
                status, body = await answer(client, route, field.body(value))
                if status >= 500:
                    slips.append(f"{field.name}={value!r}: {status} {body}")
                if status < 400:
                    continue
                texts = [body["message"], *(d["problem"] for d in body.get("details", []))]
                if not body["message"].startswith("invalid request: "):
                    slips.append(f"{field.name}={value!r}: {body['message']}")
                slips += [f"{field.name}={value!r}: {s} in {t!r}" for t in texts for s in style_slips(t)]
    assert not slips, "\n".join(slips)


async def test_openapi_says_optional_request_fields_take_null_and_answers_never_carry_it(
    make_client: ClientFactory,
) -> None:
    from app.api.openapi import reachable

    async with make_client(api_keys=KEY) as client:
        client.headers["authorization"] = f"Bearer {KEY}"
        document = (await client.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    requested, answered = reachable(document, "requests"), reachable(document, "answers")
    for name in requested:
        required = set(schemas[name].get("required", ()))
        for key, schema in schemas[name].get("properties", {}).items():
            assert ({"type": "null"} in schema.get("anyOf", [])) == (key not in required), f"{name}.{key}"
    assert "Meta" in requested and "StoredMeta" in answered and not requested & answered & {"Meta", "Source"}
    assert '"null"' not in str({name: schemas[name] for name in answered}).replace("'", '"')
