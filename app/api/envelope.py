"""The error envelope of contract §7 and the responses that carry it."""

from __future__ import annotations

import os
import time
from typing import Any

from pydantic import BaseModel, ConfigDict
from starlette.responses import JSONResponse

from app.contract.errors import EngramError, Unavailable

RETRY_AFTER_SECONDS = 2
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_request_id() -> str:
    """A ULID: 48 bits of milliseconds then 80 random bits, Crockford base32."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def client_request_id(value: str | None) -> str | None:
    """The client's X-Request-ID when it is 1-128 visible ASCII characters (space to ~)."""
    if value and len(value) <= 128 and all(" " <= c <= "~" for c in value):
        return value
    return None


class FieldProblem(BaseModel):
    field: str
    problem: str


class ErrorEnvelope(BaseModel):
    """Every failure answers this; branch on ``code`` (see ``GET /v1/errors``)."""

    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "code": "invalid_request",
                "message": "invalid request: query must not be blank",
                "retryable": False,
                "request_id": "01JD6Z8Q3V0M7S1X2Y3Z4A5B6C",
            }
        }
    )

    code: str
    message: str
    retryable: bool
    request_id: str
    details: list[FieldProblem] | None = None


class CatalogueEntry(BaseModel):
    code: str
    http_status: int
    retryable: bool
    description: str


class ErrorCatalogue(BaseModel):
    errors: list[CatalogueEntry]


def envelope_of(error: EngramError, request_id: str) -> dict[str, Any]:
    """The envelope's JSON, as a REST answer and an MCP tool error both carry it."""
    body: dict[str, Any] = {
        "code": error.code,
        "message": error.message,
        "retryable": error.retryable,
        "request_id": request_id,
    }
    if error.details:
        body["details"] = error.details
    return body


def error_response(error: EngramError, request_id: str, *, status: int | None = None) -> JSONResponse:
    body = envelope_of(error, request_id)
    headers = {"X-Request-ID": request_id}
    if isinstance(error, Unavailable):
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return JSONResponse(body, status_code=status or error.http_status, headers=headers)
