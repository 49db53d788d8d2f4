"""``engram serve`` stopped by a signal while it starts (app/serving/server.py): a clean exit, no traceback,
and the embedded PostgreSQL it started stopped with it."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.support.live import serve_env, stop_postgres
from tests.support.processes import ENGRAM, free_port, stop
from tests.support.scratch import scratch

pytestmark = pytest.mark.slow

BOUND_S = 120.0  # a start and its stop; a hang fails the test


def _encoder_loading(log: Path, pgdata: Path) -> bool:
    # The line is printed before the engine opens; the encoder is loaded before the database starts.
    return "engram: embedder" in log.read_text()


def _database_starting(log: Path, pgdata: Path) -> bool:
    return (pgdata / "postmaster.pid").exists()


def _schema_migrating(log: Path, pgdata: Path) -> bool:
    # Ready on a new data directory: the schema is made next, then the pools open.
    pid_file = pgdata / "postmaster.pid"
    return pid_file.exists() and "ready" in pid_file.read_text()


def _postgres_of(pgdata: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        if process.info["name"] == "postgres" and str(pgdata) in " ".join(process.info["cmdline"] or []):
            found.append(process)
    return found


@pytest.mark.parametrize(
    ("stop_signal", "moment"),
    [
        (signal.SIGTERM, _encoder_loading),
        (signal.SIGTERM, _database_starting),
        (signal.SIGTERM, _schema_migrating),
        (signal.SIGINT, _database_starting),
    ],
    ids=["sigterm-encoder", "sigterm-database", "sigterm-migrations", "sigint-database"],
)
def test_a_stop_while_starting_exits_cleanly_and_stops_the_embedded_database(
    stop_signal: signal.Signals, moment: Callable[[Path, Path], bool]
) -> None:
    with scratch("stop-starting") as root:
        log, pgdata = root / "serve.log", root / "data" / "pg"
        process = subprocess.Popen(
            [ENGRAM, "serve", "--port", str(free_port())],
            # A service account's environment: no XDG_RUNTIME_DIR, and no warning about it either.
            env={k: v for k, v in serve_env(root / "data", {}).items() if k != "XDG_RUNTIME_DIR"},
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + BOUND_S
            while not moment(log, pgdata):
                assert process.poll() is None, log.read_text()
                assert time.monotonic() < deadline, f"the moment never came:\n{log.read_text()}"
                time.sleep(0.02)
            process.send_signal(stop_signal)
            assert process.wait(timeout=BOUND_S) == 0, log.read_text()
            output = log.read_text()
            assert "listening on" not in output, "the start finished before the signal: nothing was tested"
            assert output.rstrip().endswith("engram: stopped while starting"), output
            assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
            assert "XDG_RUNTIME_DIR" not in output and "Warning" not in output, output
            assert not (pgdata / "postmaster.pid").exists(), "the embedded PostgreSQL was left running"
            assert not _postgres_of(pgdata)
        finally:
            stop(process)
            stop_postgres(pgdata)
