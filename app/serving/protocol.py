"""An HTTP/1.1 connection below the app: uvicorn's httptools protocol with a bounded request head,
and the error envelope on the requests it refuses itself.

Uvicorn reads a request's head with no limit (one 100 MB header held the event loop for seconds
and grew the process by hundreds of MB: httptools extends a header value by copying it at every
read) and answers what its parser cannot read with a bare text 400. Here a head is fed to the
parser no further than its byte limit, its headers are counted, and a refusal is the contract's
envelope (``invalid_request``: 400 unreadable, 431 over a limit), counted and logged as any
answer is. Uvicorn's own warning lines for such requests, one per request a client can send at
will, are left out.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.api.envelope import client_request_id, envelope_of, new_request_id
from app.api.observer import UNMATCHED, record
from app.contract.errors import InvalidRequest

UNREADABLE = "the request is not valid http/1.1"
# After a refusal, how long the rest of what the client sends is read and dropped before the
# connection closes: closed with unread data, the kernel resets it, and a client still sending
# (a 100 MB header) would lose the answer. Writing ends at once; reading, at the latest then.
LINGER_S = 2.0


@dataclass(frozen=True)
class HeadLimits:
    """How large a request's head (its request line and headers) may be, and how many headers it may carry."""

    max_bytes: int
    max_headers: int


class _Refused(Exception):
    """Raised from a parser callback to stop reading the request; httptools re-raises it as its context."""

    def __init__(self, status: int, error: InvalidRequest) -> None:
        super().__init__(error.message)
        self.status = status
        self.error = error


class BoundedHttpProtocol(HttpToolsProtocol):
    """One connection; ``limits`` is set on the class ``protocol_class`` makes."""

    limits: ClassVar[HeadLimits]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # reading a request's head: the connection's first, or the next one's
        self._head_bytes = 0
        self._head_started: float | None = None
        self._headers = 0
        self._refused = False

    def data_received(self, data: bytes) -> None:
        while data and not self._refused and not self.transport.is_closing():
            if self._in_head:
                # At most what the head may still take: the parser never holds more of it than the limit.
                self._head_started = self._head_started or time.perf_counter()
                budget = self.limits.max_bytes - self._head_bytes
                piece, data = data[:budget], data[budget:]
                self._head_bytes += len(piece)
            else:
                # A body, and whatever follows it: a pipelined request's head may go over by this one read.
                piece, data = data, b""
            self._feed(piece)
            limit = self.limits.max_bytes
            if self._in_head and self._head_bytes >= limit and not self._refused and not self.transport.is_closing():
                self._refuse(431, InvalidRequest(f"the request's head is over the limit of {limit} bytes"))

    def _feed(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            # Otherwise the app answers it as a plain request: the service serves no websockets.
        except httptools.HttpParserError as error:
            refused = error.__context__
            if isinstance(refused, _Refused):
                self._refuse(refused.status, refused.error)
            else:
                self._refuse(400, InvalidRequest(UNREADABLE))

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._headers = 0

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers += 1
        if self._headers > self.limits.max_headers:
            limit = self.limits.max_headers
            raise _Refused(431, InvalidRequest(f"the request has more than {limit} headers"))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes, self._head_started = True, 0, None

    def _refuse(self, status: int, error: InvalidRequest) -> None:
        """Answer the envelope and close; a request the app is answering is only cut (it cannot get two)."""
        cycle = self.cycle
        request_id = None
        if cycle is not None and not cycle.response_complete:  # its head was read: a bad body
            cycle.disconnected = True  # the app's receive() now says the client left, and its send() is dropped
            cycle.message_event.set()
            if cycle.response_started:
                self.transport.close()
                return
            given = [value for name, value in cycle.scope["headers"] if name == b"x-request-id"]
            request_id = client_request_id(given[0].decode("latin-1")) if given else None  # as the perimeter reads it
        request_id = request_id or new_request_id()
        body = json.dumps(envelope_of(error, request_id), separators=(",", ":")).encode()
        head = [STATUS_LINE[status]]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"x-request-id: " + request_id.encode() + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        self._refused = True
        if self.transport.can_write_eof():
            self.transport.write_eof()  # the answer, then the end: what comes in now is read and dropped
            self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()
        seconds = time.perf_counter() - self._head_started if self._head_started else 0.0
        record("other", UNMATCHED, status, seconds, {"request_id": request_id})


def protocol_class(limits: HeadLimits) -> type[BoundedHttpProtocol]:
    """The class uvicorn makes each connection with (its ``http`` setting), bound to ``limits``."""
    return type("EngramHttpProtocol", (BoundedHttpProtocol,), {"limits": limits})
