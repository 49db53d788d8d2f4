"""The MemoryEngine protocol: what every engine offers (contract §5)."""

from __future__ import annotations

from typing import Protocol

from app.contract.items import StoredItem
from app.contract.namespaces import Reach
from app.contract.requests import (
    EngineDescriptor,
    ExplorePage,
    ExploreRequest,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    GetRequest,
    Health,
    Hit,
    ListPage,
    ListRequest,
    RecallAnswer,
    RecallRequest,
    RestoreReport,
    StoreReceipt,
)
from app.contract.transfer import ExportPage, ExportRequest, GivenVector
from app.engine.keys import KeyStore
from app.engine.retention import RetentionStore


class MemoryEngine(Protocol):
    """Every method validates its request first, so every engine refuses the same call the same way."""

    keys: KeyStore
    """The API keys held beside the items."""

    retention: RetentionStore
    """The retention policies and legal holds the items are kept under."""

    @property
    def descriptor(self) -> EngineDescriptor: ...

    async def health(self) -> Health:
        """Whether the engine can serve now; never raises."""
        ...

    async def store(self, item: StoredItem) -> StoreReceipt: ...

    async def store_many(self, items: list[StoredItem]) -> list[StoreReceipt]:
        """All or nothing; receipts in item order; a repeat in the batch replays its first copy."""
        ...

    async def fetch(self, request: FetchRequest) -> FetchPage: ...

    async def recall(self, request: RecallRequest) -> RecallAnswer: ...

    async def list(self, request: ListRequest) -> ListPage: ...

    async def get(self, request: GetRequest) -> list[Hit]: ...

    async def forget(self, target: ForgetTarget) -> ForgetReport: ...

    async def forget_within(
        self, ids: list[str], reach: Reach, *, dry_run: bool = False, purge: bool = False
    ) -> ForgetReport: ...

    async def restore(self, receipt: str, *, within: Reach | None = None) -> RestoreReport:
        """What a forget kept under ``receipt``, back; ``not_found`` once the undo window is over."""
        ...

    async def explore(self, request: ExploreRequest) -> ExplorePage: ...

    async def export_page(self, request: ExportRequest, *, after: int, ceiling: int | None, count: int) -> ExportPage:
        """Up to ``count`` items the filter admits after ``seq`` ``after``, in the order stored, up to
        ``ceiling`` (None on the first page: the last item stored now)."""
        ...

    async def import_items(self, items: list[StoredItem], vectors: list[GivenVector | None]) -> list[StoreReceipt]:
        """``store_many``, keeping each given vector of this engine's embedder instead of embedding."""
        ...

    async def close(self) -> None: ...
