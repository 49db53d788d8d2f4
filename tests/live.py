"""Run the real ``engram serve`` as a subprocess on a free loopback port, for tests that need the network path."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ENGRAM = str(Path(sys.executable).with_name("engram"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class LiveServer:
    process: subprocess.Popen[str]
    base_url: str
    log_path: Path

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, as an orchestrator would; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_server(data_dir: Path, env: dict[str, str] | None = None, timeout: float = 90) -> LiveServer:
    port = free_port()
    log_path = data_dir.parent / f"engram-{port}.log"
    environment = {**os.environ, "ENGRAM_DATA_DIR": str(data_dir), **(env or {})}
    environment.pop("ENGRAM_DATABASE_URL", None) if "ENGRAM_DATABASE_URL" not in (env or {}) else None
    log = log_path.open("w")
    process = subprocess.Popen(
        [ENGRAM, "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    server = LiveServer(process, f"http://127.0.0.1:{port}", log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"engram serve exited with {process.returncode}:\n{server.log()}")
        try:
            if httpx.get(f"{server.base_url}/v1/health", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"engram serve did not become healthy in {timeout}s:\n{server.log()}")


@contextmanager
def live_server(data_dir: Path, env: dict[str, str] | None = None) -> Iterator[LiveServer]:
    server = start_server(data_dir, env)
    try:
        yield server
    finally:
        server.stop()
