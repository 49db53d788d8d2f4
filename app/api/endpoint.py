"""How an endpoint is called: with the app's engine and, for a POST, its JSON body validated here.

FastAPI reads such a body, then solves the route's dependencies, validates, and calls the
endpoint through several layers made for the general case (forms, files, streams,
sub-dependencies, telemetry hooks). Every POST route here is the same small case, so
``JsonBodyRoute`` (a custom ``route_class``, FastAPI's own extension point) reads the body
as FastAPI does, validates it against the same type and raises the same errors, and calls
the endpoint with the body and the engine. Routing, the OpenAPI document and the error
handlers are FastAPI's, unchanged. What it saves: docs/tuning.md#the-post-route.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError

from app.engine.protocol import MemoryEngine
from app.engine.scoped import as_allowed


async def engine_of(request: Request) -> MemoryEngine:
    """The engine create_app opened, as the caller's key may use it (app/engine/scoped.py). Async so
    FastAPI calls it on the loop: a plain ``def`` dependency costs a thread hop per request."""
    return as_allowed(request.app.state.engine, request.scope.get("state", {}).get("access"))


def validated(adapter: TypeAdapter[Any], value: Any) -> Any:
    """``value`` as the body type ``adapter`` reads, or the error FastAPI raises for a body that does not fit.

    The MCP tools validate their arguments here too, so a tool refuses exactly what its route refuses."""
    try:
        return adapter.validate_python(value, from_attributes=True)
    except ValidationError as error:
        problems = error.errors(include_url=False)
        located = [{**p, "loc": ("body", *p["loc"])} for p in problems]
        raise RequestValidationError(located, body=value) from None


def is_json(content_type: str) -> bool:
    """``application/json`` or ``application/*+json``, parameters and case aside, as FastAPI decides it."""
    mime = content_type.partition(";")[0].strip().lower()
    maintype, _, subtype = mime.partition("/")
    return maintype == "application" and (subtype == "json" or subtype.endswith("+json"))


def read_body(body: bytes, content_type: str | None) -> Any:
    """What FastAPI hands its validation: the parsed JSON for a JSON content type, else the bytes
    themselves (which no model accepts). An empty body is a missing one; a body that cannot be read
    as JSON is a ``json_invalid`` problem that says why: not UTF-8, not JSON (and where), or nested
    past the parser's depth."""
    if not body:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    if not content_type or not is_json(content_type):
        return body
    try:
        # UTF-8 only (RFC 8259; a byte order mark is ignored): json.loads on bytes would also guess
        # UTF-16 and UTF-32.
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise unreadable(f"the body is not utf-8 (at byte {error.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:  # as FastAPI raises it: the error handler says where
        problem = {"type": "json_invalid", "loc": ("body", error.pos), "msg": "JSON decode error", "input": {}}
        raise RequestValidationError([{**problem, "ctx": {"error": error.msg}}], body=error.doc) from None
    except RecursionError:  # the parser's depth, short of the interpreter's recursion limit
        raise unreadable("the body is nested too deep to read") from None


def unreadable(problem: str) -> RequestValidationError:
    """The 422 of a body that cannot be parsed at all: ``problem`` is what the client is told."""
    issue = {"type": "json_invalid", "loc": ("body",), "msg": problem, "input": {}, "ctx": {"problem": problem}}
    return RequestValidationError([issue])


class JsonBodyRoute(APIRoute):
    """An endpoint ``(body, engine) -> Response``: the body read and validated here, the engine the app's."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        if self.body_field is None:
            return super().get_route_handler()
        names = list(inspect.signature(self.endpoint).parameters)
        if len(names) != 2 or names[1] != "engine":
            raise TypeError(f"{self.path}: a JsonBodyRoute endpoint takes (body, engine), not {names}")
        adapter: TypeAdapter[Any] = TypeAdapter(self.body_field.field_info.annotation)
        endpoint: Callable[[Any, MemoryEngine], Awaitable[Response]] = self.endpoint

        async def handler(request: Request) -> Response:
            value = read_body(await request.body(), request.headers.get("content-type"))
            return await endpoint(validated(adapter, value), await engine_of(request))

        return handler
