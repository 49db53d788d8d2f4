"""Opaque, signed cursors: a client can pass one back, not forge or reuse it elsewhere."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from pydantic import BaseModel

from app.contract.errors import InvalidRequest

_TAG_BYTES = 16


def scope_of(*parts: BaseModel | str) -> str:
    """A digest of what a cursor is bound to (query, mode, filter)."""
    digest = hashlib.sha256()
    for part in parts:
        text = part.model_dump_json(exclude_none=True) if isinstance(part, BaseModel) else part
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()[:32]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CursorCodec:
    """Signs ``{scope, position}`` with a server secret (HMAC-SHA256)."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _tag(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()[:_TAG_BYTES]

    def issue(self, scope: str, position: Any) -> str:
        return self._text(json.dumps({"s": scope, "p": position}, separators=(",", ":")).encode())

    def _text(self, payload: bytes) -> str:
        return f"{_b64(payload)}.{_b64(self._tag(payload))}"

    def resume(self, cursor: str | None, scope: str, start: Any) -> Any:
        """Where a page begins: ``start`` without a cursor, else the position the cursor holds.

        Only ``None`` (absent, or ``null``) means no cursor: ``""`` is a cursor this service never
        issued, refused rather than read as a restart (contract §5)."""
        return start if cursor is None else self.read(cursor, scope)

    def read(self, cursor: str, scope: str) -> Any:
        """The position the cursor holds; ``invalid_request`` for a cursor not ours or not for this request."""
        try:
            body, tag = cursor.split(".")
            payload = _unb64(body)
            # Byte for byte as issued: base64 decoding forgives padding and the standard alphabet.
            valid = hmac.compare_digest(_unb64(tag), self._tag(payload)) and cursor == self._text(payload)
        except (ValueError, UnicodeError):
            valid = False
        if not valid:
            raise InvalidRequest("cursor was not issued by this service")
        data = json.loads(payload)
        if data.get("s") != scope:
            raise InvalidRequest("cursor belongs to another query, filter or mode")
        return data["p"]


def listing_position(position: Any) -> tuple[int, int | None]:
    """A list cursor's ``(after, ceiling)``; a cursor issued before the ceiling held ``after`` alone."""
    if isinstance(position, list) and len(position) in (2, 3) and all(isinstance(p, int) for p in position):
        return position[0], position[1]
    if isinstance(position, int):
        return position, None
    return 0, None


def listing_seen(position: Any) -> int | None:
    """The write-ahead log position a list cursor's first page was read at (its third number, written
    only when reads may go to a replica: app/engine/postgres/replica.py); None when it holds none."""
    if isinstance(position, list) and len(position) == 3 and all(isinstance(p, int) for p in position):
        return int(position[2])
    return None
