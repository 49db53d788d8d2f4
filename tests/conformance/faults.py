"""A reference engine with one fault injected, and which checks of a family catch it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.contract.meta import Filter, Meta
from app.embeddings.protocol import Embedder
from app.engine.reference import ReferenceEngine, _Record
from tests.conformance.support import outcomes_against


@dataclass(frozen=True)
class Fault:
    """A broken service (built from an embedder) and the check that must catch it."""

    name: str
    build: Callable[[Embedder], ReferenceEngine]
    caught_by: str

    def __str__(self) -> str:
        return self.name


async def failing_checks(engine: ReferenceEngine, family: str) -> list[str]:
    """The names of the family's checks that fail against ``engine``."""
    return [o.name for o in await outcomes_against(engine, [family]) if not o.passed]


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
