"""JsonBodyRoute answers every body exactly as FastAPI's own route handler would."""

from __future__ import annotations

import email.message
import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, APIRouter

from app.api import errors, routes
from app.api.endpoint import JsonBodyRoute, is_json
from app.engine.postgres.engine import PostgresEngine

CONTENT_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "APPLICATION/JSON",
    " application/json ;charset=latin-1",
    "application/problem+json",
    "application/vnd.engram.v1+json; q=1",
    "application/jsonx",
    "application/xjson",
    "application/x-www-form-urlencoded",
    "text/json",
    "text/plain",
    "multipart/form-data; boundary=x",
    "json",
    "application",
    "application/",
    "/json",
    "",
    ";",
]


@pytest.mark.parametrize("content_type", CONTENT_TYPES)
def test_is_json_reads_a_content_type_as_fastapi_does(content_type: str) -> None:
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    fastapi_reads_json = message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )
    assert is_json(content_type) == fastapi_reads_json


def served_by(route_class: type[APIRoute], engine: PostgresEngine) -> FastAPI:
    """An app with the service's POST routes (and its error handlers) built with ``route_class``."""
    app = FastAPI()
    errors.install(app)
    router = APIRouter(prefix="/v1", route_class=route_class)
    for route in routes.router.routes:
        if isinstance(route, APIRoute) and "POST" in route.methods:
            router.add_api_route(route.path.removeprefix("/v1"), route.endpoint, methods=["POST"])
    app.include_router(router)
    app.state.engine = engine
    return app


def raw(body: bytes | str, content_type: str | None = "application/json") -> tuple[bytes, dict[str, str]]:
    headers = {} if content_type is None else {"Content-Type": content_type}
    return (body.encode() if isinstance(body, str) else body), headers


FETCH = json.dumps({"query": "tabs", "mode": "keyword", "limit": 3})
BODIES: dict[str, tuple[bytes, dict[str, str]]] = {
    "empty": raw(""),
    "whitespace": raw("  \n"),
    "null": raw("null"),
    "array": raw("[]"),
    "empty object": raw("{}"),
    "truncated": raw('{"query": '),
    "not utf-8": raw(b'{"query":"\xff\xfe","mode":"keyword","limit":1}'),
    "lone surrogate": raw('{"query":"\\ud83d","mode":"hybrid","limit":3,"ids":["\\udfff"]}'),
    "nul in a key": raw('{"te\\u0000xt":"t"}'),
    "NaN": raw('{"limit":NaN,"confidence":NaN}'),
    "1e400": raw('{"limit":1e400}'),
    "huge integer": raw('{"limit":1000000000000000000000000000000}'),
    "fraction": raw('{"limit":2.5}'),
    "string for a number": raw('{"limit":"5"}'),
    "deep nesting": raw("[" * 100_000 + "]" * 100_000),
    "shallower nesting": raw('{"query":' + "[" * 500 + "]" * 500 + "}"),
    "unknown key": raw('{"limit":1,"nope":true}'),
    "duplicate key": raw('{"limit":1,"limit":"x"}'),
    "text/plain": raw(FETCH, "text/plain"),
    "form": raw(FETCH, "application/x-www-form-urlencoded"),
    "no content type": raw(FETCH, None),
    "json suffix": raw(FETCH, "application/vnd.engram+json"),
    "upper-case type": raw(FETCH, "APPLICATION/JSON; charset=utf-8"),
    "fetch": raw(FETCH),
    "list": raw('{"limit":2}'),
    "explore": raw('{"facet":"tag","limit":2}'),
}
# Bodies FastAPI refuses without saying why, and what JsonBodyRoute says.
SAYS_WHY = {"not utf-8": "the body is not utf-8 (at byte 10)", "deep nesting": "the body is nested too deep to read"}
# Reads only (and writes that every one of these bodies is refused by), so both apps see one store.
ANSWERED = {"/v1/fetch", "/v1/list", "/v1/explore"}
ROUTES = ["/v1/fetch", "/v1/recall", "/v1/list", "/v1/get", "/v1/explore", "/v1/store", "/v1/store_many", "/v1/forget"]


def comparable(response: httpx.Response) -> tuple[int, str | None, Any]:
    body = response.json()
    if isinstance(body, dict):
        body.pop("request_id", None)
    return response.status_code, response.headers.get("content-type"), body


@pytest.mark.parametrize("route", ROUTES)
async def test_every_body_is_answered_as_fastapi_would(pg_engine: PostgresEngine, route: str) -> None:
    answers: dict[str, list[Any]] = {}
    for route_class in (APIRoute, JsonBodyRoute):
        transport = httpx.ASGITransport(app=served_by(route_class, pg_engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://engram") as client:
            answers[route_class.__name__] = [
                comparable(await client.post(route, content=content, headers=headers))
                for content, headers in BODIES.values()
            ]
    for name, fastapi, ours in zip(BODIES, answers["APIRoute"], answers["JsonBodyRoute"], strict=True):
        if name in SAYS_WHY:  # FastAPI's parser gives up without a reason: the same refusal, with one
            assert (ours[0], ours[2]["code"]) == (fastapi[0], fastapi[2]["code"]), name
            assert ours[2]["message"] == f"invalid request: {SAYS_WHY[name]}", name
            continue
        assert ours == fastapi, name
    if route in ANSWERED:  # not everything was refused: the comparison covers answers too
        assert any(status == 200 for status, _, _ in answers["JsonBodyRoute"])


def test_an_endpoint_of_another_shape_is_refused() -> None:
    async def shaped(engine: Any, body: dict[str, Any]) -> None: ...

    router = APIRouter(route_class=JsonBodyRoute)
    with pytest.raises(TypeError, match=r"takes \(body, engine\)"):
        router.add_api_route("/odd", shaped, methods=["POST"])
