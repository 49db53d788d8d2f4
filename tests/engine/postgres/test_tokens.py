"""Late interaction in the engine: token vectors made after the write, the first hits re-scored by them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import numpy as np
import pytest

from app.contract.requests import FetchRequest, ForgetByIds, Hit, StoreManyRequest
from app.embeddings.late import LateInteraction, maxsim, packed, unpacked
from app.embeddings.protocol import Embedder
from app.embeddings.wrapped import WrappedEmbedder
from app.engine.interaction import rescored
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.options import EngineOptions, IndexerOptions, LateOptions, PoolOptions
from app.engine.postgres.rows import item_row
from app.engine.postgres.tokens import TokenWriter
from app.settings import Settings
from tests.engine.postgres.support import learning

# Turns about the question's words: the dense ranking and MaxSim order them apart.
TEXTS = [
    "user: I moved to Lisbon in March, the flat is near the river.",
    "assistant: Moving is hard; Lisbon is lovely in spring.",
    "user: My sister still lives in Porto with her two cats.",
    "user: We deploy the billing service on Thursdays only.",
    "user: The river cruise in Lisbon was the best part of the trip.",
    "user: Where I live now the trams are yellow and old.",
    "assistant: Porto and Lisbon are the two largest cities of Portugal.",
    "user: I used to live in Berlin before the move.",
    "user: Rent in the new flat is lower than in Berlin.",
    "user: The cats hate the tram noise.",
    "assistant: Spring in Portugal is mild.",
    "user: Our team moved the standup to 10am.",
]
QUESTION = "Where does the user live now?"


@pytest.fixture(scope="module")
def late() -> LateInteraction:
    return LateInteraction(threads=2)


@pytest.fixture
async def late_engine(
    pg_engine: PostgresEngine, database_url: str, embedder: Embedder, late: LateInteraction
) -> AsyncIterator[PostgresEngine]:
    """A second engine on the test's clean database, with late interaction as configured by default
    (vector fetches re-scored too); its token writer is stepped by the tests (no background tasks),
    so each test says when token vectors are stored."""
    async with late_engine_with(database_url, embedder, late, LateOptions()) as engine:
        yield engine


@asynccontextmanager
async def late_engine_with(
    database_url: str, embedder: Embedder, late: LateInteraction, options: LateOptions
) -> AsyncIterator[PostgresEngine]:
    engine = await PostgresEngine.connect(
        database_url,
        embedder,
        options=EngineOptions(pool=PoolOptions(size=4), indexer=IndexerOptions(background=False), late=options),
        late=late,
    )
    try:
        yield engine
    finally:
        await engine.close()


async def token_rows(engine: PostgresEngine) -> dict[str, bytes]:
    async with engine.connection() as connection:
        rows = await connection.fetch("SELECT item_id, vectors FROM engram_token_vectors")
    return {row["item_id"]: row["vectors"] for row in rows}


def expected_order(hits: list[Hit], late: LateInteraction, weight: float, depth: int) -> list[str]:
    """The ids as the engine should order them: MaxSim over each hit's own words, computed here."""
    question = late.question(QUESTION)
    texts = {text.split(": ", 1)[1]: text for text in TEXTS}
    words = [next(own for own, text in texts.items() if text == hit.text) for hit in hits[:depth]]
    scores = maxsim(question, [unpacked(packed(item), late.dimension) for item in late.items(words)])  # by definition
    judged = dict(zip((hit.id for hit in hits[:depth]), scores.tolist(), strict=True))
    return [hit.id for hit in rescored(hits, judged, weight, depth)]


async def test_token_vectors_are_made_after_the_write_from_an_items_own_words_and_go_with_a_forget(
    late_engine: PostgresEngine, late: LateInteraction
) -> None:
    receipts = await late_engine.store_many([learning(text) for text in TEXTS[:3]])
    assert await token_rows(late_engine) == {}  # the write did not wait for them
    assert late_engine._tokens is not None
    assert await late_engine._tokens.catch_up() == 3
    stored = await token_rows(late_engine)
    assert sorted(stored) == sorted(r.id for r in receipts)
    (own,) = late.items(["I moved to Lisbon in March, the flat is near the river."])  # the role prefix left out
    assert np.array_equal(unpacked(stored[receipts[0].id], late.dimension), unpacked(packed(own), late.dimension))
    assert await late_engine._tokens.catch_up() == 0
    await late_engine.forget(ForgetByIds(ids=[receipts[0].id]))
    assert sorted(await token_rows(late_engine)) == sorted(r.id for r in receipts[1:])


