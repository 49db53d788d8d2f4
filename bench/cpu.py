"""Where a run's cores went: CPU seconds by side (the harness, the services, PostgreSQL), read from /proc.

On 2 shared cores a request's latency says little of what it cost, and a write's rate says nothing
of which side its time went to: these say both.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import asyncpg


def process_cpu_s(pid: int) -> float:
    """CPU seconds the process has run so far, every live thread's, from the scheduler's nanosecond counts."""
    total_ns = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total_ns += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended between the listing and the read
    return total_ns / 1e9


def _parent(pid: int) -> int | None:
    """A process's parent, from /proc (its name, in parentheses, may hold spaces: the fields follow the last)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _cpu_s(pid: int) -> float:
    try:
        return process_cpu_s(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0  # gone since it was listed


class CpuClock:
    """CPU seconds spent so far by the harness (this process: the clients, and LangGraph's store with its
    encoder), the services (their processes) and PostgreSQL (its postmaster and every process it started):
    where a turn's cores went."""

    def __init__(self, postmaster: int, services: Sequence[int] = ()) -> None:
        self._postmaster = postmaster
        self._services = list(services)

    def postgres_s(self) -> float:
        pids = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
        return sum(_cpu_s(pid) for pid in pids if pid == self._postmaster or _parent(pid) == self._postmaster)

    def read(self) -> dict[str, float]:
        return {
            "harness": time.process_time(),
            "service": sum(_cpu_s(pid) for pid in self._services),
            "postgres": self.postgres_s(),
        }

    def since(self, before: dict[str, float]) -> dict[str, float]:
        now = self.read()
        return {side: now[side] - before[side] for side in now}


async def postmaster_pid(connection: asyncpg.Connection) -> int:
    """The PostgreSQL server's own process: the parent of ``connection``'s backend."""
    parent = _parent(int(await connection.fetchval("SELECT pg_backend_pid()")))
    if parent is None:
        raise RuntimeError("the database's backend is not a process of this machine")
    return parent
