"""``engram serve`` and ``engram mcp`` configured with a read replica, against a real streaming replica.

The settings are the ones a deployment writes (ENGRAM_DATABASE_URL, ENGRAM_READ_DATABASE_URL) and
the network path is real: a live process, real HTTP, the replica's replay paused to make it lag,
then the replica stopped under the service.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.support.live import learning, live_server
from tests.support.mcp import answer
from tests.support.processes import ENGRAM
from tests.support.replica import Primary, Replica, catch_up
from tests.support.scratch import scratch

HEADER = "Engram-Position"


def replicated(primary: Primary, replica: Replica) -> dict[str, str]:
    return {
        "ENGRAM_DATABASE_URL": primary.url,
        "ENGRAM_READ_DATABASE_URL": replica.url,
        "ENGRAM_EMBEDDER": "wordllama",
        "ENGRAM_EMBEDDING_DIM": "256",
    }


async def test_a_live_service_reads_the_replica_and_each_client_sees_its_own_writes(
    primary: Primary, replica: Replica
) -> None:
    with scratch("live-replica") as directory, live_server(Path(directory), env=replicated(primary, replica)) as live:
        assert "engram: reads from postgresql://postgres@/postgres?" in live.logs()
        async with live.client() as client:
            with replica.paused():
                stored = await client.post("/v1/store", json=learning("the live harbour note", namespace="agent:live"))
                assert stored.status_code == 201
                position = stored.headers[HEADER]
                ids = {"ids": [stored.json()["id"]]}
                assert (await client.post("/v1/get", json=ids)).json()["hits"] == []
                seen = await client.post("/v1/get", json=ids, headers={HEADER: position})
                assert [hit["id"] for hit in seen.json()["hits"]] == ids["ids"]
            catch_up(primary, replica)
            replica.stop()
            try:
                listed = await client.post(
                    "/v1/list", json={"limit": 10, "filter": {"reach": {"at": "agent:live", "inherit": False}}}
                )
                assert listed.status_code == 200 and [h["id"] for h in listed.json()["items"]] == ids["ids"]
                health = await client.get("/v1/health")
                assert health.status_code == 200 and health.json()["state"] == "degraded"
            finally:
                replica.start()
        logs = live.logs()
    assert "read replica unreachable" in logs and "reads go to the primary" in logs


async def test_engram_mcp_reads_its_own_writes_from_a_lagging_replica(primary: Primary, replica: Replica) -> None:
    """One client per process: each write raises what the process's later reads must see."""
    env = {**replicated(primary, replica), "ENGRAM_API_KEYS": "desk-key", "ENGRAM_MCP_KEY": "desk-key"}
    command = StdioServerParameters(command=ENGRAM, args=["mcp"], env=env)
    with replica.paused(), tempfile.TemporaryFile("w+") as stderr:
        async with Client(stdio_client(command, errlog=stderr), read_timeout_seconds=120) as client:
            stored = await answer(client, "store", learning("the desktop's own note", namespace="agent:desk"))
            got = await answer(client, "get", {"ids": [stored["id"]]})
            assert [hit["id"] for hit in got["hits"]] == [stored["id"]]
        assert replica.replayed() < primary.written(), "the replica lagged all along: the primary answered"
