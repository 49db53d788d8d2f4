"""``/v1/keys``: make, list and revoke API keys.

An admin key manages the keys within its own reach (one that reaches every namespace, all of
them): it makes keys that hold no more than it does, lists those, and revokes those; any other
key is to it as a key that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from app.api.routes import answer, documented
from app.contract.access import Access
from app.contract.errors import Forbidden, NotFound, quoted
from app.contract.keys import KeyInfo, KeyList, KeyRequest, NewKey, RevokeRequest
from app.engine.keys import Keys


@dataclass(frozen=True)
class KeyManager:
    keys: Keys
    access: Access

    async def managed(self) -> list[KeyInfo]:
        return [key for key in await self.keys.store.list() if self.access.manages(key.reach, key.role)]


async def key_manager(request: Request) -> KeyManager:
    """The app's keys as the caller, an admin, may manage them."""
    access: Access | None = request.scope.get("state", {}).get("access")
    if access is None or not access.allows("admin"):
        raise Forbidden("managing keys needs an admin key")
    return KeyManager(request.app.state.keys, access)


Manager = Annotated[KeyManager, Depends(key_manager)]
ERRORS = documented(400, 401, 403, 422, 500, 503)

router = APIRouter(prefix="/v1/keys", tags=["keys"])


@router.post("", response_model=NewKey, status_code=201, operation_id="create_key", responses=ERRORS)
async def create_key(body: KeyRequest, keys: Manager) -> Response:
    """Make a key bound to a reach and a role; its secret is in this answer and nowhere else, ever."""
    request = body.checked()
    if not keys.access.manages(request.reach, request.role):
        raise Forbidden("a key may not be given more than the admin key that makes it holds")
    return answer(await keys.keys.create(request), status_code=201)


@router.get("", response_model=KeyList, operation_id="list_keys", responses=ERRORS)
async def list_keys(keys: Manager) -> Response:
    """Every key the caller manages, revoked ones included, without secrets."""
    return answer(KeyList(keys=await keys.managed()))


@router.post("/revoke", response_model=KeyInfo, operation_id="revoke_key", responses={**ERRORS, **documented(404)})
async def revoke_key(body: RevokeRequest, keys: Manager) -> Response:
    """Revoke a key: refused everywhere within a second; revoking twice changes nothing."""
    if body.id not in {key.id for key in await keys.managed()}:
        raise NotFound(f"no key {quoted(body.id)}")
    return answer(await keys.keys.revoke(body.id))
