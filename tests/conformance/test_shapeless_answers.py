"""A service whose answers lack the contract's keys fails every read check, and the run still ends."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from app.conformance.runner import run_checks, selected

FAMILIES = ["filters", "cursors", "ranking", "recall", "explore"]


def shapeless() -> FastAPI:
    """Answers every call 200 with a JSON object holding none of the contract's keys."""
    app = FastAPI()

    @app.api_route("/{path:path}", methods=["GET", "POST"])
    async def anything(path: str) -> JSONResponse:
        return JSONResponse({"unexpected": path})

    return app


async def test_every_check_fails_and_none_stops_the_run() -> None:
    transport = httpx.ASGITransport(app=shapeless())
    async with httpx.AsyncClient(transport=transport, base_url="http://shapeless.test") as client:
        outcomes = await run_checks(client, selected(FAMILIES))
    assert len(outcomes) == len(selected(FAMILIES))
    assert [o.name for o in outcomes if o.passed] == []
