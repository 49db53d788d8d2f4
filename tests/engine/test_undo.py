"""A forget can be undone within the window, by its receipt; an erasure (purge) cannot, and leaves nothing."""

from __future__ import annotations

from typing import Any

import pytest

from app.contract.errors import Forbidden, InvalidRequest, NotFound
from app.contract.meta import Filter
from app.contract.namespaces import Reach
from app.contract.requests import ExploreRequest, FetchRequest, ForgetByFilter, ForgetByIds, GetRequest
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.postgres.engine import PostgresEngine
from app.engine.postgres.options import EngineOptions, UndoOptions
from app.engine.reference import ReferenceEngine
from tests.engine.postgres.support import tables_holding
from tests.engine.test_contract_rules import CORPUS, all_ids


async def snapshot(engine: Any, ids: list[str]) -> tuple[Any, ...]:
    """What reads answer about the items: get, a ranking, the counts."""
    got = await engine.get(GetRequest(ids=ids))
    ranked = await engine.fetch(FetchRequest(query="what does the user prefer", mode="hybrid", limit=10))
    counted = await engine.explore(ExploreRequest(facet="tag", limit=50))
    return got, [(h.id, round(h.score, 6)) for h in ranked.hits], counted


@pytest.fixture
async def stored(engine: Any) -> list[str]:
    return [r.id for r in await engine.store_many(CORPUS)]


async def test_a_forget_is_undone_by_its_receipt(engine: Any, stored: list[str]) -> None:
    before = await snapshot(engine, stored)
    report = await engine.forget(ForgetByFilter(filter=Filter(tags_any=["lang", "style"])))
    assert report.forgotten == 3 and report.receipt and report.receipt.startswith("fgt_")
    assert len(await all_ids(engine)) == 2, "gone from every read at once"
    assert (await engine.explore(ExploreRequest(facet="tag", limit=50))).total == 2
    restored = await engine.restore(report.receipt)
    assert restored.restored == 3
    assert await snapshot(engine, stored) == before, "the same items, found and ranked as before"
    with pytest.raises(NotFound, match="within the undo window"):
        await engine.restore(report.receipt)  # a receipt restores once


async def test_forget_within_and_by_ids_answer_receipts(engine: Any, stored: list[str]) -> None:
    by_ids = await engine.forget(ForgetByIds(ids=[stored[0], "unknown"]))
    within = await engine.forget_within([stored[1], stored[2]], Reach(at="team:acme", inherit=False))
    assert by_ids.receipt and within.receipt and by_ids.receipt != within.receipt
    assert (await engine.restore(within.receipt)).restored == 1
    assert (await engine.restore(by_ids.receipt)).restored == 1
    assert sorted(await all_ids(engine)) == sorted(stored)
    nothing = await engine.forget(ForgetByIds(ids=["unknown"]))
    assert nothing.forgotten == 0 and nothing.receipt is None


async def test_a_purge_cannot_be_undone_and_erases_kept_copies(engine: Any, stored: list[str]) -> None:
    kept = await engine.forget(ForgetByIds(ids=[stored[0]]))
    purged = await engine.forget(ForgetByIds(ids=[stored[0], stored[1]], purge=True))
    assert purged.forgotten == 1 and purged.receipt is None
    with pytest.raises(NotFound):
        await engine.restore(kept.receipt)  # its only item was erased from the window
    assert stored[0] not in await all_ids(engine) and stored[1] not in await all_ids(engine)


async def test_an_erasure_by_filter_reaches_the_copies_kept_for_undo(engine: Any, stored: list[str]) -> None:
    styled = await engine.forget(ForgetByIds(ids=[stored[0]]))  # tagged style, kept for undo
    rust = await engine.forget(ForgetByIds(ids=[stored[2]]))  # tagged rust and lang
    purged = await engine.forget(ForgetByFilter(filter=Filter(tags_any=["style", "ops"]), purge=True))
    assert purged.forgotten == 1 and purged.receipt is None, "only the item still held counts"
    with pytest.raises(NotFound):
        await engine.restore(styled.receipt)  # its only item matched the erasure
    assert (await engine.restore(rust.receipt)).restored == 1, "a copy the filter does not admit stays"


