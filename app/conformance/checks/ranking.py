"""Ranking (contract §5): no cut-off, best first, keyword terms after stemming and stop words, phrases.

The words are ones on which PostgreSQL's english configuration and any light stemmer agree
("cats" and "cat", "walked" and "walking"), so a check holds whichever normalisation a service
documents, as long as it is the text-search kind the contract describes.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from app.conformance.kit import Probe, check, expect, require
from app.conformance.reading import fetch_modes, ids_of, pages, same_ids

MODES = ("keyword", "vector", "hybrid")


async def _labelled(probe: Probe, texts: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Store a learning per text; ids by label, and labels by id for failure messages."""
    ids = dict(zip(texts, await probe.store_all([probe.learning(t) for t in texts.values()]), strict=True))
    return ids, {item_id: label for label, item_id in ids.items()}


async def _hits(probe: Probe, query: str, mode: str, limit: int = 1000) -> list[dict[str, Any]]:
    body = {"query": query, "mode": mode, "filter": probe.scoped(), "limit": limit}
    return list((await probe.call("/v1/fetch", body))["hits"])


async def _offers_keyword(probe: Probe) -> bool:
    """Keyword rules bind a service that offers the mode; one that does not must refuse it
    (a_mode_not_offered_is_unsupported)."""
    return "keyword" in await fetch_modes(probe)


async def _keyword(probe: Probe, query: str, ids: dict[str, str], names: dict[str, str], *labels: str) -> None:
    """A keyword fetch of ``query`` finds exactly the items ``labels``."""
    got = ids_of(await _hits(probe, query, "keyword"))
    same_ids(got, [ids[label] for label in labels], f"keyword fetch of {query!r}", names)


# Four items hold "marmalade"; the others share none of its words (nor a stem of them).
CORPUS = {
    "toast": "marmalade on toast for breakfast",
    "jar": "a jar of bitter orange marmalade",
    "recipe": "the marmalade recipe needs sugar and seville oranges",
    "gift": "she gave him marmalade",
    "tides": "tides rise twice a day along the coast",
    "compiler": "the compiler rejects unused variables",
    "violin": "a violin has four strings",
    "glacier": "glaciers carve valleys over millennia",
    "tax": "file the tax return before april",
    "chess": "castling moves the king two squares",
    "kite": "fly the kite when the wind picks up",
    "server": "restart the server after the upgrade",
}
HOLDING = ("toast", "jar", "recipe", "gift")


@check("ranking")
async def every_mode_returns_min_of_limit_and_matches(probe: Probe) -> None:
    ids, names = await _labelled(probe, CORPUS)
    modes = await fetch_modes(probe)
    # Vector (and hybrid, which fuses it) matches every admitted item; keyword the items holding a term.
    matching = {mode: list(ids.values()) for mode in MODES} | {"keyword": [ids[label] for label in HOLDING]}
    for mode in modes:
        expected = matching[mode]
        got = ids_of(await _hits(probe, "marmalade", mode))
        same_ids(got, expected, f"{mode} fetch of 'marmalade' (limit 1000, {len(expected)} matching)", names)
        for limit in (1, 3):
            got = ids_of(await _hits(probe, "marmalade", mode, limit))
            require(len(got) == limit, f"{mode} fetch of limit {limit} over {len(expected)} matches gave {len(got)}")
            require(set(got) <= set(expected), f"{mode} fetch of limit {limit} returned an item that does not match")


def _non_increasing(scores: list[float], what: str) -> None:
    for rank, (before, after) in enumerate(pairwise(scores), start=1):
        require(after <= before, f"{what}: hit {rank + 1} scores {after}, above hit {rank}'s {before}")


