"""Stores and forgets through the engine: one row per item, all or nothing, each text embedded once."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import numpy as np
import pytest

from app.contract.errors import EngineFailure
from app.contract.items import ITEM_ADAPTER, StoredItem
from app.contract.requests import FetchRequest, ForgetByIds
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.queries.statement import Statement
from tests.engine.postgres.support import WrappedEmbedder, count_rows, failing_insert, learning
from tests.support.engines import truncate


async def test_concurrent_identical_stores_make_one_row(pg_engine: PostgresEngine) -> None:
    item = learning("the same fact, told twenty times at once")
    receipts = await asyncio.gather(*(pg_engine.store(item) for _ in range(20)))
    assert {r.id for r in receipts} == {item.checked().fingerprint()}
    assert sorted(r.replayed for r in receipts) == [False] + [True] * 19
    assert await count_rows(pg_engine) == (1, 1)


async def test_concurrent_overlapping_batches_make_one_row_each(pg_engine: PostgresEngine) -> None:
    items = [learning(f"overlap {n}") for n in range(30)]
    batches = [items[i : i + 20] for i in range(0, 20, 5)]
    results = await asyncio.gather(*(pg_engine.store_many(b) for b in batches))
    by_id: dict[str, int] = Counter()
    for receipts in results:
        for receipt in receipts:
            by_id[receipt.id] += not receipt.replayed
    assert all(written == 1 for written in by_id.values())
    assert await count_rows(pg_engine) == (len(by_id), len(by_id))


async def test_a_failed_store_many_write_leaves_nothing_half_written(pg_engine: PostgresEngine) -> None:
    batch = [learning(f"batch item {n}") for n in range(5)]
    doomed = batch[3].checked().fingerprint()
    async with failing_insert(pg_engine, "engram_vector_backlog", "item_id", doomed):
        with pytest.raises(EngineFailure) as caught:
            await pg_engine.store_many(batch)
        assert "injected" not in caught.value.message and "INSERT" not in caught.value.message
        assert await count_rows(pg_engine) == (0, 0)
    receipts = await pg_engine.store_many(batch)
    assert not any(r.replayed for r in receipts)
    assert await count_rows(pg_engine) == (5, 5)


async def test_stored_vectors_are_the_embedders_float32_vectors_exactly(
    pg_engine: PostgresEngine, embedder: Any
) -> None:
    texts = [f"exact vector {n} of a note about precision" for n in range(30)]
    await pg_engine.store_many([learning(t) for t in texts])
    rows = await pg_engine.run(
        Statement(
            "SELECT i.text, e.embedding::text AS v FROM engram_items i JOIN "
            "(SELECT item_id, embedding FROM engram_embeddings UNION ALL "
            "SELECT item_id, embedding FROM engram_vector_backlog) e ON e.item_id = i.id"
        )
    )
    stored = {row["text"]: np.array(json.loads(row["v"]), dtype=np.float32) for row in rows}
    expected = np.asarray(await embedder.embed(texts), dtype=np.float32)
    for text_, vector in zip(texts, expected, strict=True):
        assert stored[text_].tobytes() == vector.tobytes(), text_


class SlowOrFailingEmbedder(WrappedEmbedder):
    """The real embedder behind a delay, failing for any text holding ``poison``."""

    def __init__(self, inner: Any, delay_s: float = 0.0) -> None:
        super().__init__(inner)
        self._delay_s = delay_s
        self.finished = 0

    async def embed(self, texts: list[str]) -> np.ndarray:
        await asyncio.sleep(self._delay_s)
        if any("poison" in t for t in texts):
            raise RuntimeError("embedder failed")
        vectors = await self._inner.embed(texts)
        self.finished += 1
        return vectors


async def test_an_embedder_failure_writes_nothing(pg_engine: PostgresEngine, database_url: str, embedder: Any) -> None:
    """A batch whose embedding fails is not written at all, and can be written again."""
    failing = await PostgresEngine.connect(database_url, SlowOrFailingEmbedder(embedder, delay_s=0.2))
    try:
        with pytest.raises(EngineFailure):  # sanitised: the embedder's own message stays in the log
            await failing.store_many([learning(f"fine item {n}") for n in range(3)] + [learning("poison item")])
        assert await count_rows(pg_engine) == (0, 0)
        receipts = await failing.store_many([learning(f"fine item {n}") for n in range(3)])
        assert [r.replayed for r in receipts] == [False] * 3
        assert await count_rows(pg_engine) == (3, 3)
    finally:
        await failing.close()


async def test_an_insert_failure_after_the_batch_is_embedded_writes_nothing(
    pg_engine: PostgresEngine, database_url: str, embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The batch is embedded before its items are inserted: an insert failing undoes all, vectors too."""
    batch = [learning(f"batch item {n}") for n in range(4)]
    doomed = batch[2].checked().fingerprint()
    slow = SlowOrFailingEmbedder(embedder, delay_s=0.3)
    failing = await PostgresEngine.connect(database_url, slow)
    try:
        async with failing_insert(pg_engine, "engram_items", "id", doomed):
            with pytest.raises(EngineFailure):
                await failing.store_many(batch)
        assert slow.finished == 1
        assert await count_rows(pg_engine) == (0, 0)
    finally:
        await failing.close()


