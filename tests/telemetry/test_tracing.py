"""Traces from a live ``engram serve`` to an OTLP/HTTP receiver of the test's own; none without one."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from app.cli import main
from app.contract.errors import ConfigError
from app.main import create_app
from app.settings import Settings
from tests.support.live import live_server
from tests.support.otlp import CLIENT, SERVER, ReceivedSpan, otlp_receiver
from tests.support.processes import engram_env
from tests.support.scratch import REPO, scratch

ADMIN = "tracing-admin-key-5e0c2b"
SECRET_TEXT = "the cellar door code is marmalade-7731"
QUERY = "cellar door marmalade"
# A client's own trace (W3C traceparent): the service's spans join it.
CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"


def ancestors(span: ReceivedSpan, by_id: dict[str, ReceivedSpan]) -> list[ReceivedSpan]:
    chain = []
    while span.parent_span_id in by_id:
        span = by_id[span.parent_span_id]
        chain.append(span)
    return chain


@pytest.mark.slow
async def test_a_request_is_a_server_span_with_a_child_span_per_statement_and_no_text_or_secret() -> None:
    with otlp_receiver() as receiver, scratch("tracing") as tmp:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # export within a tenth of a second, not the default five
            "ENGRAM_EMBEDDER": "wordllama",
            "ENGRAM_LOG_FORMAT": "json",
        }
        with live_server(tmp, env=env, api_key=ADMIN) as server:
            async with server.client() as client:
                key_id, secret = await server.make_key("agent", "write", {"at": "team:ops"})
                held = {"authorization": f"Bearer {secret}"}
                item = {"type": "learning", "text": SECRET_TEXT, "kind": "fact", "confidence": 0.9}
                item["meta"] = {"namespace": "team:ops"}
                answers: dict[str, httpx.Response] = {
                    "store": await client.post("/v1/store", json=item, headers=held),
                    "keyword": await client.post(
                        "/v1/fetch", json={"query": QUERY, "mode": "keyword", "limit": 5}, headers=held
                    ),
                    "vector": await client.post(
                        "/v1/fetch", json={"query": QUERY, "mode": "vector", "limit": 5}, headers=held
                    ),
                    "hybrid": await client.post(
                        "/v1/fetch",
                        json={"query": QUERY, "mode": "hybrid", "limit": 5},
                        headers={**held, "traceparent": TRACEPARENT},
                    ),
                    "list": await client.post("/v1/list", json={"limit": 5}),
                }
                async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as anonymous:
                    answers["refused"] = await anonymous.post(
                        "/v1/fetch", json={"query": QUERY, "mode": "keyword", "limit": 5}
                    )
            ids = {name: answer.headers["x-request-id"] for name, answer in answers.items()}
            assert [a.status_code for a in answers.values()] == [201, 200, 200, 200, 200, 401]
            assert all(answers[mode].json()["hits"] for mode in ("keyword", "vector", "hybrid"))

            def every_request_arrived(spans: list[ReceivedSpan]) -> bool:
                stamped = {s.attributes.get("engram.request_id") for s in spans if s.kind == SERVER}
                return set(ids.values()) <= stamped

            spans = receiver.wait_for(every_request_arrived)
        logs = server.logs()
        spans = receiver.received()  # and whatever the service flushed as it stopped

    by_id = {s.span_id: s for s in spans}
    servers = {s.attributes["engram.request_id"]: s for s in spans if s.kind == SERVER}
    routes = {"store": "/v1/store", "list": "/v1/list", "refused": "/v1/fetch"}
    for name, request_id in ids.items():
        route = routes.get(name, "/v1/fetch")
        span = servers[request_id]
        assert span.name == f"POST {route}" and span.attributes["http.route"] == route, span
        assert not span.parent_span_id or name == "hybrid", "a request is the root of its own trace"
    assert all(servers[ids[name]].attributes["engram.key_id"] == key_id for name in ("store", "keyword", "hybrid"))
    assert "engram.key_id" not in servers[ids["list"]].attributes  # ENGRAM_API_KEYS's key has no id
    assert servers[ids["hybrid"]].trace_id == CLIENT_TRACE
    assert not [s for s in spans if "/v1/health" in s.name], "probes are not traced"  # live_server polled it

    statements = [s for s in spans if s.kind == CLIENT]
    for name in ("store", "keyword", "vector", "hybrid", "list"):
        server_span = servers[ids[name]]
        mine = [s for s in statements if server_span in ancestors(s, by_id)]
        assert mine, f"no statement span under {name}"
        assert all(s.attributes["db.system"] == "postgresql" and s.attributes["db.statement"] for s in mine)
        assert any("$1" in s.attributes["db.statement"] for s in mine), [s.attributes for s in mine]
    # The vector indexer moved the stored item's vector on its own connection, outside the request: untraced.
    assert not [s for s in statements if server_span_of(s, by_id) is None], "a statement outside any request"

    for span in spans:
        seen = span.everything()
        assert "db.statement.parameters" not in span.attributes
        for forbidden in (SECRET_TEXT, "marmalade", secret, ADMIN):
            assert forbidden not in seen, (forbidden, span)
    resource = spans[0].resource
    assert resource["service.name"] == "engram" and resource["service.version"]

    access = {
        line["request_id"]: line
        for line in map(json.loads, filter(str.strip, logs.splitlines()))
        if line["logger"] == "engram.access"
    }
    for request_id in ids.values():
        assert access[request_id]["trace_id"] == servers[request_id].trace_id


def server_span_of(span: ReceivedSpan, by_id: dict[str, ReceivedSpan]) -> ReceivedSpan | None:
    return next((s for s in ancestors(span, by_id) if s.kind == SERVER), None)


# Made and asked in a process of its own: what it imports and installs is its alone. The reference
# engine keeps it off the database, which changes nothing here: tracing is wired by create_app.
UNTRACED = """
import asyncio
import sys

import asyncpg
import httpx
from opentelemetry import trace

from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.reference import ReferenceEngine
from app.main import create_app
from app.settings import Settings


async def reference(_: Settings) -> ReferenceEngine:
    return ReferenceEngine(WordLlamaEmbedder(256))


async def ask() -> int:
    app = create_app(Settings(), engine_factory=reference)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.test") as client:
            return (await client.post("/v1/list", json={"limit": 5})).status_code


print(asyncio.run(ask()))
print(type(trace.get_tracer_provider()).__name__)
print(sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.instrumentation"))))
print(type(asyncpg.Connection.fetch).__name__)
"""


def test_without_a_collector_no_tracer_provider_is_installed_and_no_sdk_imported() -> None:
    env = {k: v for k, v in engram_env().items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", UNTRACED], env=env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["200", "ProxyTracerProvider", "[]", "function"]


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector.example:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, False),  # empty is unset, as OpenTelemetry reads it
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "TRUE"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "no"}, True),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            True,
        ),
    ],
)
def test_a_collector_named_by_opentelemetrys_variables_turns_tracing_on(
    env: dict[str, str], on: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert Settings().tracing is on


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:secret-token@4318"}, "OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL: only http/protobuf",
        ),
    ],
)
def test_a_collector_tracing_cannot_reach_stops_the_start(
    env: dict[str, str], named: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["openapi"]) == 2
    said = capsys.readouterr().err
    assert said.startswith("engram: configuration error: ") and named in said
    assert "secret-token" not in said


def test_a_collector_without_the_tracing_packages_stops_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # as if engram[tracing] were not installed
    monkeypatch.delitem(sys.modules, "app.telemetry.tracing", raising=False)
    with pytest.raises(ConfigError, match=r"pip install 'engram\[tracing\]'"):
        create_app(Settings())
