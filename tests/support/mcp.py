"""Calling the MCP tools with the SDK's own client: an answer, or the envelope of a refusal."""

from __future__ import annotations

import json
from typing import Any

from mcp import Client


async def answer(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's JSON; its text and its structured content must say the same."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    [content] = result.content
    assert json.loads(content.text) == result.structured_content  # type: ignore[union-attr]
    return dict(result.structured_content)


async def refusal(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The error envelope a refused call carries, with no trace in it."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    [content] = result.content
    envelope = json.loads(content.text)  # type: ignore[union-attr]
    assert envelope == result.structured_content and {"code", "message", "retryable"} <= set(envelope)
    assert "Traceback" not in content.text  # type: ignore[union-attr]
    return dict(envelope)