async def test_an_items_token_vectors_stay_in_the_tables_own_pages_unless_it_is_long(
    late_engine: PostgresEngine,
) -> None:
    """A read takes them with the row (migration 0022), not from TOAST: a turn of ~30 word pieces is
    inline; one at the model's 300 goes out of line, as PostgreSQL must."""
    turn = " ".join(["the flat near the river in Lisbon"] * 4)
    long = " ".join(["the flat near the river in Lisbon"] * 60)
    receipts = await late_engine.store_many([learning(turn), learning(long)])
    assert late_engine._tokens is not None and await late_engine._tokens.catch_up() == 2
    async with late_engine.connection() as connection:
        rows = await connection.fetch(
            "SELECT item_id, octet_length(vectors) AS size FROM engram_token_vectors ORDER BY size"
        )
        toast = await connection.fetchval(
            "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'engram_token_vectors'::regclass"
        )
        chunks = await connection.fetch(f"SELECT DISTINCT chunk_id FROM {toast}")
    assert [row["item_id"] for row in rows] == [receipts[0].id, receipts[1].id]
    assert 4_000 < rows[0]["size"] < 8_000 and rows[1]["size"] > 8_160  # past PostgreSQL's ~2 KB default
    assert len(chunks) == 1  # the long item's only


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_pages_are_cut_from_one_order_rescored_by_maxsim(
    pg_engine: PostgresEngine, late_engine: PostgresEngine, late: LateInteraction, mode: str
) -> None:
    await pg_engine.store_many([learning(text) for text in TEXTS])
    assert late_engine._tokens is not None
    await late_engine._tokens.catch_up()
    first = (await pg_engine.fetch(FetchRequest(query=QUESTION, mode=mode, limit=12))).hits
    whole = (await late_engine.fetch(FetchRequest(query=QUESTION, mode=mode, limit=12))).hits
    late_options = LateOptions()
    depth, weight = (late_options.vector_depth, late_options.vector_weight)
    if mode == "hybrid":
        depth, weight = late_options.hybrid_depth, late_options.hybrid_weight
    assert [h.id for h in whole] == expected_order(first, late, weight, depth)
    assert [h.id for h in whole] != [h.id for h in first]  # re-scoring changed the order
    assert [h.score for h in whole] == [h.score for h in first]  # each place keeps its score
    paged: list[Hit] = []
    cursor = None
    while True:
        page = await late_engine.fetch(FetchRequest(query=QUESTION, mode=mode, limit=5, cursor=cursor))
        paged += page.hits
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert [h.id for h in paged] == [h.id for h in whole]
    keyword = FetchRequest(query=QUESTION, mode="keyword", limit=12)
    assert await late_engine.fetch(keyword) == await pg_engine.fetch(keyword)  # keyword is not re-scored


async def test_a_read_makes_what_its_first_hits_lack_so_every_page_keeps_one_order(
    pg_engine: PostgresEngine, late_engine: PostgresEngine, late: LateInteraction
) -> None:
    await pg_engine.store_many([learning(text) for text in TEXTS])
    assert late_engine._tokens is not None and await token_rows(late_engine) == {}  # the writer has not run
    first = (await pg_engine.fetch(FetchRequest(query=QUESTION, mode="hybrid", limit=12))).hits
    depth, weight = LateOptions().hybrid_depth, LateOptions().hybrid_weight
    page = await late_engine.fetch(FetchRequest(query=QUESTION, mode="hybrid", limit=5))
    assert [h.id for h in page.hits] == expected_order(first, late, weight, depth)[:5]  # as if they were stored
    assert await token_rows(late_engine) == {}  # a read stores nothing itself: it hands them to the writer
    assert await late_engine._tokens.step() == len(TEXTS)  # what the read made, stored first
    stored = await token_rows(late_engine)
    assert len(stored) == len(TEXTS)
    rest = await late_engine.fetch(FetchRequest(query=QUESTION, mode="hybrid", limit=5, cursor=page.next_cursor))
    assert [h.id for h in rest.hits] == expected_order(first, late, weight, depth)[5:10]
    assert await late_engine._tokens.catch_up() == 0  # nothing left for the walk


