"""The runner reports each check's outcome, whatever the check raised, and forgets what it stored."""

from __future__ import annotations

from app.conformance.kit import Check, Failed, Probe
from app.conformance.runner import Outcome, run_checks, surprises
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.reference import ReferenceEngine
from tests.support.engines import app_client

STORED: list[str] = []


async def _stores(probe: Probe) -> None:
    STORED.append(await probe.store(probe.learning("left behind by a check")))


async def _fails(probe: Probe) -> None:
    raise Failed("the reason")


async def _misreads(probe: Probe) -> None:
    """As a check does that reads a key the service left out of its answer."""
    raise KeyError("missing")


async def test_each_outcome_is_reported_and_the_namespace_forgotten(embedder: WordLlamaEmbedder) -> None:
    checks = [Check("f", "stores", _stores), Check("f", "fails", _fails), Check("f", "misreads", _misreads)]
    async with app_client(ReferenceEngine(embedder)) as client:
        outcomes = await run_checks(client, checks)
        left = (await client.post("/v1/get", json={"ids": STORED})).json()["hits"]
    assert [(o.name, o.passed) for o in outcomes] == [("stores", True), ("fails", False), ("misreads", False)]
    assert outcomes[1].reason == "the reason"
    assert "KeyError" in outcomes[2].reason
    assert left == []


def test_known_failures_fail_the_run_once_they_pass() -> None:
    outcomes = [Outcome("f", "a", False, "why", 0.0), Outcome("f", "b", True, "", 0.0)]
    assert surprises(outcomes) == ["f/a failed"]
    assert surprises(outcomes, ["f/a"]) == []
    assert surprises(outcomes, ["f/a", "f/b"]) == ["f/b is a known failure but passed"]
    assert surprises(outcomes, ["f/a", "f/c"]) == ["f/c is a known failure but no such check ran"]
