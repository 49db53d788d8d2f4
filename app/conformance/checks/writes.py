"""Writes (contract §1, §5): ids, replays, batches, concurrent writers, forgetting, and get."""

from __future__ import annotations

import asyncio
import secrets
from datetime import datetime
from typing import Any

from app.conformance.fingerprint import WORKED_EXAMPLES, fingerprint
from app.conformance.kit import Probe, check, expect, require
from app.conformance.refusals import refused

HEX = frozenset("0123456789abcdef")


def _unknown_id() -> str:
    return secrets.token_hex(20)


async def _ids_listed(probe: Probe) -> list[str]:
    return [hit["id"] for hit in await probe.list_all()]


async def _get(probe: Probe, ids: list[str], reach: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"ids": ids} if reach is None else {"ids": ids, "reach": reach}
    hits: list[dict[str, Any]] = (await probe.call("/v1/get", body))["hits"]
    return hits


@check("writes")
async def store_writes_then_replays(probe: Probe) -> None:
    item = probe.learning("written once, replayed after")
    first = expect(await probe.post("/v1/store", item), 201)
    item_id = first["id"]
    require(first == {"id": item_id, "replayed": False}, f"a first store answered {first}")
    require(len(item_id) == 40 and set(item_id) <= HEX, f"id {item_id!r} is not 40 lowercase hex characters")
    for _ in range(2):
        again = expect(await probe.post("/v1/store", item), 200)
        require(again == {"id": item_id, "replayed": True}, f"a repeat answered {again}, not a replay of {item_id}")
    require(await _ids_listed(probe) == [item_id], "a replay wrote another item")


@check("writes")
async def ids_are_fingerprints(probe: Probe) -> None:
    """A service's id is the contract's fingerprint, which a client computes offline.

    The worked examples live in namespaces of their own (one at the root), and a fingerprint
    covers the namespace: storing them as given would write outside the run's namespace, and
    forgetting them after could remove a copy someone else holds (a store of it would only be a
    replay). So the kit's own rule is held to the examples' ids, and the service is held to that
    rule on the same items homed in the check's namespace, and on items that exercise each clause.
    """
    for example, expected in WORKED_EXAMPLES:
        require(fingerprint(example) == expected, f"the kit's own rule gives {fingerprint(example)} for {example}")
    learning, document = (dict(example) for example, _ in WORKED_EXAMPLES)
    learning["meta"] = {**learning["meta"], "namespace": probe.ns("team:acme/agent:writer")}
    document["meta"] = {"namespace": probe.ns()}
    conversation = {
        "type": "conversation",
        "turns": [
            {"role": "user", "text": "find the ownership notes", "at": "2024-05-01T10:00:00.250+02:00"},
            {"role": "assistant", "text": "found them", "tool_calls": [{"name": "search", "id": "c1"}]},
            {"role": "tool", "text": "notes", "tool_calls": [], "at": "2024-05-01T08:00:01Z"},
        ],
        "meta": {"namespace": f"  {probe.ns()} ", "tags": [], "observed_at": "2024-05-01T08:00:00Z"},
    }
    certain = {**probe.learning("a whole confidence"), "confidence": 1.0, "evidence": "it was said"}
    tagged = probe.document("tags in order", title="Tagged", tags=["b", "a", "b"], source={"kind": "file", "id": "f"})
    for item in (learning, document, conversation, certain, tagged):
        stored = await probe.store(item)
        require(
            stored == fingerprint(item), f"a {item['type']} stored as {stored}, its fingerprint is {fingerprint(item)}"
        )


@check("writes")
async def one_change_is_another_item(probe: Probe) -> None:
    item = probe.learning("a one character change", tags=["kept"])
    variants = [
        {**item, "text": "a one character chance"},
        {**item, "meta": {**item["meta"], "tags": ["kept", "more"]}},
        {**item, "meta": {**item["meta"], "tags": ["more", "kept"]}},
        {**item, "confidence": 0.7},
        {**item, "kind": "preference"},
    ]
    first = await probe.store(item)
    ids = [await probe.store(v) for v in variants]
    require(len({first, *ids}) == len(variants) + 1, "a changed item answered an id already given")
    require(sorted(await _ids_listed(probe)) == sorted([first, *ids]), "an item is missing after its change")


