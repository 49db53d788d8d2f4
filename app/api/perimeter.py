"""What every request passes first: request id, auth, body size, and a last-resort 500 (or 503, for a
request the server's graceful shutdown cut short).

A pure ASGI middleware rather than FastAPI dependencies, because the contract
puts the perimeter before everything, unknown routes included (contract §8).
"""

from __future__ import annotations

import asyncio
import logging

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.envelope import client_request_id, error_response, new_request_id
from app.contract.access import Access
from app.contract.errors import EngineFailure, EngramError, PayloadTooLarge, Unauthorized, Unavailable
from app.engine.keys import Keys, grant

logger = logging.getLogger("engram.http")

# The routes open without a key: orchestrators probe them (readiness and liveness).
OPEN_ROUTES = frozenset((method, path) for method in ("GET", "HEAD") for path in ("/v1/health", "/v1/health/live"))


def _bearer(headers: Headers) -> str | None:
    """The bearer credential, when exactly one Authorization header carries one."""
    given = headers.getlist("authorization")
    if len(given) != 1:  # none, or two that a proxy and the service might read differently
        return None
    scheme, _, credential = given[0].partition(" ")
    credential = credential.strip()
    return credential if scheme.lower() == "bearer" and credential else None


class Perimeter:
    def __init__(
        self,
        app: ASGIApp,
        *,
        api_keys: list[str],
        max_body_bytes: int,
        open_preflight: bool = False,
        open_routes: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.app = app
        # Beyond health: routes the deployment opened on purpose (ENGRAM_METRICS_PUBLIC).
        self._open_routes = OPEN_ROUTES | open_routes
        self._keys = [k.encode() for k in api_keys]
        self._max_body = max_body_bytes
        # With CORS on, a browser's preflight (which never carries a credential) goes through
        # to the CORS middleware; without it, a preflight is a request like any other.
        self._open_preflight = open_preflight

    async def _access(self, scope: Scope, headers: Headers) -> Access | None:
        """What the request's credential grants; None when it must be refused (401)."""
        keys: Keys | None = getattr(scope["app"].state, "keys", None) if "app" in scope else None
        return await grant(_bearer(headers), self._keys, keys)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        given = headers.get("x-request-id")
        request_id = client_request_id(given) or new_request_id()
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        if given is not None and given != request_id:
            state["request_id_replaced"] = True  # an unusable id is replaced, not refused; the log says so

        async def reply(error: Exception, status: int | None = None) -> None:
            response = error_response(error, request_id, status=status)  # type: ignore[arg-type]
            if isinstance(error, Unauthorized):
                response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)

        # A preflight as a browser sends it: without an Origin, CORS passes the request on to the
        # routes, which would then answer it without a key.
        preflight = (
            self._open_preflight
            and scope["method"] == "OPTIONS"
            and "access-control-request-method" in headers
            and "origin" in headers
        )
        open_route = preflight or (scope["method"], scope["path"]) in self._open_routes
        if not open_route:
            try:
                access = await self._access(scope, headers)
            except EngramError as error:  # the key store is unreachable: the caller may retry
                await reply(error)
                return
            if access is None:
                await reply(Unauthorized("a valid bearer api key is required"))
                return
            scope["state"]["access"] = access

        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self._max_body:
            await reply(PayloadTooLarge(f"the body is over the limit of {self._max_body} bytes"))
            return
        body = bytearray()
        if scope["method"] in ("POST", "PUT", "PATCH"):
            # Read the whole (bounded) body up front so an oversized stream is a 413, not a parse error.
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                if len(body) > self._max_body:
                    await reply(PayloadTooLarge(f"the body is over the limit of {self._max_body} bytes"))
                    return
                if not message.get("more_body", False):
                    break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                MutableHeaders(scope=message)["X-Request-ID"] = request_id
            await send(message)

        try:
            await self.app(scope, replay, send_with_id)
        except asyncio.CancelledError:
            # Only the server cancels a request: its graceful shutdown ran out of time
            # (ENGRAM_SHUTDOWN_GRACE_S). The client may retry; the request ends here, without a trace.
            if not started:
                await reply(Unavailable("the service is stopping, retry shortly"))
        except Exception as error:
            # Only the type: a message may quote SQL or a value, and a trace is not for logs.
            logger.error(
                "unexpected failure in request %s: %s",
                request_id,
                type(error).__name__,
                extra={"request_id": request_id},
            )
            if not started:
                await reply(EngineFailure("an unexpected failure occurred"))
