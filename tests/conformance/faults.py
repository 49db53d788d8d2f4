"""A reference engine with one fault injected, and the check of a family that must catch it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.contract.meta import Filter, Meta
from app.embeddings.protocol import Embedder
from app.engine.reference import ReferenceEngine, _Record
from tests.conformance.support import Wrapper, failed, failing_names, outcomes_against


@dataclass(frozen=True)
class Fault:
    """A broken service and the check that must catch it: the engine ``build`` makes from an
    embedder (a faithful one unless the fault is in it), served behind ``wrap`` when the fault is
    in the HTTP layer, with auth on and ``api_key`` given when the fault needs a key."""

    name: str
    caught_by: str
    build: Callable[[Embedder], ReferenceEngine] = ReferenceEngine
    wrap: Wrapper | None = None
    api_key: str | None = None

    def __str__(self) -> str:
        return self.name


async def assert_caught(fault: Fault, embedder: Embedder, family: str) -> None:
    """The fault's check is among the family's failures against the broken service."""
    outcomes = await outcomes_against(fault.build(embedder), [family], api_key=fault.api_key, wrap=fault.wrap)
    assert fault.caught_by in failing_names(outcomes), failed(outcomes)


Admits = Callable[[Filter, str, Meta], bool]


class Admitting(ReferenceEngine):
    """The reference engine deciding what a filter admits by ``admits`` instead of the contract's rule;
    every read (list, fetch, recall, explore, forget by filter) goes through it."""

    def __init__(self, embedder: Embedder, admits: Admits) -> None:
        super().__init__(embedder)
        self._admits = admits

    def _admitted(self, request_filter: Filter) -> list[tuple[str, _Record]]:
        rows = [(i, r) for i, r in self._records.items() if self._admits(request_filter, r.item.type, r.item.meta)]
        return sorted(rows, key=lambda row: row[1].seq)


def admitting(admits: Admits) -> Callable[[Embedder], ReferenceEngine]:
    return lambda embedder: Admitting(embedder, admits)