@check("writes")
async def store_many_answers_in_item_order(probe: Probe) -> None:
    held = probe.learning("held before the batch")
    held_id = await probe.store(held)
    a, b, c = (probe.learning(f"batch item {n}") for n in "abc")
    response = await probe.post("/v1/store_many", {"items": [a, b, a, held, c, b]})
    receipts = expect(response, 200)["receipts"]
    got = [(r["id"], r["replayed"]) for r in receipts]
    ids = [fingerprint(a), fingerprint(b), fingerprint(a), held_id, fingerprint(c), fingerprint(b)]
    expected = list(zip(ids, [False, False, True, True, False, True], strict=True))
    require(got == expected, f"receipts {got}, expected {expected}")
    require(sorted(await _ids_listed(probe)) == sorted(set(ids)), "the batch's items are not each held once")


@check("writes")
async def store_many_is_all_or_nothing(probe: Probe) -> None:
    items = [probe.learning(f"a batch refused whole {n}") for n in range(6)]
    blank = [*items[:3], probe.learning(" "), *items[4:]]
    refused(await probe.post("/v1/store_many", {"items": blank}), 400, "items[3]")
    misshapen = [*items[:3], {k: v for k, v in items[3].items() if k != "text"}, *items[4:]]
    refused(await probe.post("/v1/store_many", {"items": misshapen}), 422, "items[3]")
    require(await _ids_listed(probe) == [], "a refused batch wrote some of its items")


@check("writes")
async def concurrent_identical_writes_make_one_item(probe: Probe) -> None:
    item = probe.learning("twenty writers at once")
    responses = await asyncio.gather(*(probe.post("/v1/store", item) for _ in range(20)))
    answers = [expect(r, 201 if r.status_code == 201 else 200) for r in responses]
    require(len({a["id"] for a in answers}) == 1, "concurrent identical stores answered different ids")
    written = [a for a in answers if a["replayed"] is False]
    require(len(written) == 1, f"{len(written)} of 20 concurrent identical stores answered replayed: false")
    batches = await asyncio.gather(
        *(probe.call("/v1/store_many", {"items": [probe.learning("a batch at once"), item]}) for _ in range(10))
    )
    fresh = sum(not b["receipts"][0]["replayed"] for b in batches)
    require(fresh == 1, f"{fresh} of 10 concurrent identical batches wrote their first item")
    require(len(await _ids_listed(probe)) == 2, "concurrent identical writes made more than one item each")


@check("writes")
async def forget_by_ids_counts_what_it_removed(probe: Probe) -> None:
    a, b, c = await probe.store_all([probe.learning(f"forget me {n}") for n in "abc"])
    answer = await probe.call("/v1/forget", {"ids": [a, a, _unknown_id(), "not an id", b]})
    require(answer.get("forgotten") == 2, f"forgetting two held ids (one twice) and two unknown answered {answer}")
    again = await probe.call("/v1/forget", {"ids": [a, b]})
    require(again.get("forgotten") == 0, f"forgetting them again answered {again}")
    require(await _ids_listed(probe) == [c], "forget removed the wrong items")
    refused(await probe.post("/v1/forget", {"ids": [c, " "]}), 400)
    require(await _ids_listed(probe) == [c], "a refused forget removed an item")


@check("writes")
async def forget_by_filter_needs_a_constraint(probe: Probe) -> None:
    """An empty filter would forget everything, so it is refused; a reach alone is a constraint.

    Against a service that obeys an empty filter, this check forgets everything it holds.
    """
    ids = await probe.store_all([probe.learning("filtered", tags=["t"]), probe.learning("unfiltered")])
    for empty in ({}, {"kinds": []}, {"tags_any": [], "sources": []}):
        refused(await probe.post("/v1/forget", {"filter": empty}), 400)
    require(sorted(await _ids_listed(probe)) == sorted(ids), "a refused forget removed an item")
    tagged = await probe.call("/v1/forget", {"filter": probe.scoped(tags_any=["t"])})
    require(tagged.get("forgotten") == 1, f"forget by a tag answered {tagged}")
    whole = await probe.call("/v1/forget", {"filter": {"reach": probe.reach()}})
    require(whole.get("forgotten") == 1, f"forget by a reach answered {whole}")
    require(await _ids_listed(probe) == [], "forget by filter left an item")


@check("writes")
async def forget_takes_exactly_one_target(probe: Probe) -> None:
    held = await probe.store(probe.learning("one target at a time"))
    refused(await probe.post("/v1/forget", {}), 422)
    both = {"ids": [held], "filter": {"reach": probe.reach()}}
    refused(await probe.post("/v1/forget", both), 422)
    require(await _ids_listed(probe) == [held], "a refused forget removed an item")


