"""One worked example per request body, shown in the OpenAPI document."""

from __future__ import annotations

from typing import Any


def _one(summary: str, value: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {"default": {"summary": summary, "value": value}}


STORE = _one(
    "A learning in an agent's namespace",
    {
        "type": "learning",
        "text": "prefers tabs over spaces",
        "kind": "preference",
        "confidence": 0.8,
        "meta": {"namespace": "team:acme/agent:writer", "tags": ["style"]},
    },
)
STORE_MANY = _one(
    "A document and a conversation in one transaction",
    {
        "items": [
            {"type": "document", "title": "Rust", "body": {"text": "Ownership moves values."}},
            {
                "type": "conversation",
                "turns": [
                    {"role": "user", "text": "Which editor settings do I use?"},
                    {"role": "assistant", "text": "Tabs, width four."},
                ],
                "meta": {"thread_id": "t-42"},
            },
        ]
    },
)
FETCH = _one(
    "Hybrid search in one folder",
    {"query": "how does ownership work", "mode": "hybrid", "filter": {"folder": "/notes/rust"}, "limit": 10},
)
RECALL = _one(
    "A question within an agent's reach",
    {
        "question": "what indentation does the writer prefer?",
        "filter": {"reach": {"at": "team:acme/agent:writer", "inherit": True}},
        "limit": 5,
    },
)
LIST = _one("The first page of learnings", {"filter": {"kinds": ["learning"]}, "limit": 50})
GET = _one("Two items by id", {"ids": ["19fc22b957ecd5727c7e03dda8c2e1979528da36"]})
FORGET = _one("Forget by ids", {"ids": ["19fc22b957ecd5727c7e03dda8c2e1979528da36"]})
FORGET_WITHIN = _one(
    "Forget ids only within a team's subtree",
    {
        "ids": ["19fc22b957ecd5727c7e03dda8c2e1979528da36"],
        "reach": {"at": "team:acme", "inherit": False, "descendants": True},
    },
)
EXPLORE = _one("The most used tags", {"facet": "tag", "limit": 20})
