"""The read families hold, and leave other items alone, on a service already holding items much like theirs."""

from __future__ import annotations

from app.contract.items import StoredItem
from app.contract.requests import StoreManyRequest
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.reference import ReferenceEngine
from tests.conformance.support import failed, outcomes_against

FAMILIES = ["filters", "cursors", "ranking", "recall", "explore"]

# Near the kit's own items: the same words, tags and field values, at the root, in another tree and
# in the kit's run namespace's ancestors.
NAMESPACES = ["", "project:other", "project:other/agent:a", "team:conformance"]
META = {
    "tags": ["x", "y", "batch-7"],
    "language": "a",
    "workspace": "w1",
    "folder": "/a/b",
    "file_path": "/a/b/c.rs",
    "repo": "v1",
    "thread_id": "t1",
    "agent_id": "g1",
    "tool_call": {"name": "grep"},
    "source": {"kind": "file", "id": "s1"},
    "turns": {"first": 0, "last": 2},
    "observed_at": "2024-01-02T00:00:00Z",
}
TEXTS = [
    "marmalade on toast",
    "gooseberry note 1 about the harbour",
    "the lighthouse keeper lives on the island",
    "a blue whale surfaced",
    "the cat slept on the mat",
    "the history of bread and butter",
]


def other_items() -> list[StoredItem]:
    items = [
        {"type": "learning", "text": text, "kind": "fact", "confidence": 0.5, "meta": {**META, "namespace": ns}}
        for ns in NAMESPACES
        for text in TEXTS
    ]
    return list(StoreManyRequest.model_validate({"items": items}).items)


async def test_other_items_change_no_outcome(embedder: WordLlamaEmbedder) -> None:
    engine = ReferenceEngine(embedder)
    await engine.store_many(other_items())
    assert failed(await outcomes_against(engine, FAMILIES)) == []
    # The kit forgot only what it stored: every other item is still held (stored again, it replays).
    assert all(receipt.replayed for receipt in await engine.store_many(other_items()))