@check("writes")
async def forget_within_stays_within(probe: Probe) -> None:
    inside, below, beside, above = (
        await probe.store(probe.learning("inside", below="agent:a")),
        await probe.store(probe.learning("below", below="agent:a/user:u")),
        await probe.store(probe.learning("beside", below="agent:b")),
        await probe.store(probe.learning("above")),
    )
    everything = [inside, below, beside, above, _unknown_id()]
    only_a = {"at": probe.ns("agent:a"), "inherit": False, "descendants": False}
    answer = await probe.call("/v1/forget_within", {"ids": everything, "reach": only_a})
    require(answer.get("forgotten") == 1, f"forget_within at agent:a answered {answer}")
    subtree = {"at": probe.ns("agent:a"), "inherit": False, "descendants": True}
    answer = await probe.call("/v1/forget_within", {"ids": everything, "reach": subtree})
    require(answer.get("forgotten") == 1, f"forget_within below agent:a answered {answer}")
    require(sorted(await _ids_listed(probe)) == sorted([beside, above]), "forget_within removed outside its reach")


@check("writes")
async def get_answers_in_the_order_asked(probe: Probe) -> None:
    a, b, c = await probe.store_all([probe.learning(f"get me {n}") for n in "abc"])
    asked = [c, a, _unknown_id(), c, "not an id", b, a]
    hits = await _get(probe, asked)
    require([h["id"] for h in hits] == [c, a, b], f"get {asked} answered {[h['id'] for h in hits]}")
    require(all(h["score"] == 0.0 for h in hits), "a hit of get with a score other than 0.0")
    require(await _get(probe, [_unknown_id()]) == [], "get of an unknown id answered a hit")


@check("writes")
async def get_leaves_out_what_reach_does_not_admit(probe: Probe) -> None:
    here, child, sibling = (
        await probe.store(probe.learning("here")),
        await probe.store(probe.learning("in a child", below="agent:a")),
        await probe.store(probe.learning("in a sibling", below="agent:b")),
    )
    ids = [here, child, sibling]
    cases = [
        ({"at": probe.ns("agent:a")}, [here, child]),  # inherit by default: the parent too
        ({"at": probe.ns("agent:a"), "inherit": False}, [child]),
        ({"at": probe.ns(), "inherit": False, "descendants": True}, ids),
        ({"at": probe.ns(), "inherit": False}, [here]),
        ({}, []),  # the root alone
    ]
    for reach, expected in cases:
        got = [h["id"] for h in await _get(probe, ids, reach)]
        require(got == expected, f"get with reach {reach} answered {got}, expected {expected}")


@check("writes")
async def stored_item_reads_back_as_stored(probe: Probe) -> None:
    document = probe.document("The body.", title="A title", observed_at="2024-05-01T10:00:00.250+02:00")
    turns = [
        {"role": "user", "text": "look it up"},
        {"role": "assistant", "text": "looking", "tool_calls": [{"name": "search", "id": "c1"}, {"name": "read"}]},
    ]
    conversation = {"type": "conversation", "turns": turns, "meta": {"namespace": probe.ns()}}
    learning = {**probe.learning("exact numbers", tags=["b", "a", "b"]), "confidence": 0.8}
    ids = [await probe.store(item) for item in (document, conversation, learning)]
    hits = {h["id"]: h for h in await _get(probe, ids)}
    doc, talk, learnt = (hits.get(i) for i in ids)
    require(None not in (doc, talk, learnt), "get does not answer a stored item")
    assert doc and talk and learnt
    require(doc["text"] == "# A title\n\nThe body.", f"a titled document reads {doc['text']!r}")
    expected_talk = "user: look it up\nassistant: looking [tools: search (c1), read]"
    require(talk["text"] == expected_talk, f"a conversation reads {talk['text']!r}")
    require(learnt["confidence"] == 0.8, f"confidence 0.8 reads back as {learnt.get('confidence')!r}")
    require(learnt["meta"].get("tags") == ["b", "a", "b"], f"tags read back as {learnt['meta'].get('tags')}")
    kinds = [doc["kind"], talk["kind"], learnt["kind"]]
    require(kinds == ["document", "conversation", "learning"], f"kinds read back as {kinds}")
    for hit in (doc, talk, learnt):
        require(hit["meta"].get("source") == {"kind": "agent"}, f"meta.source reads {hit['meta'].get('source')}")
        require(hit["meta"].get("namespace") == probe.ns(), f"meta.namespace reads {hit['meta'].get('namespace')}")
    observed = str(doc["meta"].get("observed_at"))
    instant = datetime.fromisoformat("2024-05-01T08:00:00.250+00:00")
    require(
        observed.endswith("Z") and datetime.fromisoformat(observed.replace("Z", "+00:00")) == instant,
        f"observed_at 2024-05-01T10:00:00.250+02:00 reads back as {observed!r}",
    )
