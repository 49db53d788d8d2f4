"""Run the conformance kit against an app in process: the reference engine, with or without a fault."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from app.conformance.runner import Outcome, run_checks, selected
from app.engine.protocol import MemoryEngine
from app.main import create_app
from app.settings import Settings


async def outcomes_against(engine: MemoryEngine, families: Sequence[str] = ()) -> list[Outcome]:
    """The kit's outcomes against the HTTP app serving ``engine`` (over ASGI: real HTTP semantics)."""

    async def given(_: Settings) -> MemoryEngine:
        return engine

    app = create_app(Settings(), engine_factory=given)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.test") as client:
            return await run_checks(client, selected(families))


def failed(outcomes: Sequence[Outcome]) -> list[str]:
    return [f"{o.family}/{o.name}: {o.reason}" for o in outcomes if not o.passed]
