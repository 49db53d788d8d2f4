"""Resident memory of the service's process and of PostgreSQL's, read from /proc (Linux).

PostgreSQL is many processes (the postmaster and its backends, checkpointer, walwriter...) sharing
shared_buffers: each one's RSS counts every shared page it has touched, so their sum counts a page
once per process. The sum of PSS (proportional set size: a shared page split between the processes
that map it) is what they hold together; both are reported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PROC = Path("/proc")


def _kib(path: Path, field: str) -> int | None:
    """A ``field:  N kB`` line of a /proc file, in KiB; None when the process or the line is gone."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def rss_kib(pid: int) -> int | None:
    return _kib(PROC / str(pid) / "status", "VmRSS")


def peak_rss_kib(pid: int) -> int | None:
    """The most the process has held resident since it started (its high-water mark)."""
    return _kib(PROC / str(pid) / "status", "VmHWM")


def pss_kib(pid: int) -> int | None:
    return _kib(PROC / str(pid) / "smaps_rollup", "Pss")


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (PostgreSQL's backends are the postmaster's children)."""
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def postmaster_pid(pgdata: Path) -> int:
    """The PostgreSQL server of ``pgdata``: the first line of its postmaster.pid."""
    return int((pgdata / "postmaster.pid").read_text().split()[0])


def _mib(kib: int) -> float:
    return round(kib / 1024, 1)


def resident(service_pid: int, pgdata: Path) -> dict[str, Any]:
    """The service's RSS now and at its peak, PostgreSQL's summed over its processes (RSS and PSS), in MiB,
    and how many processes."""
    postmaster = postmaster_pid(pgdata)
    server = [postmaster, *children(postmaster)]
    rss = [r for r in map(rss_kib, server) if r is not None]
    pss = [p for p in map(pss_kib, server) if p is not None]
    return {
        "service_rss_mib": _mib(rss_kib(service_pid) or 0),
        "service_peak_rss_mib": _mib(peak_rss_kib(service_pid) or 0),
        "postgres_rss_mib": _mib(sum(rss)),
        "postgres_pss_mib": _mib(sum(pss)),
        "postgres_processes": len(rss),
    }
