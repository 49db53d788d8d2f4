"""Every request counted, timed and logged once, the perimeter's refusals included.

A pure ASGI middleware around the perimeter (perimeter.py), so it sees what the client sees:
a 401 or a 413 the perimeter answered, and the request id it settled on. Requests are labelled
by route template (``/v1/fetch``), never by raw path: a path no route matches is ``unmatched``
and an unknown method ``other``, so no client can add series to the metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.telemetry.metrics import HTTP_DURATION, HTTP_REQUESTS

logger = logging.getLogger("engram.access")

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"
# Counted when the client went away before any answer was sent, as proxies count it.
CLIENT_GONE = 499


def route_template(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """The template of the route that served (or would have served) the request, or ``unmatched``.

    A routed request names its route in the scope; one the perimeter refused before routing is
    matched here against ``routes``, each with its full path.
    """
    route = scope.get("route")
    if route is None:
        route = next((r for r in routes if r.matches(scope)[0] is not Match.NONE), None)  # 405s too
    return str(getattr(route, "path", UNMATCHED))


class Observer:
    def __init__(self, app: ASGIApp, *, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self._routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = CLIENT_GONE

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            self._record(scope, status, time.perf_counter() - started)

    def _record(self, scope: Scope, status: int, seconds: float) -> None:
        method = scope["method"] if scope["method"] in METHODS else "other"
        record(method, route_template(scope, self._routes), status, seconds, scope.get("state", {}))


def record(method: str, route: str, status: int, seconds: float, state: Mapping[str, Any]) -> None:
    """One answered request counted, timed and logged (the access line): by the Observer, and by
    the connection protocol for a request it refused before the app saw it (app/serving/protocol.py)."""
    HTTP_REQUESTS.labels(method, route, str(status)).inc()
    HTTP_DURATION.labels(method, route).observe(seconds)
    if not logger.isEnabledFor(logging.INFO):
        return
    fields: dict[str, Any] = {
        "request_id": state.get("request_id"),
        "method": method,
        "route": route,
        "status": status,
        "duration_ms": round(seconds * 1000, 3),
    }
    access = state.get("access")
    if access is not None and access.key_id is not None:
        fields["key_id"] = access.key_id  # the key's public id, never its secret
    if state.get("request_id_replaced"):
        fields["request_id_replaced"] = True
    if trace_id := state.get("trace_id"):
        fields["trace_id"] = trace_id  # with tracing on (app/telemetry/tracing.py): the line finds its trace
    logger.info(
        "%s %s %s in %.1f ms (request %s)",
        method,
        route,
        status,
        seconds * 1000,
        fields["request_id"],
        extra=fields,
    )
