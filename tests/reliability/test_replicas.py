"""Two ``engram serve`` replicas on one PostgreSQL, driven at once: they answer as one service.

Sixteen clients, each writing through one replica and reading through the other (the pair
swapping every round), so that every read-your-write check crosses replicas: an item
acknowledged by A is found by B at once, by id and in every fetch mode; a forget through one
is seen by the other; identical items stored on both at once make one item; a list paged
across the two (page 1 from A, page 2 from B with A's cursor...) visits every item once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from app.engine.keys import FRESH_S
from tests.support.live import Database, LiveServer, fingerprint, learning, list_everything, live_server
from tests.support.scratch import scratch

pytestmark = pytest.mark.slow

TASKS = 16
ROUNDS = 6
RUN_BOUND_S = 300
MODES = ("keyword", "vector", "hybrid")
ADMIN = "replicas-admin-key-0b7d"
WORDLLAMA_DIMENSION = 256

SHARED = [
    learning(f"replicated harbour fact {n}: the ferry leaves pier {n} at dawn", tags=["shared"]) for n in range(24)
]
SHARED_IDS = [fingerprint(item) for item in SHARED]


def own(task: int, round_: int) -> dict[str, Any]:
    """An item no other task writes, under a tag of its own; its text has a word no other item has."""
    return learning(f"task {task} round {round_} remembers the word qz{task}x{round_}", tags=[f"own-{task}-{round_}"])


@dataclass
class Replicas:
    a: LiveServer
    b: LiveServer

    def pair(self, task: int, round_: int) -> tuple[LiveServer, LiveServer]:
        """The replica a task writes through this round, and the other, which it reads through."""
        return (self.a, self.b) if (task + round_) % 2 == 0 else (self.b, self.a)


@pytest.fixture(scope="module")
def replicas() -> Iterator[Replicas]:
    """One embedded PostgreSQL, made for WordLlama, and two services on it (each its own port and process)."""
    with scratch("replicas") as tmp:
        database = Database(tmp / "db", embedding_dim=WORDLLAMA_DIMENSION)
        env = {"ENGRAM_DATABASE_URL": database.url, "ENGRAM_EMBEDDER": "wordllama"}
        try:
            with (
                live_server(tmp / "a", env=env, api_key=ADMIN) as a,
                live_server(tmp / "b", env=env, api_key=ADMIN) as b,
            ):
                yield Replicas(a, b)
        finally:
            database.close()


@dataclass
class Outcome:
    """What one task saw: receipts, what it left stored, and every answer that was not what it should be."""

    receipts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (expected id, receipt)
    kept: set[str] = field(default_factory=set)
    statuses: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)


class Caller:
    """Both replicas' clients for one task; every answer is counted by status, any other than ``expect`` a failure."""

    def __init__(self, clients: dict[str, httpx.AsyncClient], out: Outcome) -> None:
        self._clients = clients
        self._out = out

    async def __call__(self, server: LiveServer, path: str, body: dict[str, Any], expect: int = 200) -> Any:
        response = await self._clients[server.base_url].post(path, json=body)
        self._out.statuses[response.status_code] += 1
        if response.status_code != expect:
            self._out.failures.append(f"{server.base_url}{path} -> {response.status_code} {response.text[:300]}")
            return None
        return response.json()


async def worker(replicas: Replicas, task: int) -> Outcome:
    out = Outcome()
    async with contextlib.AsyncExitStack() as stack:
        clients = {s.base_url: await stack.enter_async_context(s.client()) for s in (replicas.a, replicas.b)}
        call = Caller(clients, out)
        for round_ in range(ROUNDS):
            writer, reader = replicas.pair(task, round_)
            item = own(task, round_)
            expected = fingerprint(item)
            receipt = await call(writer, "/v1/store", item, expect=201)
            if receipt is None:
                continue
            out.receipts.append((expected, receipt))
            out.kept.add(expected)

            # Read-your-writes through the other replica, at once: by id and in every mode.
            got = await call(reader, "/v1/get", {"ids": [expected]})
            if got is not None and [h["id"] for h in got["hits"]] != [expected]:
                out.failures.append(f"{expected} stored by {writer.base_url} not got from {reader.base_url}")
            for mode in MODES:
                body = {
                    "query": f"qz{task}x{round_}",
                    "mode": mode,
                    "limit": 5,
                    "filter": {"tags_any": [f"own-{task}-{round_}"]},
                }
                page = await call(reader, "/v1/fetch", body)
                if page is not None and [h["id"] for h in page["hits"]] != [expected]:
                    out.failures.append(
                        f"{expected} stored by {writer.base_url} not found by {mode} on {reader.base_url}"
                    )

            # The same items stored by every task, through both replicas at once.
            picks = [(task * 5 + round_ * 7 + k) % len(SHARED) for k in range(6)]
            stored = await call(writer, "/v1/store_many", {"items": [SHARED[i] for i in picks]})
            if stored is not None:
                out.receipts += [(SHARED_IDS[i], r) for i, r in zip(picks, stored["receipts"], strict=True)]

            # A page of the list through the reader while the others write.
            listed = await call(reader, "/v1/list", {"limit": 9, "filter": {"tags_any": ["shared"]}})
            if listed is not None:
                ids = [i["id"] for i in listed["items"]]
                if len(ids) != len(set(ids)):
                    out.failures.append(f"a list page with an item twice: {ids}")

            # Every other round, this round's item forgotten through the writer: gone from the reader at once.
            if round_ % 2 == 1:
                report = await call(writer, "/v1/forget", {"ids": [expected]})
                if report is not None and report["forgotten"] != 1:
                    out.failures.append(f"forgetting {expected} forgot {report['forgotten']}")
                out.kept.discard(expected)
                got = await call(reader, "/v1/get", {"ids": [expected]})
                if got is not None and got["hits"]:
                    out.failures.append(f"{expected} forgotten through {writer.base_url} still on {reader.base_url}")
                # And back through the reader, by the writer's receipt (the undo window is the database's).
                if report is not None and task % 4 == 0:
                    restored = await call(reader, "/v1/restore", {"receipt": report["receipt"]})
                    if restored is not None:
                        out.kept.add(expected)
                        back = await call(writer, "/v1/get", {"ids": [expected]})
                        if back is not None and [h["id"] for h in back["hits"]] != [expected]:
                            out.failures.append(f"{expected} restored on {reader.base_url} not on {writer.base_url}")
    return out


