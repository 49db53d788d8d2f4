"""The REST operations as MCP tools, over streamable HTTP (``/mcp``) and over stdio (``engram mcp``)."""
