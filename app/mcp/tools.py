"""The MCP tools: REST routes, each offered with the route's own request model, endpoint and answer.

A tool is read off its route (app/api/routes.py), so there is no second copy to drift: its input
schema is the JSON schema of the route's body model, its arguments are validated by that model
exactly as the route validates a body, it calls the route's endpoint with the caller's engine, and
it answers the JSON the route answers. Only the annotations here are MCP's own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Response
from fastapi.routing import APIRoute
from mcp.types import Tool, ToolAnnotations
from pydantic import TypeAdapter
from pydantic.json_schema import JsonSchemaMode

from app.api.endpoint import validated
from app.api.routes import router
from app.engine.protocol import MemoryEngine


def _hints(*, reads: bool = False, destroys: bool = False) -> ToolAnnotations:
    """Every tool acts on this service's store alone (a closed world); a write or a forget, done twice
    with the same arguments, changes nothing more (an item's id is its fingerprint)."""
    if reads:
        return ToolAnnotations(read_only_hint=True, open_world_hint=False)
    return ToolAnnotations(read_only_hint=False, destructive_hint=destroys, idempotent_hint=True, open_world_hint=False)


HINTS: dict[str, ToolAnnotations] = {
    "store": _hints(),
    "store_many": _hints(),
    "fetch": _hints(reads=True),
    "recall": _hints(reads=True),
    "get": _hints(reads=True),
    "list": _hints(reads=True),
    "explore": _hints(reads=True),
    "forget": _hints(destroys=True),
    "forget_within": _hints(destroys=True),
    "restore": _hints(),
}
"""The tools, named by their routes' operation ids: every route that takes a body but the keys'."""


@dataclass(frozen=True)
class RouteTool:
    """One route as a tool: what ``tools/list`` shows, and how a call is validated and answered."""

    tool: Tool
    arguments: TypeAdapter[Any]
    endpoint: Callable[[Any, MemoryEngine], Awaitable[Response]]

    async def call(self, arguments: dict[str, Any], engine: MemoryEngine) -> bytes:
        """The route's answer, as JSON; a contract error or a ``RequestValidationError`` is raised as by the route."""
        response = await self.endpoint(validated(self.arguments, arguments), engine)
        return bytes(response.body)


def object_schema(adapter: TypeAdapter[Any], mode: JsonSchemaMode) -> dict[str, Any]:
    """The type's JSON schema, its root declared an object: MCP asks for one, and a union of closed
    objects (an item, a forget target) is one, though pydantic does not say so at its root."""
    schema = adapter.json_schema(mode=mode)
    return {"type": "object", **schema}


def route_tool(route: APIRoute, hints: ToolAnnotations) -> RouteTool:
    if route.body_field is None or route.response_model is None:
        raise TypeError(f"{route.path}: a tool is made of a route with a body model and an answer model")
    arguments: TypeAdapter[Any] = TypeAdapter(route.body_field.field_info.annotation)
    tool = Tool(
        name=str(route.operation_id),
        description=route.description,
        input_schema=object_schema(arguments, "validation"),
        output_schema=object_schema(TypeAdapter(route.response_model), "serialization"),
        annotations=hints,
    )
    return RouteTool(tool=tool, arguments=arguments, endpoint=route.endpoint)


def build_tools() -> dict[str, RouteTool]:
    routes = {route.operation_id: route for route in router.routes if isinstance(route, APIRoute)}
    return {name: route_tool(routes[name], hints) for name, hints in HINTS.items()}


TOOLS = build_tools()
