"""Exception handlers: every failure leaves as the envelope of contract §7."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.api.envelope import error_response, new_request_id
from app.contract.errors import EngramError, InvalidRequest, MethodNotAllowed, NotFound, PayloadTooLarge


def request_id_of(request: Request) -> str:
    return request.scope.get("state", {}).get("request_id") or new_request_id()


def _field(location: tuple[Any, ...] | list[Any]) -> str:
    path = ""
    for part in location:
        if part == "body":
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "body"


def _problems(error: RequestValidationError) -> list[dict[str, str]]:
    problems = []
    for issue in error.errors():
        kind = issue.get("type", "")
        if kind == "json_invalid":
            problem = "the body is not valid json"
        elif kind == "missing":
            problem = "field required"
        elif kind == "extra_forbidden":
            problem = "unknown field"
        else:
            problem = str(issue.get("msg", "invalid value")).lower()
        # Pydantic puts union member names in the location; they mean nothing to a client.
        location = [p for p in issue.get("loc", ()) if not (isinstance(p, str) and p[:1].isupper())]
        problems.append({"field": _field(location), "problem": problem.rstrip(".")})
    return problems


async def on_validation_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestValidationError)
    problems = _problems(error)
    named = ", ".join(sorted({p["field"] for p in problems}))
    summary = f"the body does not fit the schema ({named})"
    return error_response(InvalidRequest(summary, details=problems), request_id_of(request), status=422)


async def on_http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    contract_error: EngramError
    status: int | None = None
    if error.status_code == 404:
        contract_error = NotFound(f"no route {request.method} {request.url.path}")
    elif error.status_code == 405:
        contract_error = MethodNotAllowed(f"{request.url.path} does not accept {request.method}")
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
