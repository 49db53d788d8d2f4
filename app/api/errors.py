"""Exception handlers: every failure leaves as the envelope of contract §7."""

from __future__ import annotations

import json
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
    quoted,
    shortened,
)


def request_id_of(request: Request) -> str:
    return request.scope.get("state", {}).get("request_id") or new_request_id()


_UNKNOWN: Any = object()  # the body a problem was found in, when the error does not carry it
_QUOTED = re.compile(r"('[^']*')")
_SHAPE = frozenset({"missing", "extra_forbidden", "model_type", "dict_type"})
MAX_PROBLEMS = 20
NOT_JSON = "the body is not valid json"


def _walk(location: Sequence[Any], body: Any) -> tuple[str, tuple[str, str] | None, Any]:
    """The field a problem is at, as the client wrote it, the plain union member it was found in,
    and the value the client sent there (``_UNKNOWN`` when it sent none).

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
    return shortened(path) or "body", member, node


def _lowercase(message: str) -> str:
    """Pydantic's words in lowercase; a value it quotes from the request keeps its case (contract §7)."""
    return "".join(piece if _QUOTED.fullmatch(piece) else piece.lower() for piece in _QUOTED.split(message))


def _unreadable(issue: Any, body: Any) -> str:
    """Why a body is not JSON: not UTF-8, nested too deep, or where the parser stopped."""
    context = issue.get("ctx", {})
    if "problem" in context:
        return str(context["problem"])
    location = issue.get("loc", ())
    if not isinstance(body, str) or len(location) < 2 or not isinstance(location[1], int):
        return NOT_JSON
    position = location[1]
    line = body.count("\n", 0, position) + 1
    column = position - body.rfind("\n", 0, position)
    reason = str(context.get("error", "")).lower()
    return f"{NOT_JSON} ({reason} at line {line} column {column})" if reason else NOT_JSON


def _unknown_tag(issue: Any, sent: Any) -> str:
    """The tag as the client wrote it: quoted when a string, else as JSON (``false``, not ``'False'``)."""
    context, name = issue.get("ctx", {}), _tag(issue)
    value = sent.get(name) if isinstance(sent, dict) else context.get("tag")
    shown = quoted(value) if isinstance(value, str) else shortened(json.dumps(value), 64)
    expected = context.get("expected_tags", "")
    return f"input tag {shown} found using '{name}' does not match any of the expected tags: {expected}"


def _tag(issue: Any) -> str:
    """The key a tagged union's problem is about (``type``)."""
    return str(issue.get("ctx", {}).get("discriminator", "")).strip("'")


def _required(sent: Any) -> str:
    """A required field sent as ``null`` is missing (contract, introduction): the answer says why."""
    return "field required (null means unset)" if sent is None else "field required"


def _problems(error: RequestValidationError) -> list[dict[str, str]]:
    body = getattr(error, "body", None)
    found = []
    for issue in error.errors():
        kind = issue.get("type", "")
        field, member, sent = _walk(issue.get("loc", ()), _UNKNOWN if body is None else body)
        if kind == "json_invalid":
            field, problem = "body", _unreadable(issue, body)
        elif kind == "union_tag_not_found":  # what the client sent is the object; its tag is the field
            sent = sent.get(_tag(issue), _UNKNOWN) if isinstance(sent, dict) else _UNKNOWN
            problem = _required(sent)
        elif kind == "missing":
            problem = _required(sent)
        elif kind == "extra_forbidden":
            problem = "unknown field"
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            problem = "input should be an object"
        elif kind == "union_tag_invalid":
            problem = _unknown_tag(issue, sent)
        elif kind == "value_error":  # a validator's own words, without pydantic's "Value error, "
            problem = _lowercase(shortened(str(issue.get("ctx", {}).get("error", issue.get("msg", "invalid value")))))
        else:
            problem = _lowercase(shortened(str(issue.get("msg", "invalid value"))))
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            field = f"{field}.{_tag(issue)}" if field != "body" else _tag(issue)
        # A member's field that the client sent as null was meant: its absence is no misfit.
        misfit = kind in _SHAPE and not (kind == "missing" and sent is None)
        found.append((member, misfit, {"field": field, "problem": problem.rstrip(".")}))
    # Of a plain union's members, keep the problems of those the body's shape fits best: a text body
    # given a number is that problem, not also a uri body missing its uri.
    misfits: dict[tuple[str, str], int] = {}
    for member, misfit, _ in found:
        if member is not None:
            misfits[member] = misfits.get(member, 0) + misfit
    best: dict[str, int] = {}
    for (where, _), count in misfits.items():
        best[where] = min(count, best.get(where, count))
    kept = []
    for member, _, problem in found:
        if (member is None or misfits[member] == best[member[0]]) and problem not in kept:
            kept.append(problem)
    # A body can hold millions of wrong values: the answer names the first few, as a compiler would.
    return kept[:MAX_PROBLEMS]


def schema_error(error: RequestValidationError) -> InvalidRequest:
    """A body that does not fit the schema, as the contract names it: every field and its problem."""
    problems = _problems(error)
    named = ", ".join(sorted({p["field"] for p in problems}))
    unreadable = any(issue.get("type") == "json_invalid" for issue in error.errors())
    summary = problems[0]["problem"] if unreadable else f"the body does not fit the schema ({named})"
    return InvalidRequest(summary, details=problems)


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
        # A body FastAPI's own parser gave up on (the POST routes read theirs in endpoint.py, which
        # says why): the 422 of every other unreadable body (contract §7).
        problem = "the body could not be read as json"
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
