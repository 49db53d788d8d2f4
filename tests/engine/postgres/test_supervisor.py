"""The embedded PostgreSQL killed under a running ``engram serve`` (app/engine/postgres/supervisor.py): health
turns down, requests are 503 ``unavailable``, the service starts the database again and serves on its own, and
every write acknowledged before the kill is there."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from app.engine.postgres.supervisor import Postmaster, postmaster_state
from tests.reliability.test_faults import PHASE_BOUND_S, REQUEST_BOUND_S, Traffic, refusal_problem, until, writer
from tests.support.live import fingerprint, learning, live_server
from tests.support.processes import stop
from tests.support.scratch import scratch

WRITERS = 3


def _pid_file(pgdata: Path, pid: int, started: float) -> None:
    pgdata.mkdir(parents=True, exist_ok=True)
    lines = [str(pid), str(pgdata), str(int(started)), "5432", str(pgdata), "", "  1  2", "ready"]
    (pgdata / "postmaster.pid").write_text("\n".join(lines) + "\n")


def test_the_state_of_a_postmaster_from_its_pid_file(tmp_path: Path) -> None:
    pgdata = tmp_path / "pg"
    assert postmaster_state(pgdata) is Postmaster.GONE  # no file: stopped cleanly
    me = psutil.Process()
    _pid_file(pgdata, me.pid, me.create_time())
    assert postmaster_state(pgdata) is Postmaster.RUNNING
    _pid_file(pgdata, me.pid, me.create_time() - 3600)  # the pid now names another process
    assert postmaster_state(pgdata) is Postmaster.GONE
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _pid_file(pgdata, int(gone.stdout), me.create_time())
    assert postmaster_state(pgdata) is Postmaster.GONE
    (pgdata / "postmaster.pid").write_text(f"{me.pid}\n")  # half written by a starting server
    assert postmaster_state(pgdata) is Postmaster.RUNNING


def test_a_dead_postmaster_not_yet_reaped_is_exiting(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])  # exits; not waited for, so a zombie
    try:
        process = psutil.Process(child.pid)
        deadline = time.monotonic() + REQUEST_BOUND_S
        while process.status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
        _pid_file(tmp_path / "pg", child.pid, process.create_time())
        assert postmaster_state(tmp_path / "pg") is Postmaster.EXITING
    finally:
        child.wait()


@pytest.mark.slow
async def test_a_killed_embedded_database_is_started_again_and_loses_no_acknowledged_write() -> None:
    with scratch("supervised") as tmp, live_server(tmp) as server:
        pgdata = tmp / "data" / "pg"
        traffic = Traffic()
        async with server.client(timeout=REQUEST_BOUND_S) as client:
            tasks = [asyncio.create_task(writer(client, traffic, n)) for n in range(WRITERS)]
            try:
                await until(lambda: len(traffic.acked) >= 2 * WRITERS, "writes before the kill")
                postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
                os.kill(postmaster, signal.SIGKILL)
                acked_before_kill = [ids for ids in traffic.acked]

                # Down, and said so: health, and a read answered with the retryable envelope.
                async def health_state() -> str:
                    return str((await client.get("/v1/health")).json()["state"])

                async def refused_read() -> None:
                    while True:  # wait_for bounds it
                        response = await client.post("/v1/list", json={"limit": 1})
                        if response.status_code != 200:
                            assert refusal_problem(response) is None, refusal_problem(response)
                            return
                        await asyncio.sleep(0.02)

                async def down() -> None:
                    while True:  # wait_for bounds it
                        if await health_state() == "down":
                            return
                        await asyncio.sleep(0.02)

                await asyncio.wait_for(asyncio.gather(down(), refused_read()), PHASE_BOUND_S)
                live = await client.get("/v1/health/live")
                assert live.status_code == 200, "liveness does not depend on the database"

                # Back by itself: health ok again, and writes acknowledged after the restart.
                async def ok() -> None:
                    while True:  # wait_for bounds it
                        if await health_state() == "ok":
                            return
                        await asyncio.sleep(0.1)

                await asyncio.wait_for(ok(), PHASE_BOUND_S)
                acked_at_restart = len(traffic.acked)
                await until(lambda: len(traffic.acked) >= acked_at_restart + 2 * WRITERS, "writes after the restart")
            finally:
                traffic.stop.set()
                await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), PHASE_BOUND_S)
            for task in tasks:
                if task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
            assert not traffic.failures, traffic.failures

            restarted = int((pgdata / "postmaster.pid").read_text().split()[0])
            assert restarted != postmaster and psutil.pid_exists(restarted)
            every_acked = [item_id for ids in traffic.acked for item_id in ids]
            assert set(every_acked) >= {item_id for ids in acked_before_kill for item_id in ids}
            held: set[str] = set()
            for start in range(0, len(every_acked), 200):
                got = await client.post("/v1/get", json={"ids": every_acked[start : start + 200]})
                assert got.status_code == 200, got.text
                held |= {hit["id"] for hit in got.json()["hits"]}
            assert held == set(every_acked), "an acknowledged write is missing"
            for ids in traffic.refused:
                got = await client.post("/v1/get", json={"ids": ids})
                assert len(got.json()["hits"]) in (0, len(ids)), "a refused batch is half-written"
            stored_after = await client.post("/v1/store", json=learning("stored once it was back"))
            assert stored_after.json()["id"] == fingerprint(learning("stored once it was back"))
        stop(server.process, grace_s=PHASE_BOUND_S)
        assert server.process.returncode == 0
        assert not (pgdata / "postmaster.pid").exists(), "the restarted server outlived the service"
        logs = server.logs()
        assert "the embedded PostgreSQL stopped running: starting it again" in logs
        assert "the embedded PostgreSQL runs again" in logs
        assert "Traceback" not in logs and "XDG_RUNTIME_DIR" not in logs
