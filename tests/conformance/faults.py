"""Faults the conformance tests inject in the HTTP layer: a middleware that rewrites answers or requests."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.conformance.support import Wrapper


@dataclass
class Answer:
    """An answer as the middleware lets a fault change it."""

    method: str
    path: str
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @json.setter
    def json(self, value: Any) -> None:
        self.body = json.dumps(value).encode()


def rewriting(change: Callable[[Answer], None]) -> Wrapper:
    """A wrapper whose middleware hands every answer to ``change`` before it leaves."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            started: dict[str, Any] = {}
            chunks: list[bytes] = []

            async def keep(message: Message) -> None:
                if message["type"] == "http.response.start":
                    started.update(message)
                else:
                    chunks.append(message.get("body", b""))

            await app(scope, receive, keep)
            headers = {k.decode().lower(): v.decode() for k, v in started.get("headers", [])}
            answer = Answer(scope["method"], scope["path"], started["status"], headers, b"".join(chunks))
            change(answer)
            answer.headers["content-length"] = str(len(answer.body))
            raw = [(k.encode(), v.encode()) for k, v in answer.headers.items()]
            await send({"type": "http.response.start", "status": answer.status, "headers": raw})
            await send({"type": "http.response.body", "body": answer.body})

        return middleware

    return wrap


def with_headers(extra: dict[str, str]) -> Wrapper:
    """A wrapper that adds ``extra`` to every request that lacks them (a proxy that signs every call)."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                present = {k.decode().lower() for k, _ in scope["headers"]}
                added = [(k.encode(), v.encode()) for k, v in extra.items() if k not in present]
                scope = {**scope, "headers": [*scope["headers"], *added]}
            await app(scope, receive, send)

        return middleware

    return wrap
