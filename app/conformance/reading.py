"""Whole answers read through a probe: every page of a fetch, the ids a read admits, the modes offered.

The read families compare what one filter admits across routes; these helpers read each route to
its end, so a check states only what it expects.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Any

from app.conformance.kit import Failed, Probe, expect, require

# A read that pages further than this never ends: checks store far fewer items.
MAX_PAGES = 200


async def fetch_modes(probe: Probe) -> list[str]:
    """The fetch modes the service's descriptor lists."""
    descriptor = expect(await probe.client.get("/v1/engine"), 200)
    return list(descriptor.get("fetch_modes", []))


def ids_of(hits: Iterable[dict[str, Any]]) -> list[str]:
    return [hit["id"] for hit in hits]


async def listed(probe: Probe, filter: dict[str, Any], page: int = 1000) -> list[str]:
    """The ids ``list`` admits under ``filter``, in the order listed, following cursors."""
    return _flat(await pages(probe, "/v1/list", {"filter": filter, "limit": page}))


async def fetched(probe: Probe, query: str, mode: str, filter: dict[str, Any], page: int = 1000) -> list[str]:
    """The ids of every hit ``fetch`` returns, page after page, until a page without a cursor."""
    return _flat(await pages(probe, "/v1/fetch", {"query": query, "mode": mode, "filter": filter, "limit": page}))


async def pages(probe: Probe, path: str, body: dict[str, Any]) -> list[list[str]]:
    """Each page's ids (``list`` or ``fetch``), following cursors; a read still paging after MAX_PAGES
    pages does not end (a cursor that restarts)."""
    key = "items" if path == "/v1/list" else "hits"
    read: list[list[str]] = []
    for _ in range(MAX_PAGES):
        answer = await probe.call(path, body)
        read.append(ids_of(answer[key]))
        if "next_cursor" not in answer:
            return read
        body = {**body, "cursor": answer["next_cursor"]}
    raise Failed(f"{path} was still paging after {MAX_PAGES} pages of {body['limit']}: its cursors never end")


def _flat(read: list[list[str]]) -> list[str]:
    return [item_id for page in read for item_id in page]


async def explored_total(probe: Probe, filter: dict[str, Any]) -> int:
    """``explore``'s count of the items ``filter`` admits (on the ``kind`` facet, which every item has)."""
    answer = await probe.call("/v1/explore", {"facet": "kind", "filter": filter, "limit": 10})
    return int(answer["total"])


def once_each(ids: list[str], what: str) -> set[str]:
    """The ids as a set, failing when one came twice."""
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    require(not repeated, f"{what} returned {len(repeated)} item(s) twice: {repeated[:3]}")
    return set(ids)


def same_ids(got: Iterable[str], expected: Iterable[str], what: str, names: dict[str, str] | None = None) -> None:
    """Fail unless ``got`` is exactly ``expected``, naming what was missed or let in (by ``names`` when known)."""
    got_set, expected_set = set(got), set(expected)
    named = names or {}
    missed = sorted(named.get(i, i) for i in expected_set - got_set)
    extra = sorted(named.get(i, i) for i in got_set - expected_set)
    faults = ([f"missed {missed}"] if missed else []) + ([f"let in {extra}"] if extra else [])
    require(not faults, f"{what}: {'; '.join(faults)}")


def marker() -> str:
    """A tag no other run holds: it keeps a read that reaches above the check's namespace to the check's items."""
    return f"conformance-{secrets.token_hex(8)}"
