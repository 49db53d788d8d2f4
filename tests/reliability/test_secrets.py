"""No credential leaves the service: not in a response, not in a log line. CORS is off unless configured.

The database really checks the password here (scram for our role), so the DSN
the server holds is a live credential, and the test drives every route, every
kind of error, a database outage and a failed start while keeping every byte
the server sent or logged.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.support.live import Database, LiveServer, document, learning, live_server, run_engram_in
from tests.support.scratch import scratch

pytestmark = pytest.mark.slow

ROLE = "engram_app"
ORIGIN = "https://agents.example"


@dataclass
class Secrets:
    password: str
    dsn: str
    keys: list[str]

    def all(self) -> list[str]:
        asyncpg_dsn = self.dsn.replace("postgresql://", "postgresql+asyncpg://", 1)
        return [self.password, self.dsn, asyncpg_dsn, *self.keys]


@pytest.fixture(scope="module")
def credentials(database: Database) -> Secrets:
    password = "pw-" + secrets.token_hex(16)
    database.psql(f"CREATE ROLE {ROLE} LOGIN SUPERUSER PASSWORD '{password}';")
    # Our role must prove its password over the socket; the library's own role keeps trust.
    hba = database.server.pgdata / "pg_hba.conf"
    hba.write_text(f"local all {ROLE} scram-sha-256\n" + hba.read_text())
    database.psql("SELECT pg_reload_conf();")
    url = make_url(database.url).set(username=ROLE, password=password)
    dsn = url.render_as_string(hide_password=False)
    return Secrets(password, dsn, ["key-" + secrets.token_hex(16), "key-" + secrets.token_hex(16)])


@pytest.fixture(scope="module")
def guarded(credentials: Secrets) -> Iterator[LiveServer]:
    env = {
        "ENGRAM_DATABASE_URL": credentials.dsn,
        "ENGRAM_API_KEYS": ",".join(credentials.keys),
        "ENGRAM_CORS_ORIGINS": ORIGIN,
        "ENGRAM_CONNECT_TIMEOUT_S": "2",
        "ENGRAM_LOG_LEVEL": "debug",  # the most a deployment could log
    }
    with scratch("secrets") as tmp, live_server(tmp, env=env, api_key=credentials.keys[1]) as server:
        yield server


def assert_clean(text: str, credentials: Secrets, where: str) -> None:
    for secret in credentials.all():
        assert secret not in text, f"a credential appears in {where}"


async def drive_every_route(client: httpx.AsyncClient) -> None:
    stored = await client.post("/v1/store", json=learning("the deploy key rotates monthly", tags=["ops"]))
    assert stored.status_code == 201, stored.text
    item_id = stored.json()["id"]
    requests = [
        ("GET", "/v1/health", None),
        ("GET", "/v1/engine", None),
        ("GET", "/v1/errors", None),
        ("GET", "/openapi.json", None),
        ("GET", "/docs", None),
        ("POST", "/v1/store_many", {"items": [document("password rotation policy"), document("x\x00")]}),
        ("POST", "/v1/store_many", {"items": [document("password rotation policy")]}),
        ("POST", "/v1/fetch", {"query": "password key", "mode": "hybrid", "limit": 5}),
        ("POST", "/v1/fetch", {"query": "password", "mode": "keyword", "limit": 5, "cursor": "forged.cursor"}),
        ("POST", "/v1/recall", {"question": "how often does the key rotate?", "limit": 3}),
        ("POST", "/v1/list", {"limit": 5}),
        ("POST", "/v1/get", {"ids": [item_id]}),
        ("POST", "/v1/explore", {"facet": "tag", "limit": 5}),
        ("POST", "/v1/forget_within", {"ids": [item_id], "reach": {"at": "team:x"}}),
        ("POST", "/v1/forget", {"ids": [item_id]}),
        ("POST", "/v1/fetch", {"query": "x", "mode": "semantic", "limit": 1}),
        ("POST", "/v1/store", {"type": "learning"}),
        ("PUT", "/v1/store", {}),
        ("GET", "/v1/nothing-here", None),
        ("POST", "/v1/store", {"type": "document", "body": {"text": "x" * (9 * 1024 * 1024)}}),
    ]
    for method, path, body in requests:
        response = await client.request(method, path, json=body)
        assert response.status_code < 500, f"{method} {path}: {response.text[:300]}"


@pytest.mark.slow
async def test_cors_is_off_by_default(live: LiveServer) -> None:
    async with live.client() as client:
        preflight = await client.options(
            "/v1/store", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"}
        )
        actual = await client.get("/v1/engine", headers={"Origin": ORIGIN})
    assert actual.status_code == 200
    for response in (preflight, actual):
        assert not any(h.lower().startswith("access-control-") for h in response.headers)


@pytest.mark.slow
async def test_cors_allows_only_the_configured_origins(guarded: LiveServer) -> None:
    # A browser's preflight carries no credential: it must not meet the auth perimeter.
    async with httpx.AsyncClient(base_url=guarded.base_url) as anonymous:
        preflight = await anonymous.options(
            "/v1/store",
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type",
            },
        )
        assert preflight.status_code == 200, preflight.text
        assert preflight.headers["Access-Control-Allow-Origin"] == ORIGIN
        assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
        other = await anonymous.options(
            "/v1/store", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
        )
        assert "Access-Control-Allow-Origin" not in other.headers
        # Without a key, anything but a preflight still meets the perimeter.
        assert (await anonymous.post("/v1/list", json={"limit": 1}, headers={"Origin": ORIGIN})).status_code == 401
    async with guarded.client() as client:
        actual = await client.post("/v1/list", json={"limit": 1}, headers={"Origin": ORIGIN})
        assert actual.status_code == 200
        assert actual.headers["Access-Control-Allow-Origin"] == ORIGIN
        assert "x-request-id" in actual.headers["Access-Control-Expose-Headers"].lower()
        foreign = await client.post("/v1/list", json={"limit": 1}, headers={"Origin": "https://evil.example"})
        assert "Access-Control-Allow-Origin" not in foreign.headers


@pytest.mark.slow
async def test_no_credential_in_any_response_or_log_line(
    guarded: LiveServer, credentials: Secrets, database: Database
) -> None:
    async with guarded.client(record=True) as client:
        await drive_every_route(client)
        # Wrong, partial and misplaced credentials.
        for authorization in ["", "Bearer", f"Bearer {credentials.keys[0][:-1]}", f"Basic {credentials.keys[0]}"]:
            response = await client.get("/v1/engine", headers={"Authorization": authorization})
            assert response.status_code == 401
        # The database goes away and comes back: the messages of that path too.
        await asyncio.to_thread(database.stop)
        try:
            down = await client.get("/v1/health")
            assert down.status_code == 503 and down.json()["state"] == "down"
            refused = await client.post("/v1/store", json=document("while down"))
            assert refused.status_code == 503
        finally:
            await asyncio.to_thread(database.start)
        for _ in range(100):
            if (await client.get("/v1/health")).status_code == 200:
                break
            await asyncio.sleep(0.1)
        await drive_every_route(client)

    # Last user of the server (tests run in file order): stop it so its log is complete.
    guarded.process.terminate()
    guarded.process.wait(timeout=30)
    assert len(guarded.responses) > 40, "the responses were recorded"
    for response in guarded.responses:
        assert_clean(response, credentials, "a response")
    logs = guarded.logs()
    assert "GET /v1/health" in logs or "Uvicorn running" in logs, "the log was captured"
    assert_clean(logs, credentials, "the server log")


@pytest.mark.slow
def test_migrate_and_a_failed_start_do_not_print_the_dsn(credentials: Secrets) -> None:
    with scratch("secrets-cli") as tmp:
        migrated = run_engram_in(tmp, ["migrate"], {"ENGRAM_DATABASE_URL": credentials.dsn})
        assert migrated.returncode == 0, migrated.stderr
        assert_clean(migrated.stdout + migrated.stderr, credentials, "engram migrate output")

        wrong = Secrets("pw-" + secrets.token_hex(16), "", [])
        wrong.dsn = credentials.dsn.replace(credentials.password, wrong.password)
        with (
            pytest.raises(RuntimeError) as failed,
            live_server(tmp / "wrong", env={"ENGRAM_DATABASE_URL": wrong.dsn}, api_key=None),
        ):
            pass
        assert "exited" in str(failed.value), "the service refuses to start on a rejected password"
        assert "configuration error: the database refused the login" in str(failed.value), "says what is wrong"
        assert_clean(str(failed.value), wrong, "the output of a failed start")
        assert_clean(str(failed.value), credentials, "the output of a failed start")
