"""What a run stands on: a fresh embedded PostgreSQL and a live ``engram serve`` against it."""

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
from typing import Any

import httpx
from sqlalchemy.engine import make_url

from app.engine.postgres.embedded import start_embedded
from app.settings import Settings

ENGRAM_BIN = Path(sys.executable).with_name("engram")
# Where bench/ is importable from (a service started as ``python -m bench...``).
REPO = Path(__file__).resolve().parents[1]


@dataclass
class Database:
    """The embedded server and the URL of each database on it."""

    server: Any
    base_url: str

    def url(self, database: str) -> str:
        return make_url(self.base_url).set(database=database).render_as_string(hide_password=False)

    def create(self, database: str) -> str:
        self.server.psql(f"CREATE DATABASE {database};")
        self.server.psql(f"\\c {database}\nCREATE EXTENSION IF NOT EXISTS vector;")
        return self.url(database)

    def setting(self, name: str) -> str:
        out = self.server.psql(f"SHOW {name};")
        lines = [line.strip() for line in out.splitlines() if line.strip()]
        return lines[2] if len(lines) > 2 else "?"


@contextmanager
def embedded_postgres(directory: Path) -> Iterator[Database]:
    """A PostgreSQL of its own in ``directory``, set up as the service sets up its embedded one (its shared
    buffers as the run's ``ENGRAM_EMBEDDED_SHARED_BUFFERS`` says, default auto); stopped on exit."""
    shared_buffers = SERVICE_SETTINGS.get("ENGRAM_EMBEDDED_SHARED_BUFFERS", "auto")
    base_url, server = start_embedded(directory, shared_buffers=shared_buffers)
    try:
        yield Database(server=server, base_url=base_url)
    finally:
        server.cleanup()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Settings every service of a run is started with beyond the bench's own (``python -m bench --service-env``):
# a setting measured against its default in the same harness. Empty: the service's defaults.
SERVICE_SETTINGS: dict[str, str] = {}
# What the bench itself decides for each service it starts.
OWN_SETTINGS = ("ENGRAM_DATABASE_URL", "ENGRAM_DATA_DIR", "ENGRAM_EMBEDDER")


def engram_env(database_url: str, data_dir: Path, embedder: str) -> dict[str, str]:
    """The service's environment: this shell's without any ``ENGRAM_*`` setting, so that the service
    under test runs on its defaults (and ``SERVICE_SETTINGS``) but for its database, its data directory
    and ``embedder`` (the encoder the baselines are given too)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(ENGRAM_LOG_LEVEL="warning", **SERVICE_SETTINGS)
    env.update(ENGRAM_DATABASE_URL=database_url, ENGRAM_DATA_DIR=str(data_dir), ENGRAM_EMBEDDER=embedder)
    return env


def service_settings(embedder: str) -> Settings:
    """The settings a service of this run reads, as it reads them (``engram_env``'s, database aside)."""
    given = {name.removeprefix("ENGRAM_").lower(): value for name, value in SERVICE_SETTINGS.items()}
    # Read from these values alone, as engram_env leaves this shell's ENGRAM_* out: no variable is so named.
    return Settings(_env_prefix="ENGRAM_BENCH_UNSET_", **{**given, "embedder": embedder})


def engram_migrate(database_url: str, work: Path, embedder: str) -> None:
    """``engram migrate`` against ``database_url``: the schema the service (and the raw baseline) runs on."""
    env = engram_env(database_url, work / "engram-data", embedder)
    subprocess.run([str(ENGRAM_BIN), "migrate"], env=env, check=True, capture_output=True, timeout=120)


@dataclass(frozen=True)
class Served:
    """A live ``engram serve``: where it answers, and its process (whose CPU time a load run reads)."""

    base_url: str
    process: subprocess.Popen[bytes]


@contextmanager
def engram_serve(database_url: str, work: Path, embedder: str) -> Iterator[str]:
    """Migrate the database, start ``engram serve`` with ``embedder`` (an ENGRAM_EMBEDDER value) on a free
    loopback port, yield its base URL."""
    engram_migrate(database_url, work, embedder)
    with engram_process(database_url, work, embedder) as served:
        yield served.base_url


@contextmanager
def engram_process(
    database_url: str,
    work: Path,
    embedder: str,
    *,
    env: dict[str, str] | None = None,
    command: list[str] | None = None,
) -> Iterator[Served]:
    """Start a service on an already migrated ``database_url`` with ``env`` over the bench's settings, by
    ``command`` (default ``engram``; the rest of the command line is ``serve`` and its address), its output
    in ``work/engram-serve.log``; stopped with SIGTERM on exit."""
    settings = {**engram_env(database_url, work / "engram-data", embedder), **(env or {})}
    port = free_port()
    log = (work / "engram-serve.log").open("wb")
    process = subprocess.Popen(
        [*(command or [str(ENGRAM_BIN)]), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=settings,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"engram serve exited with {process.returncode}; see {work / 'engram-serve.log'}")
            try:
                if httpx.get(f"{base}/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("engram serve did not become healthy within 90 s")
            time.sleep(0.2)
        yield Served(base, process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
