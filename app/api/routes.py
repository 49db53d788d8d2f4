"""The routes of contract §5: validate the shape, call the engine, shape the answer."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from app.api import examples
from app.api.endpoint import JsonBodyRoute, engine_of
from app.api.envelope import ErrorCatalogue, ErrorEnvelope
from app.contract.errors import catalogue
from app.contract.items import StoreItem
from app.contract.requests import (
    EngineDescriptor,
    ExplorePage,
    ExploreRequest,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetRequest,
    ForgetWithinRequest,
    GetRequest,
    GetResult,
    Health,
    ListPage,
    ListRequest,
    RecallAnswer,
    RecallRequest,
    RestoreReport,
    RestoreRequest,
    StoreManyRequest,
    StoreManyResult,
    StoreReceipt,
)
from app.contract.wire import wire_json
from app.engine.protocol import MemoryEngine
from app.telemetry.metrics import FETCH_DURATION

_ERROR_TEXT = {
    400: "The request fits the schema but the contract refuses it (`invalid_request`).",
    401: "The API key is missing or wrong (`unauthorized`).",
    403: "The key may not do this, or not in this namespace (`forbidden`).",
    404: "The addressed key or forget receipt does not exist (`not_found`).",
    413: "The body is over the configured limit (`payload_too_large`).",
    422: "The body does not fit the schema (`invalid_request`); `details` names the fields.",
    500: "The engine failed (`engine`) or the service is misconfigured (`config`).",
    501: "The engine does not offer this fetch mode (`unsupported`).",
    503: "The database is unreachable or timed out (`unavailable`); retry after `Retry-After` seconds.",
}


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error responses a route can give, each with the envelope schema."""
    return {s: {"model": ErrorEnvelope, "description": _ERROR_TEXT[s]} for s in statuses}


READ_ERRORS = documented(400, 401, 413, 422, 500, 503)


def answer(model: BaseModel, status_code: int = 200) -> Response:
    """The model as JSON with unset fields omitted, serialised once.

    Returning a Response skips FastAPI's dump-validate-serialise of the response
    model: the benchmark log (10k, 2026-12-01) measured 1.2 ms per 100-item page there.
    The route's ``response_model`` still documents the shape.
    """
    return Response(wire_json(model), status_code=status_code, media_type="application/json")


Engine = Annotated[MemoryEngine, Depends(engine_of)]

# Every POST route is (body, engine): JsonBodyRoute serves it without FastAPI's dependency machinery.
router = APIRouter(prefix="/v1", route_class=JsonBodyRoute)


@router.get("/engine", response_model=EngineDescriptor, operation_id="engine", responses=documented(401, 500))
async def describe_engine(engine: Engine) -> Response:
    """What the engine is and which fetch modes it serves."""
    return answer(engine.descriptor)


@router.get(
    "/health",
    operation_id="health",
    responses={503: {"model": Health, "description": "The service cannot serve (state `down`)."}},
    openapi_extra={"security": []},
)
async def health(engine: Engine) -> JSONResponse:
    """`ok` or `degraded` with 200, `down` with 503; never an error envelope."""
    state = await engine.health()
    return JSONResponse(state.model_dump(exclude_none=True), status_code=_health_status(state))


@router.head("/health", include_in_schema=False)
async def health_probe(engine: Engine) -> Response:
    """The status of ``GET /v1/health`` without its body, for probes that ask with HEAD."""
    return Response(status_code=_health_status(await engine.health()))


def _health_status(state: Health) -> int:
    return 200 if state.is_serving else 503


# Liveness, beside health's readiness (docs/operations.md#liveness-and-readiness): for orchestrators, not
# for generated clients, so it is not in the OpenAPI document.
LIVE_PATH = "/health/live"


@router.get(LIVE_PATH, include_in_schema=False)
async def liveness() -> JSONResponse:
    """200 while the process answers requests, whatever the database's state: restarting the process
    would not bring a database back (``GET /v1/health``, the readiness, says whether it can serve)."""
    return JSONResponse({"live": True})


@router.head(LIVE_PATH, include_in_schema=False)
async def liveness_probe() -> Response:
    return Response(status_code=200)


