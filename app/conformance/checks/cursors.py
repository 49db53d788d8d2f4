"""Cursors (contract §5): following them visits every match once and ends; a cursor is bound to its request.

A service that cannot read a cursor must refuse it (``invalid_request``), never restart from the
first page: a client would read the same items again without knowing it.
"""

from __future__ import annotations

from typing import Any

from app.conformance.kit import Failed, Probe, check, expect, require
from app.conformance.reading import MAX_PAGES, fetch_modes, fetched, ids_of, listed, once_each, pages, same_ids

WORD = "gooseberry"
PAGE = 2
# Items are written between the first pages only, so a service that lists them too still ends.
WRITING_PAGES = 3


async def _corpus(probe: Probe, count: int = 7, batch: str = "") -> list[str]:
    """``count`` items, each holding WORD, told apart by a number and a topic (and tagged by ``batch``)."""
    topics = ["harbour", "violin", "glacier", "lantern", "orchard", "comet", "ledger", "falcon", "quarry"]
    texts = [f"{WORD} {batch} note {n} about the {topics[n % len(topics)]}" for n in range(count)]
    tags = {"tags": [batch.replace(" ", "-")]} if batch else {}
    return await probe.store_all([probe.learning(text, **tags) for text in texts])


async def _first_cursor(probe: Probe, path: str, body: dict[str, Any]) -> str:
    answer = await probe.call(path, body)
    require("next_cursor" in answer, f"{path} of limit {body['limit']} over more matches gave no next_cursor")
    return str(answer["next_cursor"])


def _fetch(probe: Probe, mode: str, **more: Any) -> dict[str, Any]:
    return {"query": WORD, "mode": mode, "filter": probe.scoped(), "limit": PAGE, **more}


async def _paged_once_each(probe: Probe, path: str, body: dict[str, Any], expected: list[str], what: str) -> None:
    """Following cursors from ``body`` reads ``expected`` once each, in full pages, the last without a cursor."""
    read = await pages(probe, path, body)
    same_ids(once_each([i for page in read for i in page], what), expected, what)
    # Every page full but the last, and the page that ends the matches carries no cursor (no empty page after it).
    whole, rest = divmod(len(expected), PAGE)
    sizes, wanted = [len(page) for page in read], [PAGE] * whole + ([rest] if rest else [])
    require(sizes == wanted, f"{what} of {len(expected)} matches by {PAGE} came in pages of {sizes}, expected {wanted}")


@check("cursors")
async def list_cursors_visit_every_match_once_and_end(probe: Probe) -> None:
    for count in (7, 8):
        stored = await _corpus(probe, count, f"batch {count}")
        filter = probe.scoped(tags_any=[f"batch-{count}"])
        await _paged_once_each(probe, "/v1/list", {"filter": filter, "limit": PAGE}, stored, "paging list")


@check("cursors")
async def fetch_cursors_visit_every_hit_once_and_end(probe: Probe) -> None:
    stored = await _corpus(probe, 8)
    for mode in await fetch_modes(probe):
        whole = await fetched(probe, WORD, mode, probe.scoped())
        same_ids(whole, stored, f"{mode} fetch of {WORD!r}, which every item holds")
        await _paged_once_each(probe, "/v1/fetch", _fetch(probe, mode), stored, f"paging {mode} fetch")


