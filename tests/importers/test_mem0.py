"""``engram import --from mem0``: memories in mem0's documented shape become learnings (app/importers/mem0.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from app.importers.mem0 import learning
from tests.support.engines import ClientFactory
from tests.support.scratch import run_engram

# As mem0's Memory.get_all() answers (docs.mem0.ai: {"results": [...]}).
EXPORT = {
    "results": [
        {
            "id": "3f0e-aa",
            "memory": "Prefers vegetarian food",
            "hash": "h1",
            "metadata": {"tags": ["diet"]},
            "categories": ["food"],
            "created_at": "2024-07-20T01:22:33.123456-07:00",
            "updated_at": None,
            "user_id": "alice@example.com",
        },
        {
            "id": "81bc-bb",
            "memory": "Is planning a trip to Lisbon",
            "created_at": "2024-07-21T10:00:00Z",
            "updated_at": "2024-07-22T10:00:00Z",
            "user_id": "alice@example.com",
            "agent_id": "travel",
            "run_id": "trip-42",
        },
        {"id": "00ff-cc", "memory": "   ", "created_at": "2024-07-21T10:00:00Z", "user_id": "bob"},
    ]
}


def test_a_memory_becomes_a_learning() -> None:
    made = learning(EXPORT["results"][1], "team:acme")
    assert made == {
        "type": "learning",
        "text": "Is planning a trip to Lisbon",
        "kind": "fact",
        "confidence": 0.8,
        "meta": {
            "source": {"kind": "import", "id": "mem0:81bc-bb"},
            "namespace": "team:acme/user:alice_example_com/agent:travel",
            "thread_id": "trip-42",
            "observed_at": "2024-07-22T10:00:00Z",
        },
    }


async def test_a_mem0_export_imports_and_a_blank_memory_is_reported(
    make_client: ClientFactory, database_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps(EXPORT))
    settings = {"database_url": database_url, "embedder": "wordllama", "embedding_dim": "256"}
    async with make_client() as client:
        done = await asyncio.to_thread(run_engram, "import", "--from", "mem0", str(path), **settings)
        assert done.returncode == 1, "a memory was refused"
        assert "engram: line 3: invalid request: item: learning text must not be blank" in done.stderr
        assert "engram: 2 items stored, 0 already held, 1 lines refused" in done.stderr
        reach = {"reach": {"at": "user:alice_example_com", "inherit": False, "descendants": True}}
        items = (await client.post("/v1/list", json={"limit": 10, "filter": reach})).json()["items"]
        assert [(hit["text"], hit["meta"].get("tags")) for hit in items] == [
            ("Prefers vegetarian food", ["food", "diet"]),
            ("Is planning a trip to Lisbon", None),
        ]
        assert items[0]["meta"]["observed_at"] == "2024-07-20T08:22:33.123456Z"
        path.write_text('{"memories": []}')
        wrong = await asyncio.to_thread(run_engram, "import", "--from", "mem0", str(path), **settings)
        assert wrong.returncode == 2 and "is not a mem0 export" in wrong.stderr