@router.get("/errors", response_model=ErrorCatalogue, operation_id="errors", responses=documented(401))
async def errors() -> Response:
    """Every error code with its HTTP status, whether it is retryable, and one sentence."""
    return answer(ErrorCatalogue.model_validate({"errors": [entry.__dict__ for entry in catalogue()]}))


@router.post(
    "/store",
    response_model=StoreReceipt,
    operation_id="store",
    status_code=201,
    responses={200: {"model": StoreReceipt, "description": "The item was already held: a replay."}, **READ_ERRORS},
)
async def store(item: Annotated[StoreItem, Body(openapi_examples=examples.STORE)], engine: Engine) -> Response:
    """Store one item; an identical item answers its existing id with `replayed: true` (200)."""
    receipt = await engine.store(item.root)
    return answer(receipt, status_code=200 if receipt.replayed else 201)


@router.post("/store_many", response_model=StoreManyResult, operation_id="store_many", responses=READ_ERRORS)
async def store_many(
    body: Annotated[StoreManyRequest, Body(openapi_examples=examples.STORE_MANY)], engine: Engine
) -> Response:
    """Store 1-100 items in one transaction; receipts in item order."""
    return answer(StoreManyResult(receipts=await engine.store_many(list(body.items))))


@router.post("/fetch", response_model=FetchPage, operation_id="fetch", responses={**READ_ERRORS, **documented(501)})
async def fetch(body: Annotated[FetchRequest, Body(openapi_examples=examples.FETCH)], engine: Engine) -> Response:
    """Ranked retrieval by keyword, vector or hybrid; page on with `next_cursor`."""
    with FETCH_DURATION.labels(body.mode).time():
        page = await engine.fetch(body)
    return answer(page)


@router.post("/recall", response_model=RecallAnswer, operation_id="recall", responses=READ_ERRORS)
async def recall(body: Annotated[RecallRequest, Body(openapi_examples=examples.RECALL)], engine: Engine) -> Response:
    """An answer quoted from the best memories, with citations."""
    return answer(await engine.recall(body))


@router.post("/list", response_model=ListPage, operation_id="list", responses=READ_ERRORS)
async def list_items(body: Annotated[ListRequest, Body(openapi_examples=examples.LIST)], engine: Engine) -> Response:
    """Query-free paging in insertion order, stable under concurrent writes."""
    return answer(await engine.list(body))


@router.post("/get", response_model=GetResult, operation_id="get", responses=READ_ERRORS)
async def get(body: Annotated[GetRequest, Body(openapi_examples=examples.GET)], engine: Engine) -> Response:
    """Items by id, in the order asked; unknown ids and ids outside `reach` are left out."""
    return answer(GetResult(hits=await engine.get(body)))


@router.post("/forget", response_model=ForgetReport, operation_id="forget", responses=READ_ERRORS)
async def forget(body: Annotated[ForgetRequest, Body(openapi_examples=examples.FORGET)], engine: Engine) -> Response:
    """Remove by ids or by a non-empty filter; `forgotten` counts what was really removed."""
    return answer(await engine.forget(body.root))


@router.post("/forget_within", response_model=ForgetReport, operation_id="forget_within", responses=READ_ERRORS)
async def forget_within(
    body: Annotated[ForgetWithinRequest, Body(openapi_examples=examples.FORGET_WITHIN)], engine: Engine
) -> Response:
    """Remove the ids that lie within the reach, and nothing else."""
    return answer(await engine.forget_within(body.ids, body.reach, dry_run=body.dry_run, purge=body.purge))


@router.post(
    "/restore", response_model=RestoreReport, operation_id="restore", responses={**READ_ERRORS, **documented(404)}
)
async def restore(body: Annotated[RestoreRequest, Body()], engine: Engine) -> Response:
    """Bring back what a forget removed, by its receipt, within the undo window (ENGRAM_FORGET_UNDO_WINDOW_S)."""
    return answer(await engine.restore(body.receipt))


@router.post("/explore", response_model=ExplorePage, operation_id="explore", responses=READ_ERRORS)
async def explore(body: Annotated[ExploreRequest, Body(openapi_examples=examples.EXPLORE)], engine: Engine) -> Response:
    """Counts per facet value over what the filter admits; exact."""
    return answer(await engine.explore(body))
