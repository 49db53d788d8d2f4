"""``Engram-Position``: a write answers where it reached; a read that presents it sees that write.

With a read replica (``ENGRAM_READ_DATABASE_URL``, app/engine/postgres/replica.py) reads may be a
moment behind the writes. A write's answer carries the position its commit reached in the
primary's log; a client that sends it back on a read is answered by a server that has replayed that
far (the replica once it has, else the primary). Without a replica every read sees every write, and
writes answer no position. The header's value is read here, and the engine finds it for the
request's calls (app/engine/consistency.py).
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.envelope import error_response, new_request_id
from app.contract.errors import InvalidRequest
from app.engine import consistency

HEADER = "Engram-Position"

# The operations that answer a position (they write), and those that honour one (they read):
# documented on each in openapi.json (app/api/openapi.py) and docs/api.md.
WRITES = (
    "store",
    "store_many",
    "forget",
    "forget_within",
    "restore",
    "import_items",
    "set_retention",
    "clear_retention",
    "hold_retention",
    "release_retention",
)
READS = ("fetch", "recall", "list", "get", "explore", "export_items")

PARAMETER: dict[str, Any] = {
    "name": HEADER,
    "in": "header",
    "required": False,
    "description": (
        "The furthest `Engram-Position` this client's writes were answered with: the read is answered by "
        "a server that has replayed that write (the read replica once it has, else the primary). Without "
        "it a read may miss writes of the last moments when the service reads from a replica."
    ),
    "schema": {"type": "string", "pattern": "^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$", "example": "0/16B3748"},
}
ANSWERED: dict[str, Any] = {
    "description": (
        "Where this write's commit reached the primary's log, when the service reads from a replica "
        "(ENGRAM_READ_DATABASE_URL); present it on later reads to see this write."
    ),
    "schema": {"type": "string", "example": "0/16B3748"},
}


def presented(headers: Headers) -> int | None:
    """The furthest position the request presents (values may repeat or be comma-separated); None
    without one; ``invalid_request`` for a value that is not a position."""
    values = [part for value in headers.getlist(HEADER) for part in value.split(",") if part.strip()]
    if not values:
        return None
    return max(consistency.parse_position(value) for value in values)


class ReadAfterWrite:
    """Opens the request's positions from its header and answers the position its writes reached."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Every route that reads or writes items is a POST; a probe of /v1/health never answers an envelope.
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            read_after = presented(Headers(scope=scope))
        except InvalidRequest as error:
            request_id = scope.get("state", {}).get("request_id") or new_request_id()
            await error_response(error, request_id)(scope, receive, send)
            return
        with consistency.positions(read_after) as here:

            async def send_position(message: Message) -> None:
                if message["type"] == "http.response.start" and here.wrote is not None:
                    MutableHeaders(scope=message)[HEADER] = consistency.format_position(here.wrote)
                await send(message)

            await self.app(scope, receive, send_position)
