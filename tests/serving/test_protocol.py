"""Requests the server layer refuses before the app sees them, sent over raw sockets to a live ``engram serve``
(app/serving/protocol.py): the envelope, the head limits, and nothing lost for requests within them."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import psutil
import pytest

from tests.http.test_metrics import samples, value
from tests.support.live import LiveServer, live_server
from tests.support.raw_http import RawAnswer, answers, ask, exchange, request
from tests.support.scratch import scratch

pytestmark = pytest.mark.slow

MAX_HEADER_BYTES = 8192
MAX_HEADERS = 20
KEY = "protocol-key"
AUTH = ("Authorization", f"Bearer {KEY}")


@pytest.fixture(scope="module")
def served() -> Iterator[LiveServer]:
    env = {"ENGRAM_MAX_HEADER_BYTES": str(MAX_HEADER_BYTES), "ENGRAM_MAX_HEADERS": str(MAX_HEADERS)}
    with scratch("protocol") as tmp, live_server(tmp, env=env, api_key=KEY) as server:
        yield server


def port_of(server: LiveServer) -> int:
    return int(server.base_url.rsplit(":", 1)[1])


def assert_envelope(answer: RawAnswer, status: int, message: str) -> None:
    assert answer.status == status, answer
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["connection"] == "close"
    body = answer.json()
    assert body == {
        "code": "invalid_request",
        "message": f"invalid request: {message}",
        "retryable": False,
        "request_id": answer.headers["x-request-id"],
    }


@pytest.mark.parametrize(
    "raw",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        b"GET /v1/health HTTP/1.1\r\nHost: x\r\nA Space In The Name: 1\r\n\r\n",
        b"GET /v1/health HTTP/9.9\r\nHost: x\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS handshake on the plain port
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",  # HTTP/2 without the upgrade
        b"POST /v1/list HTTP/1.1\r\nHost: x\r\nContent-Length: nine\r\n\r\n",
    ],
    ids=["request-line", "header-name", "version", "tls", "http2-preface", "content-length"],
)
def test_an_unreadable_request_is_a_400_envelope(served: LiveServer, raw: bytes) -> None:
    assert_envelope(ask(port_of(served), raw), 400, "the request is not valid http/1.1")


def test_a_bad_chunk_in_a_body_the_app_reads_is_a_400_envelope_under_the_clients_request_id(served: LiveServer) -> None:
    head = b"POST /v1/list HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode()
    raw = head + b'\r\nX-Request-ID: chunked-1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{"l\r\nZZZ\r\n'
    answer = ask(port_of(served), raw)
    assert_envelope(answer, 400, "the request is not valid http/1.1")
    assert answer.headers["x-request-id"] == "chunked-1"


def test_a_head_over_the_limit_is_a_431_envelope(served: LiveServer) -> None:
    raw = request("GET", "/v1/health", [("X-Padding", "a" * MAX_HEADER_BYTES)])
    assert_envelope(ask(port_of(served), raw), 431, f"the request's head is over the limit of {MAX_HEADER_BYTES} bytes")
    long_path = request("GET", "/v1/" + "a" * MAX_HEADER_BYTES)
    assert_envelope(
        ask(port_of(served), long_path), 431, f"the request's head is over the limit of {MAX_HEADER_BYTES} bytes"
    )


def test_more_headers_than_the_limit_is_a_431_envelope(served: LiveServer) -> None:
    raw = request("GET", "/v1/health", [(f"X-Header-{n}", "1") for n in range(MAX_HEADERS)])
    assert_envelope(ask(port_of(served), raw), 431, f"the request has more than {MAX_HEADERS} headers")


def test_a_head_within_the_limits_is_served(served: LiveServer) -> None:
    fixed = len(request("GET", "/v1/engine", [AUTH, ("X-Padding", "")]))
    at_limit = request("GET", "/v1/engine", [AUTH, ("X-Padding", "a" * (MAX_HEADER_BYTES - fixed))])
    assert len(at_limit) == MAX_HEADER_BYTES
    assert ask(port_of(served), at_limit).status == 200
    # Host, Connection and the key are three of them.
    many = request("GET", "/v1/engine", [AUTH, *((f"X-Header-{n}", "1") for n in range(MAX_HEADERS - 3))])
    assert ask(port_of(served), many).status == 200


def test_a_body_is_not_counted_as_head(served: LiveServer) -> None:
    """A small head sent in one write with a body many times the head limit."""
    body = b'{"limit": 1}' + b" " * (20 * MAX_HEADER_BYTES)
    raw = request("POST", "/v1/list", [AUTH, ("Content-Type", "application/json")], body)
    answer = ask(port_of(served), raw)
    assert answer.status == 200, answer
    assert answer.json() == {"items": []}


def test_the_limits_hold_per_request_on_a_kept_alive_connection(served: LiveServer) -> None:
    """Pipelined in one write: each head near the limit, together far over it."""
    padding = "a" * (MAX_HEADER_BYTES // 2)
    one = f"GET /v1/engine HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nX-Padding: {padding}\r\n\r\n"
    last = "GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    got = answers(exchange(port_of(served), (one * 4 + last).encode()))
    assert [a.status for a in got] == [200, 200, 200, 200, 200]


def test_one_100_mb_header_is_refused_without_reading_it_into_memory(served: LiveServer) -> None:
    process = psutil.Process(served.process.pid)
    before = process.memory_info().rss
    raw = request("GET", "/v1/health", [("X-Big", "a" * (100 * 1024 * 1024))])
    assert_envelope(ask(port_of(served), raw), 431, f"the request's head is over the limit of {MAX_HEADER_BYTES} bytes")
    # Unbounded, the header was held (and copied) whole: the process grew by hundreds of MB.
    assert process.memory_info().rss - before < 32 * 1024 * 1024
    assert httpx.get(f"{served.base_url}/v1/health", timeout=30).status_code == 200


def test_an_upgrade_to_websocket_is_answered_as_a_plain_request(served: LiveServer) -> None:
    headers = [
        ("Connection", "Upgrade"),
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
    ]
    raw = request("GET", "/v1/health", headers).replace(b"Connection: close\r\n", b"")
    with socket.create_connection(("127.0.0.1", port_of(served)), timeout=30) as connection:
        connection.sendall(raw)
        received = b""
        while b"\r\n\r\n" not in received or not received.endswith(b"}"):
            received += connection.recv(65536)
    (answer,) = answers(received)
    assert answer.status == 200 and answer.json() == {"state": "ok"}


def test_refusals_are_counted_and_logged_as_answers_with_no_trace(served: LiveServer) -> None:
    port = port_of(served)
    ask(port, b"NOT HTTP AT ALL\r\n\r\n")
    ask(port, request("GET", "/v1/health", [(f"X-Header-{n}", "1") for n in range(MAX_HEADERS)]))
    scraped = httpx.get(f"{served.base_url}/metrics", headers=served.headers(), timeout=30)
    seen = samples(scraped.text)
    assert value(seen, "engram_http_requests_total", method="other", route="unmatched", status="400") >= 1
    assert value(seen, "engram_http_requests_total", method="other", route="unmatched", status="431") >= 1
    logs = served.logs()
    assert "other unmatched 400" in logs and "other unmatched 431" in logs
    # Uvicorn's own lines for such requests, one per request any client can send, are left out.
    assert "Invalid HTTP request received" not in logs and "Unsupported upgrade" not in logs
    assert "Traceback" not in logs
