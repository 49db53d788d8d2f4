"""The conformance kit's frame: a check, its failure, and the probe it talks to the service through.

A check is an async function of a :class:`Probe` that raises :class:`Failed` with the reason
when the service breaks the contract. Checks register themselves with :func:`check` under a
family (the part of the contract they cover), and run one after another, each in a namespace of
its own below the run's, which the run forgets at its end.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

CheckFunction = Callable[["Probe"], Awaitable[None]]


class Failed(Exception):
    """The service broke the contract; the message says how, in one line."""


@dataclass(frozen=True)
class Check:
    family: str
    name: str
    run: CheckFunction

    @property
    def slug(self) -> str:
        """The check's namespace segment id: letters, digits, ``_`` and ``-`` only."""
        return f"{self.family}-{self.name}".replace(" ", "_")[:128]


CHECKS: list[Check] = []


def check(family: str) -> Callable[[CheckFunction], CheckFunction]:
    """Register the decorated function as a check of ``family``, named after the function."""

    def register(function: CheckFunction) -> CheckFunction:
        CHECKS.append(Check(family, function.__name__, function))
        return function

    return register


def new_run_namespace() -> str:
    return f"project:conformance-{secrets.token_hex(6)}"


class Probe:
    """One check's view of the service: HTTP calls, and a namespace nothing else writes to."""

    def __init__(self, client: httpx.AsyncClient, namespace: str) -> None:
        self.client = client
        self.namespace = namespace

    # --- where the check's items live ------------------------------------------------------------

    def ns(self, below: str = "") -> str:
        """The check's namespace, or a node below it (``below`` like ``agent:a/user:b``)."""
        return f"{self.namespace}/{below}" if below else self.namespace

    def reach(self, below: str = "", *, descendants: bool = True) -> dict[str, Any]:
        """A reach that sees the check's namespace (and its subtree) and nothing above it."""
        return {"at": self.ns(below), "inherit": False, "descendants": descendants}

    def scoped(self, **fields: Any) -> dict[str, Any]:
        """A filter of the given fields, inside the check's namespace."""
        return {"reach": self.reach(), **fields}

    def learning(self, text: str, *, below: str = "", **meta: Any) -> dict[str, Any]:
        return {
            "type": "learning",
            "text": text,
            "kind": "fact",
            "confidence": 0.8,
            "meta": {"namespace": self.ns(below), **meta},
        }

    def document(self, text: str, *, title: str | None = None, below: str = "", **meta: Any) -> dict[str, Any]:
        item: dict[str, Any] = {
            "type": "document",
            "body": {"text": text},
            "meta": {"namespace": self.ns(below), **meta},
        }
        if title is not None:
            item["title"] = title
        return item

    # --- calls -----------------------------------------------------------------------------------

    async def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
        """POST ``body`` as JSON (or as it is, when it is already ``bytes``)."""
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await self.client.post(
            path, content=content, headers={"content-type": "application/json", **(headers or {})}
        )

    async def call(self, path: str, body: Any, status: int = 200) -> Any:
        """POST and expect ``status``; the answer's JSON."""
        response = await self.post(path, body)
        return expect(response, status)

    async def store(self, item: dict[str, Any]) -> str:
        """Store one item (written or replayed); its id."""
        response = await self.post("/v1/store", item)
        return str(expect(response, 200 if response.status_code == 200 else 201)["id"])

    async def store_all(self, items: list[dict[str, Any]]) -> list[str]:
        """Store a batch (at most 100); the ids in item order."""
        answer = await self.call("/v1/store_many", {"items": items})
        return [receipt["id"] for receipt in answer["receipts"]]

    async def list_all(self, filter: dict[str, Any] | None = None, page: int = 1000) -> list[dict[str, Any]]:
        """Every item the filter admits (the check's namespace by default), following cursors."""
        body: dict[str, Any] = {"filter": filter if filter is not None else self.scoped(), "limit": page}
        items: list[dict[str, Any]] = []
        while True:
            answer = await self.call("/v1/list", body)
            items += answer["items"]
            if "next_cursor" not in answer:
                return items
            body["cursor"] = answer["next_cursor"]

    async def forget_everything(self) -> None:
        """Forget every item of the namespace (the run's cleanup)."""
        await self.post("/v1/forget", {"filter": {"reach": self.reach()}})


def expect(response: httpx.Response, status: int, code: str | None = None) -> Any:
    """The answer's JSON when it has ``status`` (and, for an error, the envelope's ``code``)."""
    try:
        answer = response.json()
    except ValueError:
        raise Failed(
            f"{response.request.url.path} answered {response.status_code} with a body that is not json"
        ) from None
    if response.status_code != status:
        said = answer.get("message") if isinstance(answer, dict) else None
        raise Failed(
            f"{response.request.url.path} answered {response.status_code}, expected {status}"
            + (f" ({said})" if said else "")
        )
    if code is not None:
        got = answer.get("code") if isinstance(answer, dict) else None
        if got != code:
            raise Failed(f"{response.request.url.path} answered code {got!r}, expected {code!r}")
    return answer


def require(condition: bool, reason: str) -> None:
    """Fail with ``reason`` unless ``condition`` holds."""
    if not condition:
        raise Failed(reason)
