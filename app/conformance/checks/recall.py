"""Recall (contract §5): citations within the limit and the filter, one at least when the filter admits
any item, an answer that is never blank, and citation ids that resolve through ``get``.

Items sit in two sibling nodes, the sibling's about the question itself: a recall that leaks past
its filter cites them first.
"""

from __future__ import annotations

from typing import Any

from app.conformance.kit import Probe, check, require

KINDS = ("document", "conversation", "learning")
CITATION_KEYS = {"id", "kind", "snippet", "meta", "score"}

ASKED = "where does the lighthouse keeper live?"
NEARBY = [
    "the baker sells rye bread in the village square",
    "the river floods the lower meadow every spring",
    "the library opens at nine on weekdays",
]
ABOUT_IT = [
    "the lighthouse keeper lives in the cottage beside the lighthouse",
    "the lighthouse keeper lives on the island all year",
    "where the lighthouse keeper lives: a cottage on the island",
]


async def _siblings(probe: Probe) -> tuple[list[str], list[str]]:
    """Items in ``agent:a`` (not about the question) and in its sibling ``agent:c`` (about it)."""
    near = await probe.store_all([probe.learning(t, below="agent:a") for t in NEARBY])
    about = await probe.store_all([probe.learning(t, below="agent:c") for t in ABOUT_IT])
    return near, about


async def _recall(probe: Probe, filter: dict[str, Any], limit: int, question: str = ASKED, **more: Any) -> Any:
    answer = await probe.call("/v1/recall", {"question": question, "filter": filter, "limit": limit, **more})
    require(isinstance(answer.get("answer"), str), "a recall answer has no answer text")
    require(isinstance(answer.get("citations"), list), "a recall answer has no citations list")
    for citation in answer["citations"]:
        _citation_shape(citation)
    return answer


def _citation_shape(citation: Any) -> None:
    require(isinstance(citation, dict), f"a citation is not an object: {citation!r}")
    keys = set(citation)
    require(keys >= CITATION_KEYS - {"score"}, f"a citation lacks {sorted(CITATION_KEYS - {'score'} - keys)}")
    require(keys <= CITATION_KEYS, f"a citation carries keys beyond the contract's: {sorted(keys - CITATION_KEYS)}")
    require(citation["kind"] in KINDS, f"a citation's kind is {citation['kind']!r}")
    require(isinstance(citation["snippet"], str), "a citation's snippet is not a string")
    require(isinstance(citation["meta"], dict), "a citation's meta is not an object")
    score = citation.get("score")
    require(score is None or isinstance(score, int | float), f"a citation's score is {score!r}")


@check("recall")
async def citations_stay_within_the_limit_and_the_filter(probe: Probe) -> None:
    near, _ = await _siblings(probe)
    for limit in (1, 2, 10):
        answer = await _recall(probe, probe.scoped(reach=probe.reach("agent:a")), limit)
        cited = [c["id"] for c in answer["citations"]]
        require(len(cited) <= limit, f"recall of limit {limit} cited {len(cited)} items")
        outside = [i for i in cited if i not in near]
        require(not outside, f"recall of limit {limit} within agent:a cited {len(outside)} item(s) from outside it")
        for citation in answer["citations"]:
            require(
                citation["meta"].get("namespace") == probe.ns("agent:a"),
                f"a citation's meta.namespace is {citation['meta'].get('namespace')!r}, not its item's",
            )
    # A filter's other fields bound the citations as its reach does.
    tagged = await probe.store(
        probe.learning("the keeper's notes are kept in a tin box", below="agent:c", tags=["tin"])
    )
    answer = await _recall(probe, probe.scoped(tags_any=["tin"]), 10)
    cited = [c["id"] for c in answer["citations"]]
    require(cited == [tagged], f"recall with tags_any ['tin'] cited {len(cited)} item(s), expected the one tagged")


@check("recall")
async def a_filter_that_admits_items_gets_a_citation(probe: Probe) -> None:
    await _siblings(probe)
    for question in ("what is the capital of peru?", ASKED):
        answer = await _recall(probe, probe.scoped(reach=probe.reach("agent:a")), 3, question)
        require(bool(answer["citations"]), f"recall of {question!r} cited nothing though its filter admits 3 items")


@check("recall")
async def the_answer_is_never_blank(probe: Probe) -> None:
    await _siblings(probe)
    answer = await _recall(probe, probe.scoped(reach=probe.reach("agent:c")), 3)
    require(answer["answer"].strip() != "", "recall answered blank with the answer stored")
    # A node where nothing is stored: no citation, and an answer that says so.
    answer = await _recall(probe, probe.scoped(reach=probe.reach("agent:empty")), 3)
    require(answer["answer"].strip() != "", "recall answered blank when nothing within the filter is stored")
    require(answer["citations"] == [], f"recall within an empty node cited {len(answer['citations'])} item(s)")


@check("recall")
async def citation_ids_resolve_through_get(probe: Probe) -> None:
    await _siblings(probe)
    answer = await _recall(probe, probe.scoped(), 10)
    cited = [c["id"] for c in answer["citations"]]
    require(bool(cited), "recall over six items cited none")
    got = await probe.call("/v1/get", {"ids": cited})
    found = {hit["id"]: hit for hit in got["hits"]}
    unresolved = [i for i in cited if i not in found]
    require(not unresolved, f"{len(unresolved)} citation id(s) do not resolve through get: {unresolved[:2]}")
    for citation in answer["citations"]:
        require(
            found[citation["id"]]["kind"] == citation["kind"],
            f"citation {citation['id']} says kind {citation['kind']!r}, get says {found[citation['id']]['kind']!r}",
        )


@check("recall")
async def instructions_are_accepted(probe: Probe) -> None:
    near, _ = await _siblings(probe)
    answer = await _recall(
        probe, probe.scoped(reach=probe.reach("agent:a")), 2, instructions="answer in one short sentence"
    )
    require(answer["answer"].strip() != "", "recall with instructions answered blank")
    require({c["id"] for c in answer["citations"]} <= set(near), "recall with instructions cited outside its filter")
