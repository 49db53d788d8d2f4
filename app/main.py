"""create_app(): wiring only."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import Route

from app import __version__
from app.api import errors, keys, metrics, positions, retention, transfer
from app.api.observer import Observer
from app.api.openapi import build_openapi
from app.api.perimeter import Perimeter
from app.api.routes import router
from app.engine.keys import Keys
from app.engine.protocol import MemoryEngine
from app.mcp.http import PATH as MCP_PATH
from app.mcp.http import McpEndpoint
from app.settings import Settings
from app.ui import routes as ui

if TYPE_CHECKING:
    from app.telemetry.tracing import Tracing

EngineFactory = Callable[[Settings], Awaitable[MemoryEngine]]
logger = logging.getLogger("engram")


async def open_engine(settings: Settings) -> MemoryEngine:
    """The PostgreSQL engine on the configured (or the embedded) database."""
    from app.engine.postgres.service import open_postgres_engine

    return await open_postgres_engine(settings)


def create_app(settings: Settings | None = None, engine_factory: EngineFactory = open_engine) -> FastAPI:
    settings = settings or Settings()
    tracing: Tracing | None = None  # started once the middlewares are in place, below

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.engine = await engine_factory(settings)
        app.state.keys = Keys(app.state.engine.keys)
        try:
            yield
        finally:
            await app.state.engine.close()
            if tracing is not None:
                tracing.shutdown()

    app = FastAPI(
        title="Engram",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        # A route spelled with a trailing slash does not exist: a 404 envelope, not a bodiless 307 (contract §7).
        redirect_slashes=False,
    )
    routers = (router, keys.router, retention.router, transfer.router, metrics.router)
    for included in routers:
        app.include_router(included)
    # The MCP tools (docs/mcp.md), behind the same perimeter; the OpenAPI document describes the REST routes only.
    mcp = McpEndpoint(max_body_bytes=settings.max_body_bytes)
    app.router.routes.append(Route(MCP_PATH, endpoint=mcp, include_in_schema=False))
    errors.install(app)
    document: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not document:
            document.update(build_openapi(app))
        return document

    app.openapi = openapi  # type: ignore[method-assign]

    # Served behind the same perimeter as every other route.
    @app.get(ui.OPENAPI_PATH, include_in_schema=False)
    async def openapi_json() -> JSONResponse:
        return JSONResponse(openapi())

    # The explorer and the API docs, self-hosted (docs/explorer.md); the explorer's files are public.
    opened = ui.mount(app)

    if settings.cors_origin_list():
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origin_list(),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "X-Request-ID", positions.HEADER],
            expose_headers=["X-Request-ID", "Retry-After", positions.HEADER],
        )
    # Inside the perimeter: a refused request never reaches it, a bad position is refused with its request id.
    app.add_middleware(positions.ReadAfterWrite)
    app.add_middleware(
        Perimeter,
        api_keys=settings.api_key_list(),
        max_body_bytes=settings.max_body_bytes,
        open_preflight=bool(settings.cors_origin_list()),
        open_routes=opened | ({("GET", metrics.PATH)} if settings.metrics_public else set()),
    )
    # Outermost: counts and logs what the client sees, the perimeter's refusals included (named by
    # the route they were refused at, from every route with its full path).
    routes = [route for route in app.routes if isinstance(route, APIRoute)]
    app.add_middleware(Observer, routes=routes + [route for included in routers for route in included.routes])
    # Traces only when a collector is named: without one the SDK is never imported (docs/operations.md#traces).
    if settings.tracing:
        from app.telemetry.tracing import start_tracing

        tracing = start_tracing(app)
    return app
