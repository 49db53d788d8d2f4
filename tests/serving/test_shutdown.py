"""SIGTERM under load (app/serving/server.py, app/api/perimeter.py): the port closes at once, every request
already accepted gets its whole answer, then the pools close; past ENGRAM_SHUTDOWN_GRACE_S a request still
running is answered 503 ``unavailable`` rather than cut.

The slow requests are lists held behind a table lock the test takes and releases, so which requests are in
flight when the signal comes is known rather than hoped for.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from tests.reliability.test_faults import refusal_problem
from tests.support.live import Database, LiveServer, live_server
from tests.support.scratch import scratch

pytestmark = pytest.mark.slow

IN_FLIGHT = 4
BOUND_S = 60.0  # any wait in these tests; a hang fails them


@contextlib.contextmanager
def serve_on(database: Database, name: str, *, grace_s: float) -> Iterator[LiveServer]:
    env = {
        "ENGRAM_DATABASE_URL": database.url,
        "ENGRAM_SHUTDOWN_GRACE_S": str(grace_s),
    }
    with scratch(name) as tmp, live_server(tmp, env=env) as server:
        yield server


@contextlib.contextmanager
def items_locked(database: Database) -> Iterator[None]:
    """engram_items locked (ACCESS EXCLUSIVE) by a psql session of the test's, until the block ends."""
    holder = subprocess.Popen(
        [str(database.server.bin_path / "psql"), database.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert holder.stdin is not None
    holder.stdin.write(b"BEGIN;\nLOCK TABLE engram_items IN ACCESS EXCLUSIVE MODE;\n")
    holder.stdin.flush()
    try:
        until(lambda: _count(database, "mode = 'AccessExclusiveLock' AND granted", table="pg_locks") > 0, "the lock")
        yield
    finally:
        holder.stdin.write(b"COMMIT;\n")
        holder.stdin.close()
        holder.wait(timeout=BOUND_S)


def _count(database: Database, condition: str, *, table: str = "pg_stat_activity") -> int:
    out = database.psql(f"SELECT count(*) FROM {table} WHERE {condition};")
    return next(int(line) for line in out.split() if line.strip().isdigit())


def waiting_requests(database: Database) -> int:
    """Sessions of the service running a list (app/engine/postgres/queries/listing.py) that wait on the lock;
    its background workers may wait there too."""
    return _count(database, "application_name = 'engram' AND wait_event_type = 'Lock' AND query LIKE '%AS ceiling%'")


def sessions(database: Database) -> int:
    return _count(database, "application_name = 'engram'")


def until(condition: object, what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not reached within the bound: {what}"
        time.sleep(0.05)


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


async def test_sigterm_finishes_every_accepted_request_then_closes_the_pools(database: Database) -> None:
    with serve_on(database, "shutdown-finish", grace_s=BOUND_S) as server:
        port = int(server.base_url.rsplit(":", 1)[1])
        async with server.client(timeout=BOUND_S) as client:
            stored = await client.post("/v1/store", json={"type": "document", "body": {"text": "kept"}})
            assert stored.status_code == 201
            with items_locked(database):
                requests = [asyncio.create_task(client.post("/v1/list", json={"limit": 5})) for _ in range(IN_FLIGHT)]
                await asyncio.to_thread(until, lambda: waiting_requests(database) == IN_FLIGHT, "requests in flight")
                server.process.send_signal(signal.SIGTERM)
                await asyncio.to_thread(until, lambda: refused(port), "new connections refused")
                assert not any(request.done() for request in requests)
            answers = await asyncio.wait_for(asyncio.gather(*requests), BOUND_S)
        for answer in answers:
            assert answer.status_code == 200, answer.text
            assert [item["id"] for item in answer.json()["items"]] == [stored.json()["id"]]
        assert server.process.wait(timeout=BOUND_S) == 0
        assert sessions(database) == 0, "the pools were left open"
        logs = server.logs()
        assert logs.count("POST /v1/list 200") == IN_FLIGHT
        assert "Traceback" not in logs and "timeout graceful shutdown exceeded" not in logs


async def test_past_the_grace_a_request_still_running_is_a_503_and_the_service_stops(database: Database) -> None:
    with serve_on(database, "shutdown-grace", grace_s=1) as server:
        async with server.client(timeout=BOUND_S) as client:
            with items_locked(database):
                requests = [asyncio.create_task(client.post("/v1/list", json={"limit": 5})) for _ in range(IN_FLIGHT)]
                await asyncio.to_thread(until, lambda: waiting_requests(database) == IN_FLIGHT, "requests in flight")
                server.process.send_signal(signal.SIGTERM)
                answers = await asyncio.wait_for(asyncio.gather(*requests), BOUND_S)
                assert server.process.wait(timeout=BOUND_S) == 0
        for answer in answers:
            assert refusal_problem(answer) is None, refusal_problem(answer)
            assert answer.json()["message"] == "unavailable: the service is stopping, retry shortly"
        logs = server.logs()
        assert "Traceback" not in logs and "Exception in ASGI application" not in logs
        assert logs.count("POST /v1/list 503") == IN_FLIGHT
