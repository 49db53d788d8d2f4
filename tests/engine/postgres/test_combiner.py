"""Concurrent one-item stores written together (combiner.py): in batches, each with its own
receipt and its own error (its own position with a replica: test_replica.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from app.contract.errors import EngineFailure
from app.contract.items import StoredItem
from app.contract.requests import FetchRequest, StoreReceipt
from app.engine.postgres.combiner import StoreCombiner, Written
from app.engine.postgres.engine import PostgresEngine
from tests.engine.postgres.support import count_rows, learning
from tests.engine.postgres.test_engine_writes import SlowOrFailingEmbedder
from tests.support.engines import truncate


class Batches:
    """A write that records each batch and answers a receipt per item; the first waits for ``release``."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = asyncio.Event()

    async def write(self, items: list[StoredItem]) -> Written:
        texts = [item.text for item in items]  # type: ignore[union-attr]
        self.batches.append(texts)
        if len(self.batches) == 1:
            await self.release.wait()
        if any("poison" in text for text in texts):
            raise RuntimeError("refused")
        return [StoreReceipt(id=text, replayed=False) for text in texts], len(self.batches)


async def test_stores_that_arrive_while_a_write_is_under_way_are_written_next_together() -> None:
    writes = Batches()
    combiner = StoreCombiner(writes.write, most=3)
    first = asyncio.create_task(combiner.store(learning("first")))
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the first is being written, alone
    later = [asyncio.create_task(combiner.store(learning(f"later {n}"))) for n in range(4)]
    await asyncio.sleep(0)
    writes.release.set()
    answers = await asyncio.gather(first, *later)
    assert writes.batches == [["first"], ["later 0", "later 1", "later 2"], ["later 3"]]
    assert [(receipt.id, position) for receipt, position in answers] == [
        ("first", 1),
        ("later 0", 2),
        ("later 1", 2),
        ("later 2", 2),
        ("later 3", 3),
    ]
    await combiner.close()


async def test_a_failing_batch_is_written_again_item_by_item() -> None:
    writes = Batches()
    writes.release.set()
    combiner = StoreCombiner(writes.write, most=10)
    stores = [combiner.store(learning(text)) for text in ("fine 1", "poison", "fine 2")]
    answers = await asyncio.gather(*stores, return_exceptions=True)
    assert writes.batches[0] == ["fine 1", "poison", "fine 2"]
    assert sorted(map(sorted, writes.batches[1:])) == [["fine 1"], ["fine 2"], ["poison"]]
    assert isinstance(answers[1], RuntimeError)
    assert [answer[0].id for answer in (answers[0], answers[2])] == ["fine 1", "fine 2"]  # type: ignore[index]


async def test_one_refused_item_among_concurrent_stores_fails_alone(database_url: str, embedder: Any) -> None:
    failing = await PostgresEngine.connect(database_url, SlowOrFailingEmbedder(embedder))
    try:
        await truncate(failing)
        items = [learning(f"told at once {n}") for n in range(11)] + [learning("poison among them")]
        answers = await asyncio.gather(*(failing.store(item) for item in items), return_exceptions=True)
        assert isinstance(answers[-1], EngineFailure)
        assert all(isinstance(a, StoreReceipt) and not a.replayed for a in answers[:-1]), answers
        assert await count_rows(failing) == (11, 11)
        page = await failing.fetch(FetchRequest(query="told at once 7", mode="vector", limit=1))
        assert [hit.id for hit in page.hits] == [items[7].checked().fingerprint()]
    finally:
        await failing.close()