async def test_vector_fetches_keep_the_cosine_order_when_told_to(
    pg_engine: PostgresEngine, database_url: str, embedder: Embedder, late: LateInteraction
) -> None:
    await pg_engine.store_many([learning(text) for text in TEXTS])
    async with late_engine_with(database_url, embedder, late, LateOptions(vector=False)) as engine:
        assert engine._tokens is not None
        await engine._tokens.catch_up()
        for mode in ("vector", "keyword"):
            request = FetchRequest(query=QUESTION, mode=mode, limit=12)
            assert await engine.fetch(request) == await pg_engine.fetch(request)
        hybrid = FetchRequest(query=QUESTION, mode="hybrid", limit=12)
        assert await engine.fetch(hybrid) != await pg_engine.fetch(hybrid)


async def until_made(engine: PostgresEngine, least: int, within_s: float = 30.0) -> None:
    """Wait for at least ``least`` items to have token vectors."""
    for _ in range(int(within_s / 0.02)):
        if len(await token_rows(engine)) >= least:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{least} items did not get token vectors within {within_s} s")


@asynccontextmanager
async def writer_of(engine: PostgresEngine, late: LateInteraction, longest_wait_s: float) -> AsyncIterator[TokenWriter]:
    """A writer of its own for ``engine``, whose items (TEXTS, stored here) lack token vectors; stopped after."""
    await engine.store_many([learning(text) for text in TEXTS])
    writer = TokenWriter(engine.connection, late, poll_s=0.05, longest_wait_s=longest_wait_s)
    try:
        yield writer
    finally:
        await writer.stop()


async def test_the_writer_makes_nothing_while_writes_keep_the_process_busy_and_all_once_they_ease(
    late_engine: PostgresEngine, late: LateInteraction
) -> None:
    async with writer_of(late_engine, late, longest_wait_s=60) as writer:
        with writer.writing():
            await asyncio.sleep(0.6)  # under way for all of the last half second
            writer.start()
            with writer.writing():  # two at once count once
                await asyncio.sleep(0.3)
            await asyncio.sleep(0.3)
            assert writer.busy_share() == pytest.approx(1.0, abs=0.05)
            assert await token_rows(late_engine) == {}
        await asyncio.sleep(0.2)  # ended, but under way for most of the last half second still
        assert await token_rows(late_engine) == {}
        await until_made(late_engine, len(TEXTS))
        assert writer.busy_share() < 0.5


async def test_a_trickle_of_writes_does_not_hold_the_writer_back(
    late_engine: PostgresEngine, late: LateInteraction
) -> None:
    async def trickle(writer: TokenWriter) -> None:
        for _ in range(10_000):  # a write under way a quarter of the time, never 30 ms apart; cancelled
            with writer.writing():
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.03)

    async with writer_of(late_engine, late, longest_wait_s=60) as writer:
        writes = asyncio.create_task(trickle(writer))
        writer.start()
        try:
            await until_made(late_engine, len(TEXTS))
            assert not writes.done()  # made while the writes went on
        finally:
            writes.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writes


async def test_under_writes_that_never_ease_a_step_still_runs_once_its_wait_is_over(
    late_engine: PostgresEngine, late: LateInteraction
) -> None:
    async with writer_of(late_engine, late, longest_wait_s=0.5) as writer:
        with writer.writing():
            await asyncio.sleep(0.6)
            writer.start()
            await until_made(late_engine, 1)


async def test_a_writer_stops_when_told_to_the_moment_a_write_wakes_it(
    late_engine: PostgresEngine, late: LateInteraction
) -> None:
    writer = TokenWriter(late_engine.connection, late, poll_s=60)
    before = asyncio.all_tasks()
    writer.start()
    (task,) = asyncio.all_tasks() - before
    await asyncio.sleep(0.2)  # nothing to make: it waits for a write
    writer.wrote()
    stopping = asyncio.ensure_future(writer.stop())
    await asyncio.wait([stopping], timeout=10)  # not cancelled when the time is up, unlike wait_for
    try:
        assert task.done()  # the stop was not lost in the wake
    finally:
        stopping.cancel()  # should it be waiting still: a second cancel reaches the task
        with contextlib.suppress(asyncio.CancelledError):
            await stopping


