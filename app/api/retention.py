"""``/v1/retention``: time-to-live policies and legal holds per namespace (docs/lifecycle.md#retention).

An admin key manages retention within its own reach, as it manages keys: it sets, clears, holds
and releases only where it writes the whole subtree a policy there rules, and lists only those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, Request, Response

from app.api.routes import answer, documented
from app.contract.access import Access
from app.contract.errors import Forbidden, quoted
from app.contract.namespaces import Namespace
from app.contract.retention import RetentionList, RetentionReport, RetentionRequest, RetentionTarget
from app.engine.retention import RetentionStore

Change = TypeVar("Change", RetentionRequest, RetentionTarget)


@dataclass(frozen=True)
class RetentionManager:
    store: RetentionStore
    access: Access

    def checked(self, body: Change) -> Change:
        """``body`` checked; ``forbidden`` unless the caller governs its namespace (a bad namespace
        is ``invalid_request``)."""
        request = body.checked()
        node = Namespace.parse(request.namespace)
        if not self.access.governs(node):
            raise Forbidden(f"namespace {quoted(str(node))} is outside this key's reach")
        return request


async def retention_manager(request: Request) -> RetentionManager:
    """The app's retention policies as the caller, an admin, may manage them."""
    access: Access | None = request.scope.get("state", {}).get("access")
    if access is None or not access.allows("admin"):
        raise Forbidden("managing retention needs an admin key")
    return RetentionManager(request.app.state.engine.retention, access)


Manager = Annotated[RetentionManager, Depends(retention_manager)]
ERRORS = documented(400, 401, 403, 422, 500, 503)
CHANGE_ERRORS = {**ERRORS, **documented(404)}

router = APIRouter(prefix="/v1/retention", tags=["retention"])


@router.get("", response_model=RetentionList, operation_id="list_retention", responses=ERRORS)
async def list_retention(retention: Manager) -> Response:
    """Every namespace the caller manages with a ttl or a legal hold, the root first."""
    held = await retention.store.list()
    return answer(RetentionList(policies=[p for p in held if retention.access.governs(Namespace.parse(p.namespace))]))


@router.post("", response_model=RetentionReport, operation_id="set_retention", responses=ERRORS)
async def set_retention(body: RetentionRequest, retention: Manager) -> Response:
    """Set the time to live (an ISO-8601 duration such as `P30D`) of the items at a namespace and
    below, unless a deeper policy sets its own; `expired` counts the items it expired at once."""
    return answer(await retention.store.set(retention.checked(body)))


@router.post("/clear", response_model=RetentionReport, operation_id="clear_retention", responses=CHANGE_ERRORS)
async def clear_retention(body: RetentionTarget, retention: Manager) -> Response:
    """Remove the time to live set at a namespace: its items follow the policy above it, if any."""
    return answer(await retention.store.clear(retention.checked(body)))


@router.post("/hold", response_model=RetentionReport, operation_id="hold_retention", responses=ERRORS)
async def hold_retention(body: RetentionTarget, retention: Manager) -> Response:
    """Place a legal hold at a namespace: no item at it or below expires while the hold stands."""
    return answer(await retention.store.hold(retention.checked(body)))


@router.post("/release", response_model=RetentionReport, operation_id="release_retention", responses=CHANGE_ERRORS)
async def release_retention(body: RetentionTarget, retention: Manager) -> Response:
    """Lift the legal hold at a namespace: its items expire again as their policies say."""
    return answer(await retention.store.release(retention.checked(body)))
