"""Run the conformance kit against an app in process: the reference engine, with or without a fault."""

from __future__ import annotations

from collections.abc import Sequence

from app.conformance.runner import Outcome, run_checks, selected
from app.engine.protocol import MemoryEngine
from app.settings import Settings
from tests.support.engines import Wrapper, app_client

# Checks the service is known to fail (``family/name``), while a fix is on its way: tests/conformance/
# live.sh (in .ci/run) passes them to ``engram conformance --known-failures``, which fails once one
# passes, so the list is emptied as soon as it can be. Empty: the service passes every check.
PENDING: tuple[str, ...] = ()


async def outcomes_against(
    engine: MemoryEngine,
    families: Sequence[str] = (),
    *,
    api_key: str | None = None,
    wrap: Wrapper | None = None,
    names: Sequence[str] = (),
) -> list[Outcome]:
    """The kit's outcomes against the HTTP app serving ``engine`` (over ASGI: real HTTP semantics).

    ``api_key`` turns auth on and gives the run that key; ``wrap`` puts a middleware around the app
    (a fault in the HTTP layer); ``names`` keeps only those checks.
    """
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    checks = [c for c in selected(families) if not names or c.name in names]
    async with app_client(engine, Settings(api_keys=api_key), wrap=wrap, headers=headers) as client:
        return await run_checks(client, checks)


def failed(outcomes: Sequence[Outcome]) -> list[str]:
    return [f"{o.family}/{o.name}: {o.reason}" for o in outcomes if not o.passed]


def failing_names(outcomes: Sequence[Outcome]) -> set[str]:
    return {o.name for o in outcomes if not o.passed}
