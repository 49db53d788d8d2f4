"""``engram mcp``: the tools over stdio, spawned by the SDK's own client, with a key from ``engram keys create``."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from app.engine.keys import FRESH_S
from app.engine.postgres.engine import PostgresEngine
from tests.support.live import learning
from tests.support.mcp import answer, refusal
from tests.support.processes import ENGRAM, engram_env
from tests.support.scratch import run_engram

ALICE = "team:acme/user:alice"
BOB = "team:acme/user:bob"


def settings_of(database_url: str) -> dict[str, str]:
    return {"database_url": database_url, "embedder": "wordllama", "embedding_dim": "256"}


@asynccontextmanager
async def spawned(database_url: str, *args: str, **env: str) -> AsyncIterator[Client]:
    """``engram mcp ARGS`` on the test database; what it logs must hold no key."""
    variables = {f"ENGRAM_{k.upper()}": v for k, v in {**settings_of(database_url), **env}.items()}
    command = StdioServerParameters(command=ENGRAM, args=["mcp", *args], env=variables)
    with tempfile.TemporaryFile("w+") as stderr:
        async with Client(stdio_client(command, errlog=stderr), read_timeout_seconds=120) as client:
            yield client
        stderr.seek(0)
        logged = stderr.read()
    assert "Traceback" not in logged, logged
    assert not [secret for secret in (*args, *env.values()) if secret.startswith(("egk_", "desk")) and secret in logged]


async def make_key(database_url: str, *args: str) -> tuple[str, str]:
    made = await asyncio.to_thread(run_engram, "keys", "create", *args, **settings_of(database_url))
    assert made.returncode == 0, made.stderr
    [listed, secret] = made.stdout.splitlines()
    return listed.split()[0], secret.removeprefix("secret: ")


async def store(engine: PostgresEngine, text: str, namespace: str) -> None:
    from app.contract.items import ITEM_ADAPTER

    await engine.store(ITEM_ADAPTER.validate_python(learning(text, namespace=namespace)).checked())


async def test_engram_mcp_carries_the_keys_scope_until_it_is_revoked(
    pg_engine: PostgresEngine, database_url: str
) -> None:
    await store(pg_engine, "alice prefers green tea", ALICE)
    await store(pg_engine, "bob prefers green coffee", BOB)
    key_id, secret = await make_key(
        database_url, "--name", "alice's desktop", "--role", "write", "--at", ALICE, "--no-inherit", "--descendants"
    )
    async with spawned(database_url, mcp_key=secret) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"store", "fetch", "recall", "get", "list", "explore", "forget"} <= names
        listed = await answer(client, "list", {"limit": 10})
        assert [hit["text"] for hit in listed["items"]] == ["alice prefers green tea"]
        stored = await answer(client, "store", learning("alice drafts on mondays", namespace=f"{ALICE}/agent:x"))
        assert stored["replayed"] is False
        fetched = await answer(client, "fetch", {"query": "prefers green", "mode": "hybrid", "limit": 10})
        assert {hit["meta"]["namespace"] for hit in fetched["hits"]} == {ALICE, f"{ALICE}/agent:x"}
        outside = await refusal(client, "store", learning("not hers", namespace=BOB))
        assert outside["code"] == "forbidden" and f"'{BOB}'" in outside["message"]
        assert (await refusal(client, "forget", {"ids": [stored["id"]]}))[
            "message"
        ] == "forbidden: a write key may not forget"
        revoked = await asyncio.to_thread(run_engram, "keys", "revoke", key_id, **settings_of(database_url))
        assert revoked.returncode == 0, revoked.stderr
        await asyncio.sleep(FRESH_S)  # another process revoked it: this one reads the key again within FRESH_S
        gone = await refusal(client, "list", {"limit": 10})
        assert gone["code"] == "unauthorized"


async def test_a_key_given_on_the_command_line(pg_engine: PostgresEngine, database_url: str) -> None:
    await store(pg_engine, "bob prefers green coffee", BOB)
    _, secret = await make_key(database_url, "--name", "bob reads", "--role", "read", "--at", BOB)
    async with spawned(database_url, "--key", secret) as client:
        listed = await answer(client, "list", {"limit": 10})
        assert [hit["text"] for hit in listed["items"]] == ["bob prefers green coffee"]
        assert (await refusal(client, "store", learning("x", namespace=BOB)))["message"] == (
            "forbidden: a read key may not store"
        )


async def test_no_key_is_refused_in_one_line_once_a_key_is_held(pg_engine: PostgresEngine, database_url: str) -> None:
    settings = settings_of(database_url)
    # No key held and none configured: open, as the HTTP service is on loopback.
    async with spawned(database_url) as client:
        assert await answer(client, "list", {"limit": 1}) == {"items": []}
    await make_key(database_url, "--name", "ops", "--role", "admin")
    refused = await asyncio.to_thread(run_engram, "mcp", **settings)
    assert refused.returncode == 2 and refused.stdout == "" and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1] == (
        "engram: unauthorized: a key is required: pass --key or set ENGRAM_MCP_KEY (make one with engram keys create)"
    )
    unknown = await asyncio.to_thread(run_engram, "mcp", "--key", "egk_not-a-key", **settings)
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr and "egk_not-a-key" not in unknown.stderr
    assert unknown.stderr.strip().splitlines()[-1] == "engram: unauthorized: the key is unknown, revoked or expired"
    # A configured key reaches everything, as over HTTP.
    async with spawned(database_url, api_keys="desk-key", mcp_key="desk-key") as client:
        assert await answer(client, "list", {"limit": 1}) == {"items": []}


async def test_a_host_stops_it_with_sigterm(pg_engine: PostgresEngine, database_url: str) -> None:
    """SIGTERM unwinds like Ctrl-C (the engine closed, an embedded server's exit hook run), not a death by signal."""
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
    }

    def serve_then_stop() -> tuple[int, bytes, str]:
        process = subprocess.Popen(
            [ENGRAM, "mcp"],
            env=engram_env(**settings_of(database_url)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(hello).encode() + b"\n")
        process.stdin.flush()
        answered = process.stdout.readline()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
        return process.returncode, answered, stderr.decode()

    code, answered, stderr = await asyncio.to_thread(serve_then_stop)
    assert json.loads(answered)["result"]["serverInfo"]["name"] == "engram"
    assert code == 130 and stderr.strip().endswith("engram: stopped") and "Traceback" not in stderr
