"""The read families pass against the PostgreSQL engine served by the HTTP app."""

from __future__ import annotations

from app.conformance.runner import run_checks, selected
from tests.conformance.support import failed
from tests.support.engines import ClientFactory

FAMILIES = ["filters", "cursors", "ranking", "recall", "explore"]


async def test_the_postgres_engine_passes(make_client: ClientFactory) -> None:
    async with make_client() as client:
        assert failed(await run_checks(client, selected(FAMILIES))) == []
