"""Where API keys live, and how a presented secret becomes an :class:`Access`.

Each engine keeps its keys beside its items (``engine.keys``). :class:`Keys` answers the
perimeter: it remembers what a secret grants for at most ``FRESH_S``, so a revocation or an
expiry holds on every replica within that time without a database round trip per request.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

from app.contract.access import Access
from app.contract.errors import NotFound, quoted
from app.contract.keys import KeyInfo, KeyRequest, NewKey, new_key_id, new_secret, secret_digest

FRESH_S = 1.0
"""How long a looked-up key is trusted before it is read again: revocation's delay, at most."""
USE_STAMP_S = 60.0
"""``last_used_at`` is written at most this often per key, so a busy key costs no write per request."""


class KeyStore(Protocol):
    async def create(self, request: KeyRequest) -> NewKey: ...

    async def list(self) -> list[KeyInfo]: ...

    async def revoke(self, key_id: str) -> KeyInfo:
        """The key, revoked (a revoked key stays revoked); ``not_found`` for an unknown id."""
        ...

    async def find(self, digest: bytes) -> KeyInfo | None:
        """The key whose secret has this SHA-256, in whatever state."""
        ...

    async def any(self) -> bool:
        """Whether any key was ever made: then every route but health needs one."""
        ...

    async def stamp_use(self, key_id: str, now: datetime) -> None: ...


class MemoryKeys:
    """Keys in a dict: the reference engine's."""

    def __init__(self) -> None:
        self._keys: dict[str, tuple[bytes, KeyInfo]] = {}

    async def create(self, request: KeyRequest) -> NewKey:
        request = request.checked()
        secret = new_secret()
        info = KeyInfo(
            id=new_key_id(),
            name=request.name,
            role=request.role,
            reach=request.reach,
            expires_at=request.expires_at,
            created_at=datetime.now(UTC),
        )
        self._keys[info.id] = (secret_digest(secret), info)
        return NewKey(key=info, secret=secret)

    async def list(self) -> list[KeyInfo]:
        return sorted((info for _, info in self._keys.values()), key=lambda info: (info.created_at, info.id))

    async def revoke(self, key_id: str) -> KeyInfo:
        if key_id not in self._keys:
            raise NotFound(f"no key {quoted(key_id)}")
        digest, info = self._keys[key_id]
        if info.revoked_at is None:
            info = info.model_copy(update={"revoked_at": datetime.now(UTC)})
            self._keys[key_id] = (digest, info)
        return info

    async def find(self, digest: bytes) -> KeyInfo | None:
        return next((info for held, info in self._keys.values() if held == digest), None)

    async def any(self) -> bool:
        return bool(self._keys)

    async def stamp_use(self, key_id: str, now: datetime) -> None:
        digest, info = self._keys[key_id]
        self._keys[key_id] = (digest, info.model_copy(update={"last_used_at": now}))


class Keys:
    """What a presented secret grants, from ``store``, each answer trusted for ``FRESH_S``."""

    def __init__(self, store: KeyStore, fresh_s: float = FRESH_S) -> None:
        self.store = store
        self._fresh_s = fresh_s
        self._known: dict[bytes, tuple[float, KeyInfo]] = {}
        self._any: tuple[float, bool] | None = None

    async def create(self, request: KeyRequest) -> NewKey:
        made = await self.store.create(request)
        self._any = None  # the first key turns authentication on at once, here
        return made

    async def revoke(self, key_id: str) -> KeyInfo:
        revoked = await self.store.revoke(key_id)
        self._known = {digest: entry for digest, entry in self._known.items() if entry[1].id != key_id}
        return revoked

    async def required(self) -> bool:
        """Whether the store holds any key (then a request without one is refused)."""
        now = time.monotonic()
        if self._any is None or now - self._any[0] > self._fresh_s:
            self._any = (now, await self.store.any())
        return self._any[1]

    async def access_of(self, secret: str) -> Access | None:
        """The caller's access, or None for a secret that is unknown, revoked or expired."""
        digest = secret_digest(secret)
        now = time.monotonic()
        cached = self._known.get(digest)
        if cached is None or now - cached[0] > self._fresh_s:
            info = await self.store.find(digest)
            if info is None:
                self._known.pop(digest, None)
                return None
            cached = (now, info)
            self._known[digest] = cached
            wall = datetime.now(UTC)
            stale = info.last_used_at is None or (wall - info.last_used_at).total_seconds() > USE_STAMP_S
            if info.usable(wall) and stale:
                await self.store.stamp_use(info.id, wall)
        info = cached[1]
        return info.access() if info.usable(datetime.now(UTC)) else None


async def grant(credential: str | None, configured: Sequence[bytes], keys: Keys | None) -> Access | None:
    """What a presented credential grants; None when it must be refused.

    A configured key (ENGRAM_API_KEYS) grants everything; a key held in the database its role and
    reach. With neither configured nor held, the service is open and grants everything. The HTTP
    perimeter and ``engram mcp`` both ask here, so a key means the same over either.
    """
    if credential is not None:
        given = credential.encode("utf-8", "surrogateescape")
        # Compare against every configured key, in constant time each, without stopping early.
        matched = False
        for key in configured:
            matched |= hmac.compare_digest(given, key)
        if matched:
            return Access.everything()
    if keys is None:
        return None if configured else Access.everything()
    if credential is not None:
        access = await keys.access_of(credential)
        if access is not None:
            return access
    if configured or await keys.required():
        return None
    return Access.everything()
