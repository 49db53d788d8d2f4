"""The MCP server both transports run: ``tools/list`` and ``tools/call`` over the route tools.

Which engine a call uses is the transport's to say (``EngineFor``): over HTTP the perimeter's
``Access`` for the request, over stdio the key ``engram mcp`` was given. Either way it is the engine
as that key may use it (app/engine/scoped.py), so a tool sees and changes what the route would.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.exceptions import RequestValidationError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
)

from app import __version__
from app.api.envelope import envelope_of, new_request_id
from app.api.errors import schema_error
from app.contract.errors import EngineFailure, EngramError, quoted
from app.engine.protocol import MemoryEngine
from app.mcp.tools import TOOLS

logger = logging.getLogger("engram.mcp")

Context = ServerRequestContext[Any, Any]
EngineFor = Callable[[Context], Awaitable[MemoryEngine]]

INSTRUCTIONS = (
    "Engram is a memory for agents: store what you learn (documents, conversation turns, learnings) "
    "and fetch or recall it later by keyword, meaning or both. Every tool takes the JSON body of the "
    "REST route of the same name and answers its JSON; a refusal is a tool error carrying the error "
    "envelope (code, message). Your key decides which namespaces you see and what you may change."
)


def request_id_of(ctx: Context) -> str:
    """The HTTP request's id (X-Request-ID, as the logs know it), or a new one over stdio."""
    state = ctx.request.scope.get("state", {}) if ctx.request is not None else {}
    return str(state.get("request_id") or new_request_id())


def answered(body: bytes) -> CallToolResult:
    """The route's JSON, both as text (for a model to read) and as structured content (for code)."""
    return CallToolResult(content=[TextContent(text=body.decode())], structured_content=json.loads(body))


def refused(error: EngramError, request_id: str) -> CallToolResult:
    """A tool error carrying the envelope the route would answer: its code, message and details."""
    envelope = envelope_of(error, request_id)
    return CallToolResult(is_error=True, content=[TextContent(text=json.dumps(envelope))], structured_content=envelope)


def build_server(engine_for: EngineFor) -> Server[Any]:
    async def list_tools(ctx: Context, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[tool.tool for tool in TOOLS.values()])

    async def call_tool(ctx: Context, params: CallToolRequestParams) -> CallToolResult:
        tool = TOOLS.get(params.name)
        if tool is None:
            raise MCPError(INVALID_PARAMS, f"no tool {quoted(params.name)}")
        try:
            return answered(await tool.call(params.arguments or {}, await engine_for(ctx)))
        except RequestValidationError as error:
            return refused(schema_error(error), request_id_of(ctx))
        except EngramError as error:
            return refused(error, request_id_of(ctx))
        except Exception as error:
            # Only the type: a message may quote SQL or a value, and a trace is not for logs.
            request_id = request_id_of(ctx)
            logger.error(
                "unexpected failure in tool %s, request %s: %s", tool.tool.name, request_id, type(error).__name__
            )
            return refused(EngineFailure("an unexpected failure occurred"), request_id)

    return Server(
        "engram",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
