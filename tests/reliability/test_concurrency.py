"""Many clients at once over real HTTP: consistent receipts, no duplicates, a determinable final state.

The workload is built so a sequential replay of the acknowledged operations
has one answer: shared items are stored (in overlapping batches, by every
task) and never forgotten; each task's "doomed" items are stored and forgotten
by that task alone. So the final store must hold exactly the shared items
that were acknowledged, and nothing else.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.support.live import LiveServer, document, fingerprint, learning, list_everything

TASKS = 16
ROUNDS = 5
RUN_BOUND_S = 240
MODES = ("keyword", "vector", "hybrid")

SHARED: list[dict[str, Any]] = [
    learning(f"shared fact number {n} about harbours and lighthouses", tags=[f"s{n % 4}"])
    if n % 2
    else document(f"Shared note {n}: ships dock at pier {n} before the tide turns.", folder=f"/notes/{n % 3}")
    for n in range(48)
]
SHARED_IDS = [fingerprint(item) for item in SHARED]


def doomed(task: int, round_: int, n: int) -> dict[str, Any]:
    return learning(f"temporary fact {n} of task {task} in round {round_}", tags=[f"doomed-{task}"])


@dataclass
class Outcome:
    """What one task saw: receipts per item, acknowledged ids, forget counts, failures."""

    receipts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (expected id, receipt)
    shared_acked: set[str] = field(default_factory=set)
    doomed_stored: int = 0
    forgotten: int = 0
    retried: int = 0
    failures: list[str] = field(default_factory=list)


async def call(client: httpx.AsyncClient, path: str, body: dict[str, Any], out: Outcome) -> dict[str, Any] | None:
    """POST, retrying a documented transient refusal the way a client would; any other failure is recorded."""
    for _ in range(20):
        response = await client.post(path, json=body)
        if response.status_code in (200, 201):
            return response.json()  # type: ignore[no-any-return]
        envelope = response.json()
        if response.status_code in (429, 503) and envelope.get("code") == "unavailable" and envelope["retryable"]:
            assert response.headers.get("Retry-After"), "a 503 must say when to retry"
            out.retried += 1
            await asyncio.sleep(0.2)
            continue
        out.failures.append(f"{path} -> {response.status_code} {response.text}")
        return None
    out.failures.append(f"{path} stayed unavailable")
    return None


async def page_everything(client: httpx.AsyncClient, out: Outcome) -> list[str]:
    """List with small pages while others write: the ids seen, in order."""
    seen: list[str] = []
    cursor: str | None = None
    while True:
        body: dict[str, Any] = {"limit": 9, "filter": {}}
        if cursor:
            body["cursor"] = cursor
        page = await call(client, "/v1/list", body, out)
        if page is None:
            return seen
        seen += [item["id"] for item in page["items"]]
        cursor = page.get("next_cursor")
        if not cursor:
            return seen


async def worker(live: LiveServer, task: int) -> Outcome:
    out = Outcome()
    rng = random.Random(task)
    async with live.client() as client:
        for round_ in range(ROUNDS):
            # Overlapping shared batches, with one repeat inside the batch.
            picks = rng.sample(range(len(SHARED)), rng.randint(4, 14))
            picks.append(picks[0])
            result = await call(client, "/v1/store_many", {"items": [SHARED[i] for i in picks]}, out)
            if result is not None:
                receipts = result["receipts"]
                assert len(receipts) == len(picks)
                assert receipts[-1]["replayed"] is True, "a repeat inside a batch is a replay of its first copy"
                out.receipts += [(SHARED_IDS[i], r) for i, r in zip(picks, receipts, strict=True)]
                out.shared_acked |= {SHARED_IDS[i] for i in picks}
            single = rng.randrange(len(SHARED))
            receipt = await call(client, "/v1/store", SHARED[single], out)
            if receipt is not None:
                out.receipts.append((SHARED_IDS[single], receipt))
                out.shared_acked.add(SHARED_IDS[single])

            # This task's own doomed items: stored, read back, then forgotten (by ids now, or by filter at the end).
            mine = [doomed(task, round_, n) for n in range(3)]
            stored = await call(client, "/v1/store_many", {"items": mine}, out)
            if stored is not None:
                out.doomed_stored += len(mine)
                ids = [r["id"] for r in stored["receipts"]]
                out.receipts += [(fingerprint(item), r) for item, r in zip(mine, stored["receipts"], strict=True)]
                got = await call(client, "/v1/get", {"ids": ids}, out)
                assert got is not None and [h["id"] for h in got["hits"]] == ids, "read-your-writes"
                if round_ % 2 == 0:
                    report = await call(client, "/v1/forget", {"ids": [*ids, ids[0]]}, out)
                    out.forgotten += report["forgotten"] if report else 0

            # Reads racing the writes.
            mode = MODES[(task + round_) % len(MODES)]
            page = await call(client, "/v1/fetch", {"query": "lighthouses ships", "mode": mode, "limit": 10}, out)
            if page is not None:
                hit_ids = [h["id"] for h in page["hits"]]
                assert len(hit_ids) == len(set(hit_ids)), "a hit appears once per page"
            before = set(out.shared_acked)
            listed = await page_everything(client, out)
            assert len(listed) == len(set(listed)), "paging never returns an item twice"
            assert before <= set(listed), "paging skipped an item present for the whole paging"
            got = await call(client, "/v1/get", {"ids": sorted(before)[:200]}, out)
            assert got is not None and {h["id"] for h in got["hits"]} == set(sorted(before)[:200])
            nothing = await call(client, "/v1/forget_within", {"ids": ["0" * 40], "reach": {"at": "root"}}, out)
            assert nothing == {"forgotten": 0}

        rest = await call(client, "/v1/forget", {"filter": {"tags_any": [f"doomed-{task}"]}}, out)
        out.forgotten += rest["forgotten"] if rest else 0
    return out


@pytest.mark.slow
async def test_concurrent_clients_agree_with_a_sequential_replay(live: LiveServer) -> None:
    outcomes = await asyncio.wait_for(
        asyncio.gather(*(worker(live, task) for task in range(TASKS))), timeout=RUN_BOUND_S
    )

    failures = [f for o in outcomes for f in o.failures]
    assert not failures, failures

    # Every receipt is the item's fingerprint: the same item always gets the same id.
    receipts = [pair for o in outcomes for pair in o.receipts]
    assert all(receipt["id"] == expected for expected, receipt in receipts)
    # Each item was written once: exactly one receipt per id says it was not a replay.
    fresh = Counter(receipt["id"] for _, receipt in receipts if not receipt["replayed"])
    retried = sum(o.retried for o in outcomes)
    assert all(count == 1 for count in fresh.values()), fresh.most_common(3)
    acked = set().union(*(o.shared_acked for o in outcomes))
    if not retried:
        assert {i for i in fresh if i in set(SHARED_IDS)} == acked

    # Each task forgot exactly what it stored of its own, counted once.
    for task, outcome in enumerate(outcomes):
        assert outcome.forgotten == outcome.doomed_stored, f"task {task}"

    # The final state equals the replay: the acknowledged shared items, nothing else, each once.
    async with live.client() as client:
        final = await list_everything(client)
        by_tag: dict[str, int] = defaultdict(int)
        for item in final:
            for tag in item["meta"].get("tags", []):
                by_tag[tag] += 1
        explore = await client.post("/v1/explore", json={"facet": "kind", "limit": 10})
    ids = [item["id"] for item in final]
    assert len(ids) == len(set(ids))
    assert set(ids) == acked
    assert not any(tag.startswith("doomed-") for tag in by_tag)
    assert explore.json()["total"] == len(acked)
