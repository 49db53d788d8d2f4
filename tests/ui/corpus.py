"""The items the explorer's browser tests store: a small tree of namespaces, tags, kinds, sources
and observed times whose counts the tests read back on the page."""

from __future__ import annotations

from typing import Any


def _learning(text: str, kind: str, ns: str, tags: list[str], at: str | None = None, **meta: Any) -> dict[str, Any]:
    meta = {"namespace": ns, "tags": tags, **meta}
    if at:
        meta["observed_at"] = at
    return {"type": "learning", "text": text, "kind": kind, "confidence": 0.8, "meta": meta}


def _document(title: str, text: str, ns: str, tags: list[str], at: str | None = None, **meta: Any) -> dict[str, Any]:
    meta = {"namespace": ns, "tags": tags, **meta}
    if at:
        meta["observed_at"] = at
    return {"type": "document", "title": title, "body": {"text": text}, "meta": meta}


def _conversation(turns: list[tuple[str, str]], ns: str, tags: list[str], at: str) -> dict[str, Any]:
    return {
        "type": "conversation",
        "turns": [{"role": role, "text": text} for role, text in turns],
        "meta": {"namespace": ns, "tags": tags, "observed_at": at},
    }


WRITER = "team:acme/agent:writer"
DEPLOYER = "team:acme/agent:deployer"
ALICE = "team:acme/user:alice"
GLOBEX = "team:globex/agent:ops"
MARKUP = "<img src=x onerror=\"document.title='pwned'\"> <b>bold?</b> stays text"

ITEMS: list[dict[str, Any]] = [
    _learning("prefers tabs over spaces", "preference", WRITER, ["style"], "2024-03-04T09:00:00Z"),
    _learning(
        "writes release notes in the second person", "preference", WRITER, ["style", "docs"], "2024-03-18T10:30:00Z"
    ),
    _document(
        "Style guide",
        "Headings use sentence case. Code blocks name their language.",
        WRITER,
        ["style", "docs"],
        "2024-05-02T08:00:00Z",
    ),
    _document(
        "Rust notes",
        "Ownership moves values; borrowing lends them.",
        WRITER,
        ["rust"],
        "2024-03-20T12:00:00Z",
        folder="/notes/rust",
        source={"kind": "folder", "id": "/notes"},
    ),
    _learning("the deploy window is friday afternoon", "fact", DEPLOYER, ["deploy"], "2024-05-10T15:00:00Z"),
    _document(
        "Runbook",
        "Restart the queue worker before deploying. Watch the dashboards for ten minutes after.",
        DEPLOYER,
        ["deploy", "ops"],
        "2024-05-11T07:45:00Z",
    ),
    _conversation(
        [("user", "when do we deploy?"), ("assistant", "Fridays after lunch, once the queue is drained.")],
        DEPLOYER,
        ["deploy"],
        "2024-06-01T13:00:00Z",
    ),
    _learning("alice prefers tea over coffee", "preference", ALICE, ["food"], "2025-01-15T08:00:00Z"),
    _conversation(
        [("user", "what should I cook tonight?"), ("assistant", "A mushroom risotto: you liked it last week.")],
        ALICE,
        ["food"],
        "2025-01-20T19:00:00Z",
    ),
    _document(
        "Team charter",
        "Acme builds the billing platform and ships every week.",
        "team:acme",
        [],
        "2023-11-01T09:00:00Z",
    ),
    _learning("the globex database runs on port 5433", "fact", GLOBEX, ["ops"], "2024-08-08T11:00:00Z"),
    _document(
        "Incident 12",
        "The cache filled the disk; logs now rotate every hour.",
        GLOBEX,
        ["ops", "incident"],
        "2024-08-09T02:00:00Z",
    ),
    _learning("the office wifi password changes every month", "fact", "root", []),
    _document("Markup sample", MARKUP, "root", ["docs"], source={"kind": "import", "id": "notes"}),
]

# What the page must count, read off ITEMS by hand.
TOTAL = 14
ACME = 10  # team:acme and below
WRITER_COUNT = 4
DEPLOY_TAG = 3
OBSERVED = 12  # those with meta.observed_at
