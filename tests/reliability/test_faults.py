"""The database stops under traffic and comes back: typed refusals, no half-writes, recovery without a restart."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import psutil
import pytest

from tests.support.live import Database, LiveServer, fingerprint, learning, list_everything, live_server
from tests.support.scratch import scratch

WRITERS = 4
BATCH = 5
# Bounds, not timings: a request that hangs longer than this fails the test.
REQUEST_BOUND_S = 30.0
PHASE_BOUND_S = 90.0


@dataclass
class Traffic:
    """What the clients saw while the database came and went."""

    acked: list[list[str]] = field(default_factory=list)  # ids of batches answered 200
    refused: list[list[str]] = field(default_factory=list)  # ids of batches answered 503 unavailable
    reads_refused: int = 0
    failures: list[str] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    serial: Iterator[int] = field(default_factory=itertools.count)


def refusal_problem(response: httpx.Response) -> str | None:
    """None when the response is the documented transient refusal, else what is wrong with it."""
    if response.status_code != 503:
        return f"status {response.status_code}: {response.text}"
    body = response.json()
    if body.get("code") != "unavailable" or body.get("retryable") is not True:
        return f"503 without the unavailable envelope: {response.text}"
    if not response.headers.get("Retry-After", "").isdigit():
        return "503 without Retry-After"
    if body["request_id"] != response.headers.get("X-Request-ID"):
        return "request_id differs from X-Request-ID"
    return None


async def writer(client: httpx.AsyncClient, traffic: Traffic, task: int) -> None:
    while not traffic.stop.is_set():
        batch = next(traffic.serial)
        items = [learning(f"fault batch {batch} item {n}", tags=[f"batch-{batch}"]) for n in range(BATCH)]
        ids = [fingerprint(item) for item in items]
        try:
            response = await client.post("/v1/store_many", json={"items": items})
        except httpx.TransportError as error:
            traffic.failures.append(f"writer {task}: {type(error).__name__}")
            return
        if response.status_code == 200:
            assert [r["id"] for r in response.json()["receipts"]] == ids
            traffic.acked.append(ids)
        elif (problem := refusal_problem(response)) is None:
            traffic.refused.append(ids)
        else:
            traffic.failures.append(f"writer {task}: {problem}")
        await asyncio.sleep(0.05)


async def reader(client: httpx.AsyncClient, traffic: Traffic) -> None:
    requests: list[tuple[str, dict[str, Any]]] = [
        ("/v1/fetch", {"query": "fault batch", "mode": "hybrid", "limit": 5}),
        ("/v1/list", {"limit": 5}),
        ("/v1/get", {"ids": ["0" * 40]}),
        ("/v1/explore", {"facet": "tag", "limit": 5}),
    ]
    for path, body in itertools.cycle(requests):
        if traffic.stop.is_set():
            return
        response = await client.post(path, json=body)
        if response.status_code != 200:
            if (problem := refusal_problem(response)) is None:
                traffic.reads_refused += 1
            else:
                traffic.failures.append(f"reader {path}: {problem}")
        await asyncio.sleep(0.05)


async def until(condition: Any, what: str) -> None:
    async def poll() -> None:
        while True:  # until the condition holds; wait_for bounds it
            if condition():
                return
            await asyncio.sleep(0.05)

    try:
        await asyncio.wait_for(poll(), timeout=PHASE_BOUND_S)
    except TimeoutError:
        raise AssertionError(f"not reached within the bound: {what}") from None


@pytest.fixture(scope="module")
def served(database: Database) -> Iterator[LiveServer]:
    env = {
        "ENGRAM_DATABASE_URL": database.url,
        "ENGRAM_CONNECT_TIMEOUT_S": "2",
        "ENGRAM_STATEMENT_TIMEOUT_MS": "5000",
    }
    with scratch("faults") as tmp, live_server(tmp, env=env) as server:
        yield server


@pytest.mark.slow
async def test_database_outage_under_traffic(served: LiveServer, database: Database) -> None:
    traffic = Traffic()
    async with served.client(timeout=REQUEST_BOUND_S) as client:
        tasks = [asyncio.create_task(writer(client, traffic, n)) for n in range(WRITERS)]
        tasks.append(asyncio.create_task(reader(client, traffic)))
        try:
            await until(lambda: len(traffic.acked) >= 2 * WRITERS, "writes before the outage")

            await asyncio.to_thread(database.stop)
            acked_before = len(traffic.acked)
            refused_at_stop = len(traffic.refused)
            await until(lambda: len(traffic.refused) >= refused_at_stop + 2 * WRITERS, "refusals while down")
            health = await client.get("/v1/health")
            assert health.status_code == 503
            body = health.json()
            assert body["state"] == "down" and body["reason"], body
            assert "code" not in body, "health is never an error envelope"
            for path, request in [
                ("/v1/store", learning("written while the database is down")),
                ("/v1/fetch", {"query": "anything", "mode": "keyword", "limit": 3}),
                ("/v1/list", {"limit": 3}),
            ]:
                problem = refusal_problem(await client.post(path, json=request))
                assert problem is None, f"{path}: {problem}"

            await asyncio.to_thread(database.start)
            acked_at_start = len(traffic.acked)
            # No restart of the service: the pool reconnects on its own.
            await until(lambda: len(traffic.acked) >= acked_at_start + 2 * WRITERS, "recovery after restart")
            assert (await client.get("/v1/health")).json() == {"state": "ok"}
        finally:
            traffic.stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=PHASE_BOUND_S)
        for task in tasks:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

        assert not traffic.failures, traffic.failures
        assert acked_before >= 2 * WRITERS and traffic.refused and traffic.reads_refused

        present = {item["id"] for item in await list_everything(client)}
        for ids in traffic.acked:
            assert set(ids) <= present, "an acknowledged write is missing"
        for ids in traffic.refused:
            held = set(ids) & present
            assert held in (set(), set(ids)), f"a refused batch is half-written: {len(held)} of {len(ids)}"


def _postgres_processes(database: Database) -> list[psutil.Process]:
    postmaster = psutil.Process(database.server.get_pid())
    return [postmaster, *postmaster.children(recursive=True)]


@pytest.mark.slow
async def test_a_hung_database_is_a_bounded_503(served: LiveServer, database: Database) -> None:
    """A database that accepts nothing and answers nothing (every process stopped) still gets a typed answer."""
    async with served.client(timeout=REQUEST_BOUND_S) as client:
        stored = await client.post("/v1/store", json=learning("stored before the hang"))
        assert stored.status_code in (200, 201)
        frozen = _postgres_processes(database)
        for process in frozen:
            process.suspend()
        try:
            # The client's timeout is the bound: a request that hangs fails the test.
            requests = [
                ("/v1/list", {"limit": 3}),
                ("/v1/store", learning("written while the database hangs")),
                ("/v1/fetch", {"query": "hang", "mode": "keyword", "limit": 3}),
            ]
            *answers, health = await asyncio.gather(
                *(client.post(path, json=body) for path, body in requests), client.get("/v1/health")
            )
            for (path, _), response in zip(requests, answers, strict=True):
                assert refusal_problem(response) is None, f"{path}: {refusal_problem(response)}"
            assert health.status_code == 503 and health.json()["state"] == "down"
        finally:
            for process in frozen:
                process.resume()

        async def recovered() -> None:
            while True:  # wait_for bounds it
                if (await client.post("/v1/list", json={"limit": 1})).status_code == 200:
                    return
                await asyncio.sleep(0.1)

        await asyncio.wait_for(recovered(), PHASE_BOUND_S)
        got = await client.post("/v1/get", json={"ids": [stored.json()["id"]]})
        assert len(got.json()["hits"]) == 1


@pytest.mark.slow
async def test_a_statement_over_the_timeout_is_a_503(served: LiveServer, database: Database) -> None:
    """A statement stuck behind a lock is cancelled by the configured statement_timeout, not waited on forever."""
    holder = await asyncio.create_subprocess_exec(
        str(database.server.bin_path / "psql"),
        database.url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert holder.stdin is not None
    holder.stdin.write(b"BEGIN; LOCK TABLE engram_items IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(20); COMMIT;\n")
    await holder.stdin.drain()
    holder.stdin.close()
    try:
        async with served.client(timeout=REQUEST_BOUND_S) as client:

            async def locked() -> None:
                while True:  # wait_for bounds it: until the lock is held
                    held = await asyncio.to_thread(
                        database.psql, "SELECT count(*) FROM pg_locks WHERE mode = 'AccessExclusiveLock' AND granted;"
                    )
                    if any(line.strip().isdigit() and int(line) > 0 for line in held.splitlines()):
                        return
                    await asyncio.sleep(0.1)

            await asyncio.wait_for(locked(), PHASE_BOUND_S)
            response = await client.post("/v1/list", json={"limit": 3})
            assert refusal_problem(response) is None, response.text
    finally:
        holder.kill()
        await holder.wait()
        # Its backend would sleep on with the lock; end it now.
        await asyncio.to_thread(
            database.psql,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE query LIKE '%pg_sleep(20)%' AND pid <> pg_backend_pid();",
        )


@pytest.mark.slow
async def test_the_outage_logs_no_trace_and_no_sql(served: LiveServer) -> None:
    """The faults above (tests run in file order) leave log lines a person can read: no stack trace, no SQL."""
    logs = served.logs()
    assert "Traceback" not in logs
    assert "INSERT INTO" not in logs and "SELECT " not in logs
