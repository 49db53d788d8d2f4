"""Raw HTTP/1.1 over a socket: requests no client library would send, and the answers read byte for byte."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

TIMEOUT_S = 30.0


@dataclass
class RawAnswer:
    status: int
    headers: dict[str, str]  # lowercased names; the last of a repeated header
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def exchange(port: int, data: bytes, *, timeout_s: float = TIMEOUT_S) -> bytes:
    """Send ``data`` and read until the server closes the connection (bounded by ``timeout_s``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as connection:
        connection.sendall(data)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
        return received


def answers(received: bytes) -> list[RawAnswer]:
    """The answers in what a connection received, each framed by its Content-Length."""
    found = []
    while received:
        head, _, rest = received.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        length = int(headers.get("content-length", len(rest)))
        found.append(RawAnswer(int(status_line.split()[1]), headers, rest[:length]))
        received = rest[length:]
    return found


def ask(port: int, data: bytes) -> RawAnswer:
    """The one answer to ``data``; the server must close the connection after it."""
    (answer,) = answers(exchange(port, data))
    return answer


def request(method: str, path: str, headers: list[tuple[str, str]] | None = None, body: bytes = b"") -> bytes:
    """A well-formed request that asks the server to close the connection after answering."""
    lines = [f"{method} {path} HTTP/1.1", "Host: engram.test", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers or []]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
