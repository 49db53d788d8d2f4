"""Retention on both engines: an expired item is gone from every read at once, a deeper policy
overrides, a hold suspends expiry and its release restores it, a bad ttl changes nothing."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.contract.errors import InvalidRequest, NotFound
from app.contract.meta import Filter
from app.contract.namespaces import Reach
from app.contract.requests import (
    ExploreRequest,
    FetchRequest,
    ForgetByFilter,
    ForgetByIds,
    GetRequest,
    RecallRequest,
)
from app.contract.retention import RetentionRequest, RetentionTarget
from app.contract.transfer import ExportRequest
from app.engine.transfer import export_lines
from tests.engine.test_contract_rules import all_ids, learning

LONG_AGO = (datetime.now(UTC) - timedelta(days=40)).isoformat()
ACME = "team:acme"
WRITER = "team:acme/agent:writer"

OLD_NOTE = learning("the harbour crane lifts containers at dawn", namespace=ACME, observed_at=LONG_AGO, tags=["port"])
OLD_WRITER_NOTE = learning("the writer drafts sonnets about cranes", namespace=WRITER, observed_at=LONG_AGO)
NEW_NOTE = learning("the harbour pilot boards ships at dusk", namespace=ACME, tags=["port"])
ELSEWHERE = learning("the harbour museum opens at nine", namespace="user:bob", observed_at=LONG_AGO, tags=["port"])
ITEMS = [OLD_NOTE, OLD_WRITER_NOTE, NEW_NOTE, ELSEWHERE]


@pytest.fixture
async def ids(engine: Any) -> list[str]:
    return [r.id for r in await engine.store_many(ITEMS)]


async def seen(engine: Any, item_id: str) -> dict[str, bool]:
    """Whether each read returns the item (or counts it)."""
    query = "harbour crane containers sonnets"
    found = {}
    for mode in ("keyword", "vector", "hybrid"):
        page = await engine.fetch(FetchRequest(query=query, mode=mode, limit=10))
        found[mode] = item_id in [h.id for h in page.hits]
        tagged = await engine.fetch(FetchRequest(query=query, mode=mode, limit=10, filter=Filter(tags_any=["port"])))
        found[f"{mode} filtered"] = item_id in [h.id for h in tagged.hits]
    found["list"] = item_id in await all_ids(engine)
    found["get"] = bool(await engine.get(GetRequest(ids=[item_id])))
    recalled = await engine.recall(RecallRequest(question="what does the harbour crane lift", limit=10))
    found["recall"] = item_id in [c.id for c in recalled.citations]
    exported = [line async for line in export_lines(engine, ExportRequest())]
    found["export"] = any(item_id.encode() in line for line in exported)
    preview = await engine.forget(ForgetByIds(ids=[item_id], dry_run=True))
    found["forget preview"] = bool(preview.would_forget)
    return found


async def counted(engine: Any, facet: str = "namespace", request_filter: Filter | None = None) -> dict[str, int]:
    page = await engine.explore(ExploreRequest(facet=facet, limit=50, filter=request_filter or Filter()))
    return {"total": page.total, "missing": page.missing, **{b.value: b.count for b in page.buckets}}


async def test_an_expired_item_is_left_out_of_every_read_at_once(engine: Any, ids: list[str]) -> None:
    old, _, new, elsewhere = ids
    assert all((await seen(engine, old)).values())
    report = await engine.retention.set(RetentionRequest(namespace=ACME, ttl="P30D"))
    assert report.expired == 2 and report.policy.ttl == "P30D" and report.policy.namespace == ACME
    assert not any((await seen(engine, old)).values()), "no read returns it, though no sweep ran"
    assert all((await seen(engine, new)).values()), "stored now: thirty days to go"
    assert (await seen(engine, elsewhere))["get"], "another namespace keeps its items"
    assert await counted(engine) == {"total": 2, "missing": 0, ACME: 1, "user:bob": 1}
    assert await counted(engine, "tag") == {"total": 2, "missing": 0, "port": 2}
    long_ago = f"{datetime.fromisoformat(LONG_AGO).year}-01-01T00:00:00Z"
    assert await counted(engine, "observed_year") == {"total": 2, "missing": 1, long_ago: 1}
    assert (await counted(engine, "kind", Filter(tags_any=["port"])))["total"] == 2


async def test_a_short_ttl_expires_while_reads_go_on(engine: Any) -> None:
    [receipt] = await engine.store_many([learning("a note that lives a second", namespace="user:brief")])
    await engine.retention.set(RetentionRequest(namespace="user:brief", ttl="PT1S"))
    assert await engine.get(GetRequest(ids=[receipt.id]))
    await asyncio.sleep(1.5)
    assert not await engine.get(GetRequest(ids=[receipt.id]))
    assert receipt.id not in await all_ids(engine)
    again = await engine.store(learning("a note that lives a second", namespace="user:brief"))
    assert again.id == receipt.id and not again.replayed, "stored anew, as after a sweep"
    assert await engine.get(GetRequest(ids=[receipt.id]))


async def test_a_deeper_policy_overrides_the_one_above(engine: Any, ids: list[str]) -> None:
    old, old_writer, *_ = ids
    await engine.retention.set(RetentionRequest(namespace=ACME, ttl="P30D"))
    assert not await engine.get(GetRequest(ids=[old, old_writer]))
    longer = await engine.retention.set(RetentionRequest(namespace=WRITER, ttl="P1Y"))
    assert longer.expired == 0
    assert [h.id for h in await engine.get(GetRequest(ids=[old, old_writer]))] == [old_writer]
    shorter = await engine.retention.set(RetentionRequest(namespace=WRITER, ttl="P1D"))
    assert shorter.expired == 1 and not await engine.get(GetRequest(ids=[old_writer]))
    cleared = await engine.retention.clear(RetentionTarget(namespace=WRITER))
    assert cleared.policy is None and not await engine.get(GetRequest(ids=[old_writer])), "the one above again"
    assert [p.namespace for p in await engine.retention.list()] == [ACME]


async def test_a_hold_suspends_every_expiry_beneath_it_and_its_release_restores_them(
    engine: Any, ids: list[str]
) -> None:
    old, old_writer, new, elsewhere = ids
    await engine.retention.set(RetentionRequest(namespace="root", ttl="P7D"))
    await engine.retention.set(RetentionRequest(namespace=WRITER, ttl="P1D"))
    assert [h.id for h in await engine.get(GetRequest(ids=ids))] == [new]
    held = await engine.retention.hold(RetentionTarget(namespace=ACME))
    assert held.expired == 0 and held.policy.hold and held.policy.ttl is None
    assert [h.id for h in await engine.get(GetRequest(ids=ids))] == [old, old_writer, new]
    assert elsewhere not in await all_ids(engine), "a hold reaches only beneath it"
    listed = await engine.retention.list()
    assert [(p.namespace, p.ttl, p.hold) for p in listed] == [
        ("root", "P7D", False),
        (ACME, None, True),
        (WRITER, "P1D", False),
    ]
    released = await engine.retention.release(RetentionTarget(namespace=ACME))
    assert released.expired == 2 and released.policy is None
    assert [h.id for h in await engine.get(GetRequest(ids=ids))] == [new]
    with pytest.raises(NotFound, match="no legal hold stands at namespace 'team:acme'"):
        await engine.retention.release(RetentionTarget(namespace=ACME))
    with pytest.raises(NotFound, match="no ttl is set at namespace 'user:bob'"):
        await engine.retention.clear(RetentionTarget(namespace="user:bob"))


@pytest.mark.parametrize("ttl", ["30 days", "P", "P1.5D", "-P1D", "P0D", "P2000Y"])
async def test_a_bad_ttl_is_refused_and_changes_nothing(engine: Any, ids: list[str], ttl: str) -> None:
    await engine.retention.set(RetentionRequest(namespace=ACME, ttl="P1Y"))
    before = await engine.retention.list()
    with pytest.raises(InvalidRequest, match="invalid request: ttl"):
        await engine.retention.set(RetentionRequest(namespace=ACME, ttl=ttl))
    assert await engine.retention.list() == before
    assert len(await all_ids(engine)) == 4


async def test_a_dry_run_says_what_would_expire_and_changes_nothing(engine: Any, ids: list[str]) -> None:
    preview = await engine.retention.set(RetentionRequest(namespace="root", ttl="P30D", dry_run=True))
    assert (preview.expired, preview.would_expire, preview.policy.ttl) == (0, 3, "P30D")
    assert await engine.retention.list() == [] and len(await all_ids(engine)) == 4
    await engine.retention.set(RetentionRequest(namespace="root", ttl="P30D"))
    hold = await engine.retention.hold(RetentionTarget(namespace="root", dry_run=True))
    assert hold.would_expire == 0 and not (await engine.retention.list())[0].hold


async def test_forget_reaches_the_expired_but_counts_and_keeps_only_the_live(engine: Any, ids: list[str]) -> None:
    old, _, new, _ = ids
    await engine.retention.set(RetentionRequest(namespace=ACME, ttl="P30D"))
    preview = await engine.forget(ForgetByFilter(filter=Filter(tags_any=["port"]), dry_run=True))
    assert preview.would_forget == 2
    report = await engine.forget(ForgetByFilter(filter=Filter(reach=Reach(at=ACME, inherit=False))))
    assert report.forgotten == 1
    await engine.retention.clear(RetentionTarget(namespace=ACME))
    assert old not in await all_ids(engine), "forgotten with the rest, though no read saw it"
    restored = await engine.restore(report.receipt)
    assert restored.restored == 1 and new in await all_ids(engine) and old not in await all_ids(engine)


async def test_the_sweeper_erases_what_has_expired(engine: Any, ids: list[str]) -> None:
    await engine.retention.set(RetentionRequest(namespace=ACME, ttl="P30D"))
    assert await engine.sweep_expired() == 2
    assert await engine.sweep_expired() == 0
    await engine.retention.clear(RetentionTarget(namespace=ACME))
    assert sorted(await all_ids(engine)) == sorted(ids[2:]), "erased: clearing the policy brings nothing back"
