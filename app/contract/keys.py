"""API keys held by the service: what a key is, how its secret is made and recognised.

A secret is ``egk_`` and 43 characters of URL-safe base64 (32 random bytes): high entropy,
so it is kept as its SHA-256 alone and looked up by that digest; the secret itself is shown
once, when the key is made.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime
from typing import Annotated

from pydantic import Field

from app.contract.access import Access, KeyRole
from app.contract.errors import InvalidRequest
from app.contract.meta import Closed, Instant
from app.contract.namespaces import Reach
from app.contract.requests import Answer
from app.contract.text import check_storable, is_blank

SECRET_PREFIX = "egk_"
MAX_KEY_NAME_CHARS = 200


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def new_key_id() -> str:
    return "key_" + secrets.token_hex(8)


def secret_digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).digest()


class KeyRequest(Closed):
    """A key to make: its name, role, reach, and when it stops working (never, when unset)."""

    name: str
    role: KeyRole
    reach: Reach
    expires_at: Instant | None = None

    def checked(self, now: datetime | None = None) -> KeyRequest:
        if is_blank(self.name):
            raise InvalidRequest("name must not be blank")
        if len(self.name) > MAX_KEY_NAME_CHARS:
            raise InvalidRequest(f"name is longer than {MAX_KEY_NAME_CHARS} characters")
        check_storable(self.name, "name")
        if self.expires_at is not None and self.expires_at <= (now or datetime.now(UTC)):
            raise InvalidRequest("expires_at must be in the future")
        return self.model_copy(update={"reach": self.reach.checked()})


class RevokeRequest(Closed):
    id: Annotated[str, Field(max_length=64)]


class KeyInfo(Answer):
    """A key as it is listed: never its secret."""

    id: str
    name: str
    role: KeyRole
    reach: Reach
    expires_at: Instant | None = None
    created_at: Instant
    last_used_at: Instant | None = None
    revoked_at: Instant | None = None

    def access(self) -> Access:
        everything = self.reach.node.is_root and self.reach.descendants
        return Access(role=self.role, reach=None if everything else self.reach, key_id=self.id)

    def usable(self, now: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


class NewKey(Answer):
    """A key just made, with the secret: the one time the service says it."""

    key: KeyInfo
    secret: str


class KeyList(Answer):
    keys: list[KeyInfo]