def _tampered(cursor: str) -> str:
    """The cursor with one character from its middle on changed, within its own alphabet."""
    at = next((i for i in range(len(cursor) // 2, len(cursor)) if cursor[i].isalnum()), len(cursor) // 2)
    swapped = "B" if cursor[at : at + 1] == "A" else "A"
    return cursor[:at] + swapped + cursor[at + 1 :]


def _forgeries(cursor: str) -> dict[str, str]:
    return {
        "garbage": "not-a-cursor",
        "empty": "",
        "truncated": cursor[: max(1, len(cursor) - 3)],
        "tampered": _tampered(cursor),
        "extended": cursor + "A",
    }


async def _refused(probe: Probe, path: str, body: dict[str, Any], what: str) -> None:
    response = await probe.post(path, body)
    if response.status_code == 200:
        raise Failed(f"{path} accepted {what} (a cursor must be refused, never read as a restart)")
    expect(response, 400, "invalid_request")


@check("cursors")
async def a_cursor_not_issued_is_refused(probe: Probe) -> None:
    await _corpus(probe)
    listing = {"filter": probe.scoped(), "limit": PAGE}
    cursor = await _first_cursor(probe, "/v1/list", listing)
    for name, forged in _forgeries(cursor).items():
        await _refused(probe, "/v1/list", {**listing, "cursor": forged}, f"a {name} list cursor")
    for mode in await fetch_modes(probe):
        cursor = await _first_cursor(probe, "/v1/fetch", _fetch(probe, mode))
        for name, forged in _forgeries(cursor).items():
            await _refused(probe, "/v1/fetch", _fetch(probe, mode, cursor=forged), f"a {name} {mode} fetch cursor")


@check("cursors")
async def a_cursor_is_bound_to_its_query_filter_and_mode(probe: Probe) -> None:
    await _corpus(probe)
    listing = {"filter": probe.scoped(), "limit": PAGE}
    cursor = await _first_cursor(probe, "/v1/list", listing)
    other_filter = probe.scoped(tags_any=["other"])
    await _refused(
        probe, "/v1/list", {"filter": other_filter, "limit": PAGE, "cursor": cursor}, "a list cursor for another filter"
    )
    modes = await fetch_modes(probe)
    await _refused(probe, "/v1/fetch", _fetch(probe, modes[0], cursor=cursor), "a list cursor in a fetch")
    for mode in modes:
        cursor = await _first_cursor(probe, "/v1/fetch", _fetch(probe, mode))
        await _refused(
            probe,
            "/v1/fetch",
            _fetch(probe, mode, query=f"{WORD} orchard", cursor=cursor),
            f"a {mode} fetch cursor for another query",
        )
        await _refused(
            probe,
            "/v1/fetch",
            _fetch(probe, mode, filter=other_filter, cursor=cursor),
            f"a {mode} fetch cursor for another filter",
        )
        for other in modes:
            if other != mode:
                await _refused(
                    probe, "/v1/fetch", _fetch(probe, other, cursor=cursor), f"a {mode} fetch cursor in {other} mode"
                )
        await _refused(probe, "/v1/list", {**listing, "cursor": cursor}, f"a {mode} fetch cursor in a list")


@check("cursors")
async def listing_is_stable_under_concurrent_writes(probe: Probe) -> None:
    present = await _corpus(probe, 9)
    body: dict[str, Any] = {"filter": probe.scoped(), "limit": PAGE}
    seen: list[str] = []
    for page in range(MAX_PAGES):
        answer = await probe.call("/v1/list", body)
        seen += ids_of(answer["items"])
        if "next_cursor" not in answer:
            break
        body["cursor"] = answer["next_cursor"]
        if page >= WRITING_PAGES:
            continue
        # Between pages: two new items, and one already listed is forgotten (it was not present throughout).
        await probe.store_all([probe.learning(f"{WORD} written while paging, page {page}, {n}") for n in range(2)])
        listed_before = [i for i in seen if i in present]
        if listed_before:
            gone = listed_before[0]
            await probe.call("/v1/forget", {"ids": [gone]})
            present.remove(gone)
    else:
        raise Failed(f"list was still paging after {MAX_PAGES} pages: its cursors never end")
    once_each(seen, "list paged while items were written and forgotten")
    skipped = set(present) - set(seen)
    require(not skipped, f"list paged under writes skipped {len(skipped)} item(s) present throughout")
    # Everything written is there for the next reader.
    require(set(present) <= set(await listed(probe, probe.scoped())), "an item present throughout was lost")
