"""Each side's CPU is read where it was spent (bench/cpu.py): the harness's own, a service's, PostgreSQL's."""

from __future__ import annotations

import asyncio
import os
import sys

import asyncpg

from app.engine.postgres.schema import driver_url
from bench.cpu import CpuClock, postmaster_pid, process_cpu_s
from tests.support.cpu import spend_cpu

# A stand-in service: a third of a second of CPU, a line to say so, then idle until stopped.
BUSY_SERVICE = (
    "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\n"
    "print('spun', flush=True)\ntime.sleep(60)\n"
)


async def test_a_query_is_postgres_time_a_busy_service_the_services_and_this_process_the_harness(
    database_url: str,
) -> None:
    connection = await asyncpg.connect(driver_url(database_url))
    service = await asyncio.create_subprocess_exec(sys.executable, "-c", BUSY_SERVICE, stdout=asyncio.subprocess.PIPE)
    try:
        clock = CpuClock(await postmaster_pid(connection), [service.pid])
        before = clock.read()
        await connection.fetchval("SELECT count(*) FROM generate_series(1, 3000000)")
        spend_cpu(0.1)
        assert service.stdout is not None
        assert await asyncio.wait_for(service.stdout.readline(), timeout=30) == b"spun\n"
        spent = clock.since(before)
    finally:
        service.kill()
        await service.wait()
        await connection.close()
    assert sorted(spent) == ["harness", "postgres", "service"]
    assert spent["postgres"] > 0.05  # counting three million rows is the backend's work, not the harness's
    assert 0.1 <= spent["harness"] < 0.1 + spent["postgres"]
    assert spent["service"] >= 0.25


def test_a_processs_cpu_counts_its_threads() -> None:
    before = process_cpu_s(os.getpid())
    spend_cpu(0.05)
    assert process_cpu_s(os.getpid()) - before >= 0.04
