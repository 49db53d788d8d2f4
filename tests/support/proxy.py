"""A real HTTP hop before an OpenAI-compatible server, to watch and break what a client sends it.

``FaultProxy`` forwards every POST to its upstream and records it (its JSON body and its
Authorization header), counts requests and the most in flight at once, and can instead answer the
next requests itself (any status and body, after a stall if asked), hold them, answer every request
503 while ``down``, or rewrite the upstream's answer. So batching, concurrency bounds, retries,
timeouts and every fallback are observed on the wire, not inside the client.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import httpx

INJECTED = {"error": {"message": "injected", "type": "server_error"}}


@dataclass
class Fault:
    """What the proxy does with one request instead of forwarding it at once and unchanged."""

    status: int | None = None  # answer this status itself, with ``body``; None: forward
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | bytes = field(default_factory=lambda: INJECTED)
    stall_s: float = 0.0  # hold the request this long first
    rewrite: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # forward, then answer this of a 200's JSON

    def payload(self) -> bytes:
        return self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()


class FaultProxy:
    """Forwards to ``upstream`` on a loopback port of its own (``url``) until closed."""

    def __init__(self, upstream: str, *, timeout_s: float) -> None:
        self._upstream = httpx.Client(base_url=upstream, timeout=timeout_s)
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self.down = False  # answer every request 503 while set
        self.requests = 0
        self.in_flight = 0
        self.peak = 0
        self.bodies: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.answered: list[dict[str, Any]] = []  # the upstream's JSON answers (200s), before any rewrite
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def inject(self, fault: Fault, count: int = 1) -> None:
        """The next ``count`` requests meet ``fault``."""
        with self._lock:
            self._faults += [fault] * count

    def reset(self) -> None:
        with self._lock:
            self._faults.clear()
            self.down = False
            self.requests = self.in_flight = self.peak = 0
            self.bodies.clear()
            self.authorizations.clear()
            self.answered.clear()

    def cleared(self) -> Iterator[FaultProxy]:
        """For a test's fixture: the proxy with nothing recorded or pending, and so again after the test."""
        self.reset()
        yield self
        self.reset()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._upstream.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _arrived(self, raw: bytes, authorization: str | None) -> Fault:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.bodies.append(body)
            self.authorizations.append(authorization)
            if self.down:
                return Fault(status=503)
            return self._faults.pop(0) if self._faults else Fault()

    def _answer(self, path: str, raw: bytes, authorization: str | None) -> tuple[int, dict[str, str], bytes]:
        fault = self._arrived(raw, authorization)
        try:
            time.sleep(fault.stall_s)
            if fault.status is not None:
                return fault.status, fault.headers, fault.payload()
            forwarded = self._upstream.post(path, content=raw, headers={"Content-Type": "application/json"})
            try:
                answer = forwarded.json() if forwarded.status_code == 200 else None
            except ValueError:
                answer = None
            if answer is None:
                return forwarded.status_code, {}, forwarded.content
            with self._lock:
                self.answered.append(answer)
            if fault.rewrite is None:
                return 200, {}, forwarded.content
            return 200, {}, json.dumps(fault.rewrite(answer)).encode()
        finally:
            with self._lock:
                self.in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, body = proxy._answer(self.path, raw, self.headers.get("Authorization"))
                self.send_response(status)
                for name, value in {**headers, "Content-Type": "application/json"}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
                    self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