async def test_a_bad_receipt_is_refused(engine: Any) -> None:
    with pytest.raises(InvalidRequest):
        await engine.restore("  ")
    with pytest.raises(NotFound):
        await engine.restore("fgt_unknown")


async def test_a_restore_outside_a_reach_is_forbidden_and_restores_nothing(engine: Any, stored: list[str]) -> None:
    report = await engine.forget(ForgetByFilter(filter=Filter(tags_any=["style", "ops"])))
    with pytest.raises(Forbidden):
        await engine.restore(report.receipt, within=Reach(at="team:acme/agent:writer", inherit=False))
    assert len(await all_ids(engine)) == 3
    assert (
        await engine.restore(report.receipt, within=Reach(at="team:acme", inherit=False, descendants=True))
    ).restored == 2


async def test_without_a_window_a_forget_is_final(embedder: WordLlamaEmbedder, database_url: str) -> None:
    reference = ReferenceEngine(embedder, undo_window_s=0)
    postgres = await PostgresEngine.connect(database_url, embedder, options=EngineOptions(undo=UndoOptions(window_s=0)))
    try:
        for engine in (reference, postgres):
            [receipt] = await engine.store_many(CORPUS[:1])
            report = await engine.forget(ForgetByIds(ids=[receipt.id]))
            assert report.forgotten == 1 and report.receipt is None
    finally:
        await postgres.close()


async def test_after_a_purge_no_table_holds_the_text_or_the_vector(pg_engine: PostgresEngine) -> None:
    secret = "the vault code is 48151623"
    [receipt] = await pg_engine.store_many([CORPUS[0].model_copy(update={"text": secret})])
    await pg_engine.store_many(CORPUS[1:])
    await pg_engine.finish_indexing()
    assert "engram_items" in await tables_holding(pg_engine, secret), "the check finds an item that is held"
    kept = await pg_engine.forget(ForgetByIds(ids=[receipt.id]))  # in the undo window first
    await pg_engine.forget(ForgetByIds(ids=[receipt.id], purge=True))  # then erased
    assert await tables_holding(pg_engine, secret, receipt.id) == [], "tables that still hold the erased item"
    with pytest.raises(NotFound):
        await pg_engine.restore(kept.receipt)


async def test_after_a_purge_by_filter_no_table_holds_the_text_or_the_vector(pg_engine: PostgresEngine) -> None:
    secret = "the locker code is 2718"
    [receipt] = await pg_engine.store_many([CORPUS[0].model_copy(update={"text": secret})])
    await pg_engine.finish_indexing()
    await pg_engine.forget(ForgetByIds(ids=[receipt.id]))  # in the undo window first
    report = await pg_engine.forget(ForgetByFilter(filter=Filter(tags_any=["style"]), purge=True))
    assert report.forgotten == 0
    assert await tables_holding(pg_engine, secret, receipt.id) == [], "tables that still hold the erased item"


async def test_the_sweeper_drops_what_the_window_no_longer_holds(
    embedder: WordLlamaEmbedder, database_url: str, pg_engine: PostgresEngine
) -> None:
    [receipt] = await pg_engine.store_many(CORPUS[:1])
    report = await pg_engine.forget(ForgetByIds(ids=[receipt.id]))
    assert await pg_engine.sweep_undo() == 0, "still within the window"
    short = await PostgresEngine.connect(
        database_url, embedder, options=EngineOptions(undo=UndoOptions(window_s=0.001))
    )
    try:
        assert await short.sweep_undo() == 1
    finally:
        await short.close()
    with pytest.raises(NotFound):
        await pg_engine.restore(report.receipt)
