"""``engram mcp``: the MCP tools over stdio, for a desktop host that starts the command itself.

The key comes from ``--key`` or ``ENGRAM_MCP_KEY`` and means what it means over HTTP (``grant``):
a configured key reaches everything, a key held in the database its reach with its role, and with
no key at all the tools are open only while the database holds no key and none is configured. It
is asked again on every call (as the HTTP perimeter asks on every request), so a revoked or
expired key stops working within ``FRESH_S``. Stdout is the protocol: everything else goes to stderr.
"""

from __future__ import annotations

from mcp.server.stdio import stdio_server

from app.contract.access import Access
from app.contract.errors import Unauthorized
from app.engine.keys import Keys, grant
from app.engine.protocol import MemoryEngine
from app.engine.scoped import as_allowed
from app.mcp.server import Context, build_server
from app.settings import Settings

KEY_ENV = "ENGRAM_MCP_KEY"


class KeyedCaller:
    """The one caller of an ``engram mcp`` process: its key, checked against ``engine``'s keys."""

    def __init__(self, engine: MemoryEngine, settings: Settings, secret: str | None) -> None:
        self._engine = engine
        self._configured = [key.encode() for key in settings.api_key_list()]
        self._keys = Keys(engine.keys)
        self._secret = secret

    async def access(self) -> Access:
        access = await grant(self._secret, self._configured, self._keys)
        if access is not None:
            return access
        if self._secret is None:
            raise Unauthorized(f"a key is required: pass --key or set {KEY_ENV} (make one with engram keys create)")
        raise Unauthorized("the key is unknown, revoked or expired")

    async def engine(self, ctx: Context) -> MemoryEngine:
        return as_allowed(self._engine, await self.access())


async def serve_stdio(settings: Settings, secret: str | None) -> None:
    """Serve until the host closes stdin; a key that would be refused ends the command first."""
    from app.engine.postgres.service import open_postgres_engine

    # Claimed first: while the tools are served, fd 1 points at stderr, so nothing the engine or a
    # process it starts (an embedded PostgreSQL) prints can land in the protocol.
    async with stdio_server() as (read, write):
        engine = await open_postgres_engine(settings)
        try:
            caller = KeyedCaller(engine, settings, secret)
            await caller.access()
            server = build_server(caller.engine)
            await server.run(read, write, server.create_initialization_options())
        finally:
            await engine.close()