class CountingEmbedder(WrappedEmbedder):
    """The real embedder, recording every stored text it is asked to embed."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.texts: list[str] = []

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        return await self._inner.embed(texts)


async def test_a_text_is_embedded_once_and_a_replay_not_at_all(database_url: str, embedder: Any) -> None:
    counting = CountingEmbedder(embedder)
    engine = await PostgresEngine.connect(database_url, counting)
    try:
        await truncate(engine)
        same_text = [learning("one fact", tags=["a"]), learning("one fact", tags=["b"]), learning("another")]
        receipts = await engine.store_many([*same_text, same_text[0]])
        assert [r.replayed for r in receipts] == [False, False, False, True]
        assert sorted(counting.texts) == ["another", "one fact"]
        counting.texts.clear()
        await engine.store_many(same_text)
        await engine.store(same_text[2])
        assert counting.texts == []
        assert await count_rows(engine) == (3, 3)
    finally:
        await engine.close()


async def test_an_item_of_a_thread_is_embedded_after_the_item_stored_before_it(
    database_url: str, embedder: Any
) -> None:
    def turn(text_: str, thread: str, namespace: str = "user:ana") -> StoredItem:
        meta = {"thread_id": thread, "namespace": namespace}
        return ITEM_ADAPTER.validate_python(
            {"type": "conversation", "turns": [{"role": "user", "text": text_}], "meta": meta}
        )

    counting = CountingEmbedder(embedder)
    engine = await PostgresEngine.connect(database_url, counting)
    try:
        await truncate(engine)
        await engine.store(turn("Did you go to the pottery class?", "s1"))
        await engine.store_many([turn("Yes, last Tuesday!", "s1"), turn("Other talk", "s2"), turn("It was fun", "s1")])
        # Another namespace's thread of the same name is another thread.
        await engine.store(turn("Unrelated", "s1", namespace="user:bob"))
        assert counting.texts == [
            "Did you go to the pottery class?",
            "Yes, last Tuesday!\nDid you go to the pottery class?",
            "Other talk",
            "It was fun\nDid you go to the pottery class?\nYes, last Tuesday!",
            "Unrelated",
        ]
        # The vector kept is the one of the text in context; the stored text is the item's own.
        (expected,) = await embedder.embed([counting.texts[1]])
        page = await engine.fetch(FetchRequest(query="Yes, last Tuesday!", mode="keyword", limit=1))
        assert page.hits[0].text == "user: Yes, last Tuesday!"
        (kept,) = await engine.run(
            Statement(
                "SELECT coalesce(e.embedding, b.embedding)::text AS v FROM engram_items i "
                "LEFT JOIN engram_embeddings e ON e.item_id = i.id "
                "LEFT JOIN engram_vector_backlog b ON b.item_id = i.id WHERE i.id = $1",
                (page.hits[0].id,),
            )
        )
        assert np.allclose(np.array(json.loads(kept["v"]), dtype=np.float32), expected, atol=1e-6)
    finally:
        await engine.close()


class ForgettingEmbedder(WrappedEmbedder):
    """The real embedder, which forgets ``victim`` (through ``engine``) while it embeds the first
    batch after ``arm``: an item held when a write began is gone when it inserts."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.engine: PostgresEngine | None = None
        self.victim: str | None = None
        self.texts: list[str] = []

    def arm(self, engine: PostgresEngine, victim: str) -> None:
        self.engine, self.victim = engine, victim

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        if self.engine is not None and self.victim is not None:
            victim, self.victim = self.victim, None
            report = await self.engine.forget(ForgetByIds(ids=[victim], purge=True))
            assert report.forgotten == 1
        return await self._inner.embed(texts)


async def test_an_item_forgotten_while_its_batch_is_embedded_is_stored_with_its_vector(
    database_url: str, embedder: Any
) -> None:
    """Held when the write looked, gone when it inserts: stored anew, embedded then, found by vector."""
    forgetting = ForgettingEmbedder(embedder)
    engine = await PostgresEngine.connect(database_url, forgetting)
    try:
        await truncate(engine)
        held, new = learning("held, then forgotten mid-write"), learning("new in the same batch")
        (first,) = await engine.store_many([held])
        forgetting.arm(engine, first.id)
        forgetting.texts.clear()
        receipts = await engine.store_many([held, new])
        assert [r.replayed for r in receipts] == [False, False]
        assert sorted(forgetting.texts) == sorted(["held, then forgotten mid-write", "new in the same batch"])
        assert await count_rows(engine) == (2, 2)
        page = await engine.fetch(FetchRequest(query="held, then forgotten mid-write", mode="vector", limit=1))
        assert [hit.id for hit in page.hits] == [first.id]
    finally:
        await engine.close()


async def test_a_write_has_its_transaction_id_before_its_first_item_takes_a_seq(pg_engine: PostgresEngine) -> None:
    """The token writer comes back for items its snapshot saw in progress (tokens.TokenWriter._missing):
    PostgreSQL gives a transaction its id as it inserts the first row, after that row drew its seq, and
    a snapshot between the two did not count the write at all. A trigger records, as each row is
    inserted with its seq drawn, whether its transaction had an id then."""
    recording = """
        CREATE TABLE seq_drawn (seq bigint, with_id boolean);
        CREATE FUNCTION record_seq_drawn() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO seq_drawn VALUES (NEW.seq, pg_current_xact_id_if_assigned() IS NOT NULL);
            RETURN NEW;
        END $$;
        CREATE TRIGGER seq_drawn BEFORE INSERT ON engram_items FOR EACH ROW EXECUTE FUNCTION record_seq_drawn();
    """
    async with pg_engine.connection() as connection:
        await connection.execute(recording)
    try:
        await pg_engine.store(learning("an item written alone"))
        await pg_engine.store_many([learning(f"an item written in a batch, {n}") for n in range(3)])
        rows = await pg_engine.run(Statement("SELECT with_id FROM seq_drawn ORDER BY seq"))
        assert [row["with_id"] for row in rows] == [True] * 4
    finally:
        async with pg_engine.connection() as connection:
            await connection.execute(
                "DROP TRIGGER seq_drawn ON engram_items; DROP FUNCTION record_seq_drawn(); DROP TABLE seq_drawn"
            )