async def test_an_item_committed_after_a_later_one_the_walk_passed_still_gets_its_token_vectors(
    late_engine: PostgresEngine, embedder: Embedder
) -> None:
    """Items take their place in the walk as they are inserted and are seen as they commit: the
    earlier one here commits after the writer has made the later one's and passed it."""
    writer = late_engine._tokens
    assert writer is not None
    (earlier,) = StoreManyRequest.model_construct(items=[learning(TEXTS[0])]).checked(late_engine._limits)
    row = item_row(earlier, earlier.render_text())
    (vector,) = await embedder.embed([earlier.render_text()])
    async with late_engine.connection() as connection, connection.transaction():
        assert await late_engine._insert(connection, [row], {row.id: vector}, False) == ({row.id}, None)
        (later,) = await late_engine.store_many([learning(TEXTS[1])])
        assert await writer.catch_up() == 1  # the later item's: the earlier one is not committed yet
    assert await writer.catch_up() == 1  # committed now, behind the walk's place
    assert sorted(await token_rows(late_engine)) == sorted([row.id, later.id])
    assert await writer.catch_up() == 0


class SlowLate:
    """The late encoder, 0.5 s slower a run of stored texts: a step under way long enough to meet."""

    def __init__(self, inner: LateInteraction) -> None:
        self.inner = inner
        self.name = inner.name

    def items(self, texts: list[str], **options: bool) -> list[np.ndarray]:
        time.sleep(0.5)
        return self.inner.items(texts, **options)


async def test_a_catch_up_returns_once_the_step_under_way_has_stored_its_items(
    late_engine: PostgresEngine, late: LateInteraction
) -> None:
    await late_engine.store_many([learning(text) for text in TEXTS])
    writer = TokenWriter(late_engine.connection, cast(LateInteraction, SlowLate(late)), poll_s=0.05)
    try:
        writer.start()
        for _ in range(250):  # until the background step has taken the items (past them in its walk)
            if writer._after > 0:
                break
            await asyncio.sleep(0.01)
        assert writer._after > 0 and await token_rows(late_engine) == {}
        await writer.catch_up()
        assert len(await token_rows(late_engine)) == len(TEXTS)
    finally:
        await writer.stop()


class Slow(WrappedEmbedder):
    """The engine's embedder, 0.6 s slower a call: a write under way long enough to count."""

    async def embed(self, texts: list[str]) -> np.ndarray:
        await asyncio.sleep(0.6)
        return await self.inner.embed(texts)

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        return await self.inner.embed_queries(texts)


async def test_a_write_counts_as_under_way_from_its_encoder_run_to_its_commit(
    pg_engine: PostgresEngine, database_url: str, embedder: Embedder, late: LateInteraction
) -> None:
    async with late_engine_with(database_url, Slow(embedder), late, LateOptions()) as engine:
        assert engine._tokens is not None
        await engine.store_many([learning(TEXTS[0])])
        assert engine._tokens.busy_share() > 0.5
        await asyncio.sleep(1.0)
        await engine.store(learning(TEXTS[1]))  # one store, through the combiner
        assert engine._tokens.busy_share() > 0.5


def test_it_is_on_with_the_default_encoder_and_off_with_the_others_unless_settings_say() -> None:
    assert Settings().late_interaction_on is True  # bge-small, the encoder its weights were chosen with
    assert Settings(embedder="wordllama").late_interaction_on is False
    assert Settings(embedder="minilm").late_interaction_on is False
    assert Settings(embedder="wordllama", late_interaction=True).late_interaction_on is True
    assert Settings(late_interaction=False).late_interaction_on is False
    assert Settings(late_interaction="true").late_interaction_on is True  # as the environment spells it
    with pytest.raises(ValueError):
        Settings(late_interaction="sometimes")
    assert Settings().engine_options.late.vector is True  # vector mode re-scored too: it finds more than keyword
    assert Settings(late_interaction_vector=False).engine_options.late.vector is False
