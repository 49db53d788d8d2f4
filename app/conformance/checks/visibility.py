"""Visibility (contract §5): every write is seen by every read as soon as its call returns, and every
forget likewise; each read is asked right after its own write, so a read one call late is caught."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from app.conformance.kit import Probe, check, expect, require

Read = Callable[[Probe, str, str, dict[str, Any]], Awaitable[bool]]
FILLERS = 4  # other items in the namespace, so that a vector ranking has something to rank
LIMIT = 10


def word() -> str:
    """A word no other item holds, and no stemmer changes: consonants only."""
    return "zv" + "".join(secrets.choice("bcdfghjklmnpqrstvwxz") for _ in range(10))


async def _modes(probe: Probe) -> list[str]:
    return list(expect(await probe.client.get("/v1/engine"), 200)["fetch_modes"])


async def _got(probe: Probe, item_id: str, token: str, scope: dict[str, Any]) -> bool:
    hits = (await probe.call("/v1/get", {"ids": [item_id]}))["hits"]
    return [h["id"] for h in hits] == [item_id]


async def _listed(probe: Probe, item_id: str, token: str, scope: dict[str, Any]) -> bool:
    return item_id in [h["id"] for h in await probe.list_all(scope)]


def _fetched(mode: str) -> Read:
    async def read(probe: Probe, item_id: str, token: str, scope: dict[str, Any]) -> bool:
        body = {"query": f"{token} notes", "mode": mode, "limit": LIMIT, "filter": scope}
        return item_id in [h["id"] for h in (await probe.call("/v1/fetch", body))["hits"]]

    return read


async def _counted(probe: Probe, item_id: str, token: str, scope: dict[str, Any]) -> bool:
    body = {"facet": "tag", "limit": 5, "filter": scope}
    buckets = (await probe.call("/v1/explore", body))["buckets"]
    return {"value": token, "count": 1} in buckets


async def _cited(probe: Probe, item_id: str, token: str, scope: dict[str, Any]) -> bool:
    # Recall need cite only one of the items its filter admits: this filter admits only the new one.
    body = {"question": f"what are the {token} notes", "limit": 3, "filter": {**scope, "tags_any": [token]}}
    answer = await probe.call("/v1/recall", body)
    require(bool(answer["answer"].strip()), "recall answered a blank answer")
    return item_id in [c["id"] for c in answer["citations"]]


async def _reads(probe: Probe) -> dict[str, Read]:
    reads: dict[str, Read] = {"get": _got, "list": _listed, "explore": _counted, "recall": _cited}
    reads.update({f"fetch {mode}": _fetched(mode) for mode in await _modes(probe)})
    return reads


async def _fillers(probe: Probe, below: str) -> None:
    topics = ["tides and the moon", "sourdough starters", "a bicycle's gears", "chess openings", "tea leaves"]
    await probe.store_all([probe.learning(f"notes on {t}", below=below) for t in topics[:FILLERS]])


def _fresh(probe: Probe, below: str) -> tuple[dict[str, Any], str]:
    token = word()
    return probe.learning(f"the {token} notes say the meeting moved to tuesday", below=below, tags=[token]), token


@check("visibility")
async def a_store_is_seen_by_every_read_at_once(probe: Probe) -> None:
    for name, read in (await _reads(probe)).items():
        below = f"agent:{name.replace(' ', '-')}"
        await _fillers(probe, below)
        item, token = _fresh(probe, below)
        item_id = await probe.store(item)
        require(await read(probe, item_id, token, {"reach": probe.reach(below)}), f"{name} missed a store")


@check("visibility")
async def a_batch_is_seen_by_every_read_at_once(probe: Probe) -> None:
    for name, read in (await _reads(probe)).items():
        below = f"agent:{name.replace(' ', '-')}"
        await _fillers(probe, below)
        item, token = _fresh(probe, below)
        other, _ = _fresh(probe, below)
        item_id = (await probe.store_all([other, item]))[1]
        scope = {"reach": probe.reach(below)}
        require(await read(probe, item_id, token, scope), f"{name} missed an item of a batch")


@check("visibility")
async def a_forget_is_seen_by_every_read_at_once(probe: Probe) -> None:
    for name, read in (await _reads(probe)).items():
        below = f"agent:{name.replace(' ', '-')}"
        await _fillers(probe, below)
        item, token = _fresh(probe, below)
        item_id = await probe.store(item)
        scope = {"reach": probe.reach(below)}
        require(await read(probe, item_id, token, scope), f"{name} missed a store")
        forgotten = await probe.call("/v1/forget", {"ids": [item_id]})
        require(forgotten.get("forgotten") == 1, f"forget answered {forgotten}")
        require(not await read(probe, item_id, token, scope), f"{name} still sees a forgotten item")


@check("visibility")
async def every_way_of_forgetting_is_seen_at_once(probe: Probe) -> None:
    ways: list[tuple[str, Callable[[str, str], tuple[str, dict[str, Any]]]]] = [
        ("forget by filter", lambda _, below: ("/v1/forget", {"filter": {"reach": probe.reach(below)}})),
        (
            "forget_within",
            lambda item_id, below: ("/v1/forget_within", {"ids": [item_id], "reach": probe.reach(below)}),
        ),
    ]
    reads = await _reads(probe)
    for way, target in ways:
        for name, read in reads.items():
            below = f"agent:{way.replace(' ', '-')}/user:{name.replace(' ', '-')}"
            item, token = _fresh(probe, below)
            item_id = await probe.store(item)
            path, body = target(item_id, below)
            answer = await probe.call(path, body)
            require(answer.get("forgotten") == 1, f"{way} answered {answer}")
            require(not await read(probe, item_id, token, {"reach": probe.reach(below)}), f"{name} sees after {way}")
