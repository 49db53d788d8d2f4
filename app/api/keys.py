"""``/v1/keys``: make, list and revoke API keys (an admin key that reaches every namespace only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from app.api.routes import answer, documented
from app.contract.access import Access
from app.contract.errors import Forbidden
from app.contract.keys import KeyInfo, KeyList, KeyRequest, NewKey, RevokeRequest
from app.engine.keys import Keys


async def key_manager(request: Request) -> Keys:
    """The app's keys, once the caller is known to be an admin of every namespace."""
    access: Access | None = request.scope.get("state", {}).get("access")
    if access is None or access.is_scoped or not access.allows("admin"):
        raise Forbidden("managing keys needs an admin key that reaches every namespace")
    return request.app.state.keys  # type: ignore[no-any-return]


Manager = Annotated[Keys, Depends(key_manager)]
ERRORS = documented(400, 401, 403, 422, 500, 503)

router = APIRouter(prefix="/v1/keys", tags=["keys"])


@router.post("", response_model=NewKey, status_code=201, operation_id="create_key", responses=ERRORS)
async def create_key(body: KeyRequest, keys: Manager) -> Response:
    """Make a key bound to a reach and a role; its secret is in this answer and nowhere else, ever."""
    return answer(await keys.create(body), status_code=201)


@router.get("", response_model=KeyList, operation_id="list_keys", responses=ERRORS)
async def list_keys(keys: Manager) -> Response:
    """Every key ever made, revoked ones included, without secrets."""
    return answer(KeyList(keys=await keys.store.list()))


@router.post("/revoke", response_model=KeyInfo, operation_id="revoke_key", responses={**ERRORS, **documented(404)})
async def revoke_key(body: RevokeRequest, keys: Manager) -> Response:
    """Revoke a key: refused everywhere within a second; revoking twice changes nothing."""
    return answer(await keys.revoke(body.id))