async def page_across(replicas: Replicas, limit: int) -> list[str]:
    """Every item, its pages asked of A and B in turn, each with the cursor the other gave."""
    seen: list[str] = []
    cursor: str | None = None
    async with replicas.a.client() as a, replicas.b.client() as b:
        for turn in range(10_000):
            body: dict[str, Any] = {"limit": limit}
            if cursor:
                body["cursor"] = cursor
            response = await (a, b)[turn % 2].post("/v1/list", json=body)
            assert response.status_code == 200, response.text
            page = response.json()
            seen += [item["id"] for item in page["items"]]
            cursor = page.get("next_cursor")
            if not cursor:
                return seen
    raise AssertionError("the cursor never ended")


async def test_two_replicas_on_one_database_answer_as_one_service(replicas: Replicas) -> None:
    outcomes = await asyncio.wait_for(
        asyncio.gather(*(worker(replicas, task) for task in range(TASKS))), timeout=RUN_BOUND_S
    )

    failures = [f for o in outcomes for f in o.failures]
    assert not failures, failures[:20]
    statuses = sum((o.statuses for o in outcomes), Counter())
    assert not [s for s in statuses if s >= 500], statuses
    assert sum(statuses.values()) >= TASKS * ROUNDS * 7, "the load ran"

    # One id per item, and one item per id: across both replicas, exactly one receipt of each
    # item says it was stored new; every other is a replay.
    receipts = [pair for o in outcomes for pair in o.receipts]
    assert all(receipt["id"] == expected for expected, receipt in receipts)
    fresh = Counter(receipt["id"] for _, receipt in receipts if not receipt["replayed"])
    assert set(fresh) == {expected for expected, _ in receipts}
    assert all(count == 1 for count in fresh.values()), fresh.most_common(3)

    kept = set().union(*(o.kept for o in outcomes)) | {i for i in SHARED_IDS if i in fresh}
    async with replicas.a.client() as a, replicas.b.client() as b:
        on_a = [item["id"] for item in await list_everything(a)]
        on_b = [item["id"] for item in await list_everything(b)]
    assert on_a == on_b, "both replicas list the same items in the same order"
    assert len(on_a) == len(set(on_a)) and set(on_a) == kept

    # Paged across the replicas, small pages: each item once, in the one order.
    for limit in (7, 50):
        assert await page_across(replicas, limit) == on_a


async def test_a_key_revoked_through_one_replica_is_refused_by_the_other(replicas: Replicas) -> None:
    admin = {"authorization": f"Bearer {ADMIN}"}
    async with replicas.a.client() as a, replicas.b.client() as b:
        made = await a.post(
            "/v1/keys", json={"name": "roaming", "role": "read", "reach": {"at": "root"}}, headers=admin
        )
        assert made.status_code == 201, made.text
        held = {"authorization": f"Bearer {made.json()['secret']}"}
        replicas.a.secrets.append(made.json()["secret"])
        replicas.b.secrets.append(made.json()["secret"])
        assert (await b.get("/v1/engine", headers=held)).status_code == 200, "a key made on A works on B at once"

        revoked = await a.post("/v1/keys/revoke", json={"id": made.json()["key"]["id"]}, headers=admin)
        assert revoked.status_code == 200, revoked.text
        assert (await a.get("/v1/engine", headers=held)).status_code == 401, "refused at once where revoked"
        # B trusts what it read of the key for FRESH_S: refused once that has passed (polled, bounded).
        for _ in range(100):
            if (await b.get("/v1/engine", headers=held)).status_code == 401:
                break
            await asyncio.sleep(FRESH_S / 10)
        else:
            raise AssertionError("the other replica kept accepting a revoked key")
