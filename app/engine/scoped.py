"""An engine as one caller may use it: every call narrowed to its key's reach and role.

The one place access is enforced: the HTTP routes (and the MCP tools) call the engine only
through this wrapper, so no route can forget to narrow. Reads pass the key's reach beside the
request's (``ScopedFilter``); what lies outside is never returned, counted, cited or forgotten,
and an id outside it answers as an unknown id does (no existence oracle).
"""

from __future__ import annotations

from app.contract.access import Access
from app.contract.items import StoredItem
from app.contract.limits import MAX_GET_IDS
from app.contract.namespaces import Namespace, Reach
from app.contract.requests import (
    EngineDescriptor,
    ExplorePage,
    ExploreRequest,
    FetchPage,
    FetchRequest,
    ForgetByIds,
    ForgetReport,
    ForgetTarget,
    ForgetWithinRequest,
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
from app.engine.consistency import reads_see_everything
from app.engine.protocol import MemoryEngine


class ScopedEngine:
    """``engine`` as ``access`` allows; an unscoped admin passes straight through."""

    def __init__(self, engine: MemoryEngine, access: Access) -> None:
        self._engine = engine
        self._access = access

    @property
    def descriptor(self) -> EngineDescriptor:
        return self._engine.descriptor

    async def health(self) -> Health:
        return await self._engine.health()

    async def close(self) -> None:
        """The shared engine outlives every caller: closing a caller's view closes nothing."""

    # --- writes ----------------------------------------------------------------------------------

    async def store(self, item: StoredItem) -> StoreReceipt:
        self._access.require("write", "store")
        self._access.check_writable(item.meta.namespace_node)
        return await self._engine.store(item)

    async def store_many(self, items: list[StoredItem]) -> list[StoreReceipt]:
        self._access.require("write", "store")
        for item in items:
            self._access.check_writable(item.meta.namespace_node)
        return await self._engine.store_many(items)

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        self._access.require("admin", "forget")
        writable = self._access.writable
        if writable is None:
            return await self._engine.forget(target)
        if isinstance(target, ForgetByIds):
            # Ids are not namespace-scoped for the contract; for a scoped key they are its own only.
            target.checked()
            return await self._engine.forget_within(target.ids, writable, dry_run=target.dry_run, purge=target.purge)
        checked = target.checked()  # an empty filter is refused as the request's, before narrowing
        narrowed = self._access.narrowed(checked.filter, within=writable)
        return await self._engine.forget(checked.model_copy(update={"filter": narrowed}))

    async def forget_within(
        self, ids: list[str], reach: Reach, *, dry_run: bool = False, purge: bool = False
    ) -> ForgetReport:
        self._access.require("admin", "forget")
        writable = self._access.writable
        if writable is None:
            return await self._engine.forget_within(ids, reach, dry_run=dry_run, purge=purge)
        request = ForgetWithinRequest(ids=ids, reach=reach).checked()
        self._access.check_named(request.reach)
        # An id's namespace is part of the id: the ids the request's reach admits and the key may
        # write are found first, then forgotten within the request's reach.
        # Read where every write is (the primary, not a replica behind it): an item stored a moment
        # ago must not be left out of the forget.
        kept = []
        with reads_see_everything():
            for start in range(0, len(request.ids), MAX_GET_IDS):
                chunk = GetRequest(ids=request.ids[start : start + MAX_GET_IDS], reach=request.reach)
                kept += [hit.id for hit in await self._engine.get(chunk) if writable.admits(namespace_of(hit))]
        if not kept:
            return ForgetReport(forgotten=0, would_forget=0, first_ids=[]) if dry_run else ForgetReport(forgotten=0)
        return await self._engine.forget_within(kept, request.reach, dry_run=dry_run, purge=purge)

    async def restore(self, receipt: str, *, within: Reach | None = None) -> RestoreReport:
        self._access.require("admin", "restore")
        return await self._engine.restore(receipt, within=self._access.writable)

    # --- reads -----------------------------------------------------------------------------------

    async def fetch(self, request: FetchRequest) -> FetchPage:
        return await self._engine.fetch(request.model_copy(update={"filter": self._access.narrowed(request.filter)}))

    async def recall(self, request: RecallRequest) -> RecallAnswer:
        return await self._engine.recall(request.model_copy(update={"filter": self._access.narrowed(request.filter)}))

    async def list(self, request: ListRequest) -> ListPage:
        return await self._engine.list(request.model_copy(update={"filter": self._access.narrowed(request.filter)}))

    async def explore(self, request: ExploreRequest) -> ExplorePage:
        return await self._engine.explore(request.model_copy(update={"filter": self._access.narrowed(request.filter)}))

    async def export_page(self, request: ExportRequest, *, after: int, ceiling: int | None, count: int) -> ExportPage:
        narrowed = request.model_copy(update={"filter": self._access.narrowed(request.filter)})
        return await self._engine.export_page(narrowed, after=after, ceiling=ceiling, count=count)

    async def import_items(self, items: list[StoredItem], vectors: list[GivenVector | None]) -> list[StoreReceipt]:
        self._access.require("write", "import")
        for item in items:
            self._access.check_writable(item.meta.namespace_node)
        return await self._engine.import_items(items, vectors)

    async def get(self, request: GetRequest) -> list[Hit]:
        self._access.check_named(request.reach)
        return [hit for hit in await self._engine.get(request) if self._access.sees(namespace_of(hit))]


def as_allowed(engine: MemoryEngine, access: Access | None) -> MemoryEngine:
    """``engine`` as ``access`` may use it: the engine itself for an unscoped admin (or a route the
    perimeter leaves open), else wrapped."""
    if access is None or (not access.is_scoped and access.allows("admin")):
        return engine
    return ScopedEngine(engine, access)  # type: ignore[return-value]


def namespace_of(hit: Hit) -> Namespace:
    return Namespace.parse(hit.meta.namespace)