@check("ranking")
async def hits_come_best_first(probe: Probe) -> None:
    await _labelled(probe, CORPUS)
    for mode in await fetch_modes(probe):
        for query in ("marmalade", "orange marmalade recipe", "strings of a violin"):
            hits = await _hits(probe, query, mode)
            require(all(isinstance(hit.get("score"), int | float) for hit in hits), f"a {mode} hit has no score")
            _non_increasing([hit["score"] for hit in hits], f"{mode} fetch of {query!r}")
            # Pages continue the one ranking: read page after page, the hits of one page of all, best first
            # (equal scores in either order).
            body = {"query": query, "mode": mode, "filter": probe.scoped(), "limit": 5}
            paged = [i for page in await pages(probe, "/v1/fetch", body) for i in page]
            what = f"{mode} fetch of {query!r} by pages of 5"
            require(sorted(paged) == sorted(ids_of(hits)), f"{what} did not read the hits of one page of all")
            score_of = {hit["id"]: hit["score"] for hit in hits}
            _non_increasing([score_of[i] for i in paged], f"{what}, scored as in one page")


@check("ranking")
async def keyword_matches_stemmed_terms_and_only_them(probe: Probe) -> None:
    if not await _offers_keyword(probe):
        return
    texts = {
        "cat": "the cat slept on the mat",
        "walking": "a walking tour of the harbour",
        "category": "a category of concatenated things",
        "dog": "dogs bark at night",
    }
    ids, names = await _labelled(probe, texts)
    await _keyword(probe, "cats", ids, names, "cat")
    await _keyword(probe, "walked", ids, names, "walking")
    await _keyword(probe, "cat harbour", ids, names, "cat", "walking")
    await _keyword(probe, "zeppelin", ids, names)


@check("ranking")
async def stop_words_alone_match_nothing(probe: Probe) -> None:
    if not await _offers_keyword(probe):
        return
    texts = {"bread": "the history of bread and butter", "sea": "an ode to the sea and the sky"}
    ids, names = await _labelled(probe, texts)
    await _keyword(probe, "the of and", ids, names)
    await _keyword(probe, "the history of", ids, names, "bread")


@check("ranking")
async def quoted_phrases_are_honoured(probe: Probe) -> None:
    if not await _offers_keyword(probe):
        return
    texts = {
        "phrase": "a blue whale surfaced near the harbour walls",
        "apart": "a whale that is blue surfaced near the boat",
        "blue only": "the blue sky over the harbour",
    }
    ids, names = await _labelled(probe, texts)
    await _keyword(probe, '"blue whale"', ids, names, "phrase")
    await _keyword(probe, "blue whale", ids, names, "phrase", "apart", "blue only")
    await _keyword(probe, '"whale blue"', ids, names)
    # A phrase's words are normalised as any term is.
    await _keyword(probe, '"harbour wall"', ids, names, "phrase")


@check("ranking")
async def a_mode_not_offered_is_unsupported(probe: Probe) -> None:
    offered = await fetch_modes(probe)
    require(bool(offered), "the descriptor lists no fetch mode")
    require(set(offered) <= set(MODES), f"the descriptor lists modes beyond the contract's: {offered}")
    await probe.store(probe.learning("marmalade on toast"))
    for mode in MODES:
        body = {"query": "marmalade", "mode": mode, "filter": probe.scoped(), "limit": 5}
        if mode in offered:
            expect(await probe.post("/v1/fetch", body), 200)
        else:
            expect(await probe.post("/v1/fetch", body), 501, "unsupported")
            # The mode is refused before the contract's rules (contract §8).
            expect(await probe.post("/v1/fetch", {**body, "limit": 0}), 501, "unsupported")


@check("ranking")
async def a_blank_query_or_a_limit_out_of_range_is_refused(probe: Probe) -> None:
    await probe.store(probe.learning("marmalade on toast"))
    for mode in await fetch_modes(probe):
        body = {"query": "marmalade", "mode": mode, "filter": probe.scoped(), "limit": 5}
        for query in ("", "   ", "\n\t"):
            expect(await probe.post("/v1/fetch", {**body, "query": query}), 400, "invalid_request")
        for limit in (0, 1001):
            expect(await probe.post("/v1/fetch", {**body, "limit": limit}), 400, "invalid_request")
