"""Middleware the conformance tests put around the app: a fault in the HTTP layer, or a rule the app
will hold once it is fixed. It rewrites answers, or requests before the app reads them."""

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


def intercepting(change: Callable[[str, Any], Any]) -> Wrapper:
    """A wrapper whose middleware hands each JSON body to ``change(path, body)``, which gives back the body
    to pass on, or an :class:`Answer` to answer in the app's place."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            raw = b""
            while True:
                message = await receive()
                raw += message.get("body", b"")
                if not message.get("more_body"):
                    break
            try:
                changed = change(scope["path"], json.loads(raw)) if raw else None
            except ValueError:  # not json: the app's to refuse
                changed = None
            if isinstance(changed, Answer):
                headers = [(k.encode(), v.encode()) for k, v in changed.headers.items()]
                headers.append((b"content-length", str(len(changed.body)).encode()))
                await send({"type": "http.response.start", "status": changed.status, "headers": headers})
                await send({"type": "http.response.body", "body": changed.body})
                return
            body = raw if changed is None else json.dumps(changed).encode()
            sent = False

            async def replay() -> Message:
                nonlocal sent
                if sent:
                    return await receive()
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            await app(scope, replay, send)

        return middleware

    return wrap


def refusal(path: str, problem: str, request_id: str = "made-by-middleware") -> Answer:
    """A 400 ``invalid_request`` envelope, as the app answers one."""
    envelope = {
        "code": "invalid_request",
        "message": f"invalid request: {problem}",
        "retryable": False,
        "request_id": request_id,
    }
    headers = {"content-type": "application/json", "x-request-id": request_id}
    return Answer("POST", path, 400, headers, json.dumps(envelope).encode())
