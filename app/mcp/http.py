"""The MCP tools over streamable HTTP at ``/mcp``, behind the same perimeter as every REST route.

Stateless: no MCP session outlives its request, so any replica answers any call, exactly as for
REST, and each POST is answered with one JSON body (no event stream is held open). The caller's
key was checked by the perimeter, which left its ``Access`` in the request's state: the tools use
the engine as that key may (``engine_of``, as the routes do).
"""

from __future__ import annotations

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from app.api.endpoint import engine_of
from app.api.envelope import error_response, new_request_id
from app.contract.errors import MethodNotAllowed, Unauthorized, shortened
from app.engine.protocol import MemoryEngine
from app.mcp.server import Context, build_server

PATH = "/mcp"


async def engine_of_call(ctx: Context) -> MemoryEngine:
    """The engine as the request's key may use it; a request the perimeter did not admit gets nothing."""
    request: Request | None = ctx.request
    if request is None or request.scope.get("state", {}).get("access") is None:
        raise Unauthorized("a valid bearer api key is required")
    return await engine_of(request)


class McpEndpoint:
    """The ASGI app at ``/mcp``."""

    def __init__(self, *, max_body_bytes: int) -> None:
        self._server = build_server(engine_of_call)
        self._max_body = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            # GET would open an event stream that nothing is ever sent on, held until the client
            # leaves; DELETE ends a session, and none is kept. The transport allows a 405 for both.
            refusal = MethodNotAllowed(f"{PATH} accepts POST only (stateless MCP), not {shortened(scope['method'])}")
            response = error_response(refusal, scope.get("state", {}).get("request_id") or new_request_id())
            response.headers["Allow"] = "POST"
            await response(scope, receive, send)
            return
        # A stateless manager keeps nothing between requests, so each request runs one of its own:
        # its tasks live and end within the request, and the app's lifespan has nothing to hold open.
        manager = StreamableHTTPSessionManager(
            self._server, stateless=True, json_response=True, max_request_body_size=self._max_body
        )
        async with manager.run():
            await manager.handle_request(scope, receive, send)
