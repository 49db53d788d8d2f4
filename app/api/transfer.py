"""``/v1/export`` and ``/v1/import``: a store out as NDJSON, and back in (app/engine/transfer.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request, Response
from fastapi.responses import StreamingResponse

from app.api.endpoint import JsonBodyRoute, engine_of
from app.api.openapi import NDJSON_LINES, REF
from app.api.routes import READ_ERRORS, Engine, answer
from app.contract.errors import InvalidRequest
from app.contract.transfer import NDJSON, ExportRequest, ImportReport
from app.engine.transfer import export_lines, import_lines

router = APIRouter(prefix="/v1", route_class=JsonBodyRoute, tags=["transfer"])

_LINES: dict[str, Any] = {NDJSON: {"schema": {"$ref": REF + NDJSON_LINES}}}


@router.post(
    "/export",
    operation_id="export_items",
    response_class=StreamingResponse,
    responses={200: {"content": _LINES, "description": "One item a line, then the trailer."}, **READ_ERRORS},
)
async def export(body: Annotated[ExportRequest, Body()], engine: Engine) -> Response:
    """Every item the filter admits, one JSON object a line in the order stored, then a trailer
    line with their count and SHA-256: a dump cut short has none."""
    request = body.checked()
    # The first page is read before the answer starts: a refused request is its envelope, not a cut stream.
    lines = export_lines(engine, request)
    first = await anext(lines)

    async def stream() -> AsyncIterator[bytes]:
        yield first
        async for line in lines:
            yield line

    return StreamingResponse(stream(), media_type=NDJSON)


@router.post(
    "/import",
    operation_id="import_items",
    response_model=ImportReport,
    openapi_extra={"requestBody": {"required": True, "content": _LINES}},
    responses=READ_ERRORS,
)
async def import_(request: Request) -> Response:
    """NDJSON lines as ``/v1/export`` writes them: each item stored or replayed, each bad line
    reported with its number; the trailer, when present, is checked."""
    body = await request.body()
    if not body.strip():
        raise InvalidRequest("the body holds no line")
    engine = await engine_of(request)

    async def lines() -> AsyncIterator[bytes]:
        for line in body.splitlines(keepends=True):
            yield line

    return answer(await import_lines(engine, lines()))
