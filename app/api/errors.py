"""Exception handlers: every failure leaves as the envelope of contract §7."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.api.envelope import error_response, new_request_id
from app.contract.errors import (
    EngramError,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    shortened,
)


def request_id_of(request: Request) -> str:
    return request.scope.get("state", {}).get("request_id") or new_request_id()


_UNKNOWN: Any = object()  # the body a problem was found in, when the error does not carry it
_QUOTED = re.compile(r"('[^']*')")
_SHAPE = frozenset({"missing", "extra_forbidden", "model_type", "dict_type"})
MAX_PROBLEMS = 20


def _walk(location: Sequence[Any], body: Any) -> tuple[str, tuple[str, str] | None]:
    """The field a problem is at, as the client wrote it, and the plain union member it was found in.

    Pydantic's location also names the union member it tried (an item's ``type``, a model's class
    name), which the client never wrote: a name that is not a key of the object at hand is one,
    unless it is the last (a missing field). Without the body, class names (capitalised) are dropped.
    """
    parts = list(location[1:]) if location[:1] in (("body",), ["body"]) else list(location)
    path, node, member = "", body, None
    for index, part in enumerate(parts):
        if isinstance(part, int):
            path += f"[{part}]"
            node = node[part] if isinstance(node, list) and 0 <= part < len(node) else _UNKNOWN
            continue
        if node is _UNKNOWN:
            if part[:1].isupper():
                continue
        elif isinstance(node, dict) and part in node:
            node = node[part]
        elif index < len(parts) - 1 or not isinstance(node, dict):
            if member is None and part[:1].isupper():
                member = (path, part)
            continue
        else:
            node = _UNKNOWN
        path += f".{part}" if path else str(part)
    return shortened(path) or "body", member


def _lowercase(message: str) -> str:
    """Pydantic's words in lowercase; a value it quotes from the request keeps its case (contract §7)."""
    return "".join(piece if _QUOTED.fullmatch(piece) else piece.lower() for piece in _QUOTED.split(message))


def _problems(error: RequestValidationError) -> list[dict[str, str]]:
    body = getattr(error, "body", None)
    found = []
    for issue in error.errors():
        kind = issue.get("type", "")
        field, member = _walk(issue.get("loc", ()), _UNKNOWN if body is None else body)
        if kind == "json_invalid":
            field, problem = "body", "the body is not valid json"
        elif kind == "missing":
            problem = "field required"
        elif kind == "extra_forbidden":
            problem = "unknown field"
        else:
            problem = _lowercase(shortened(str(issue.get("msg", "invalid value"))))
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            tag = str(issue.get("ctx", {}).get("discriminator", "")).strip("'")
            field = f"{field}.{tag}" if field != "body" else tag
        found.append((member, kind, {"field": field, "problem": problem.rstrip(".")}))
    # Of a plain union's members, keep the problems of those the body's shape fits best: a text body
    # given a number is that problem, not also a uri body missing its uri.
    misfits: dict[tuple[str, str], int] = {}
    for member, kind, _ in found:
        if member is not None:
            misfits[member] = misfits.get(member, 0) + (kind in _SHAPE)
    best: dict[str, int] = {}
    for (where, _), count in misfits.items():
        best[where] = min(count, best.get(where, count))
    kept = [problem for member, _, problem in found if member is None or misfits[member] == best[member[0]]]
    # A body can hold millions of wrong values: the answer names the first few, as a compiler would.
    return kept[:MAX_PROBLEMS]


def schema_error(error: RequestValidationError) -> InvalidRequest:
    """A body that does not fit the schema, as the contract names it: every field and its problem."""
    problems = _problems(error)
    named = ", ".join(sorted({p["field"] for p in problems}))
    return InvalidRequest(f"the body does not fit the schema ({named})", details=problems)


async def on_validation_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    return error_response(schema_error(error), request_id_of(request), status=422)


async def on_http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    contract_error: EngramError
    status: int | None = None
    path = shortened(request.url.path)
    if error.status_code == 404:
        contract_error = NotFound(f"no route {request.method} {path}")
    elif error.status_code == 405:
        contract_error = MethodNotAllowed(f"{path} does not accept {request.method}")
    elif error.status_code == 413:
        contract_error = PayloadTooLarge("the body is over the configured limit")
    else:
        # FastAPI's 400 is a body its parser gave up on (bytes that are not UTF-8, nesting too
        # deep to parse): bad JSON, so the 422 of every other unparsable body (contract §7).
        problem = "the body is not valid json"
        contract_error = InvalidRequest(problem, details=[{"field": "body", "problem": problem}])
        status = 422
    response = error_response(contract_error, request_id_of(request), status=status or contract_error.http_status)
    if error.headers:
        response.headers.update(error.headers)
    return response


async def on_contract_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, EngramError)
    return error_response(error, request_id_of(request))


def install(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(EngramError, on_contract_error)
