"""Processes the tests start: a free port, the ``engram`` command's environment, a server and its readiness."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

ENGRAM = str(Path(sys.executable).with_name("engram"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def engram_env(**settings: str) -> dict[str, str]:
    """The environment of an ``engram`` subprocess: this one's, minus ENGRAM_ settings, plus ``settings``
    (``database_url="..."`` is ``ENGRAM_DATABASE_URL``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update({f"ENGRAM_{k.upper()}": v for k, v in settings.items()})
    return env


def wait_until_answering(
    url: str,
    process: subprocess.Popen[Any],
    *,
    what: str,
    timeout_s: float,
    output: Callable[[], str] = str,
    interval_s: float = 0.2,
) -> None:
    """Poll ``url`` until it answers 200; fail with ``output()`` once ``process`` exits or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}:\n{output()}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(interval_s)
    raise RuntimeError(f"{what} did not answer {url} in {timeout_s:.0f} s:\n{output()}")


def stop(process: subprocess.Popen[Any], *, grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``grace_s``."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def log_tail(path: Path, chars: int = 4_000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


@contextlib.contextmanager
def started(
    command: list[str],
    *,
    ready_url: str,
    log_path: Path,
    what: str,
    timeout_s: float = 90.0,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``command`` (its output to ``log_path``: a pipe no one reads would block it once full), wait
    until ``ready_url`` answers 200, and stop it afterwards."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    try:
        wait_until_answering(ready_url, process, what=what, timeout_s=timeout_s, output=lambda: log_tail(log_path))
        yield process
    finally:
        stop(process)
