"""The commands beside the service (app/cli.py)."""

from __future__ import annotations

from app.cli import _engine
from app.settings import Settings


async def test_a_command_ranks_nothing_so_it_loads_no_late_interaction_model(database_url: str) -> None:
    settings = Settings(database_url=database_url, embedder="wordllama", embedding_dim=256, late_interaction=True)
    assert settings.late_interaction_on
    async with _engine(settings) as engine:
        assert engine._late is None and engine._tokens is None  # the service's writer makes what lacks them
