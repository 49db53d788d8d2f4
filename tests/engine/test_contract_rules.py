"""Every contract rule, run against both engines (reference and PostgreSQL) so the two agree."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.contract.errors import InvalidRequest
from app.contract.items import ITEM_ADAPTER, StoredItem
from app.contract.meta import Filter
from app.contract.namespaces import Reach
from app.contract.requests import (
    ExploreRequest,
    FetchRequest,
    ForgetByFilter,
    ForgetByIds,
    GetRequest,
    ListRequest,
    RecallRequest,
    narrow,
)
from app.engine import keywords
from app.engine.keywords import MAX_TERMS


def item(data: dict[str, Any]) -> StoredItem:
    return ITEM_ADAPTER.validate_python(data)


def learning(text: str, **meta: Any) -> StoredItem:
    return item({"type": "learning", "text": text, "kind": "fact", "confidence": 0.5, "meta": meta})


def document(body: str, title: str | None = None, **meta: Any) -> StoredItem:
    data: dict[str, Any] = {"type": "document", "body": {"text": body}, "meta": meta}
    if title is not None:
        data["title"] = title
    return item(data)


CORPUS = [
    learning("the user prefers tabs over spaces", namespace="team:acme/agent:writer", tags=["style"]),
    learning("deploys happen on fridays after lunch", namespace="team:acme", tags=["ops", "calendar"]),
    document(
        "Ownership moves values. The borrow checker enforces the rules.",
        title="Rust ownership",
        folder="/notes/rust",
        file_path="/notes/rust/ownership.md",
        language="en",
        tags=["rust", "lang"],
    ),
    document("Python uses reference counting for memory.", folder="/notes/python", tags=["lang"]),
    item(
        {
            "type": "conversation",
            "turns": [
                {"role": "user", "text": "what is the capital of France?"},
                {"role": "assistant", "text": "Paris is the capital.", "tool_calls": [{"name": "search", "id": "c1"}]},
            ],
            "meta": {
                "thread_id": "t-1",
                "agent_id": "agent-7",
                "turns": {"first": 0, "last": 1},
                "tool_call": {"name": "search"},
                "source": {"kind": "conversation", "id": "chat-9"},
                "namespace": "team:acme/agent:reviewer",
                "observed_at": "2026-10-04T09:30:00+02:00",
            },
        }
    ),
]


@pytest.fixture
async def stored(engine: Any) -> list[str]:
    receipts = await engine.store_many(CORPUS)
    return [r.id for r in receipts]


async def all_ids(engine: Any, request_filter: Filter | None = None) -> list[str]:
    page = await engine.list(ListRequest(filter=request_filter or Filter(), limit=1000))
    return [hit.id for hit in page.items]


# Store.


async def test_store_is_idempotent_by_fingerprint(engine: Any) -> None:
    first = await engine.store(CORPUS[0])
    again = await engine.store(CORPUS[0])
    assert first.replayed is False
    assert again.replayed is True
    assert again.id == first.id == CORPUS[0].checked().fingerprint()
    assert await all_ids(engine) == [first.id]


async def test_one_tag_more_is_a_new_item_and_the_old_one_stays(engine: Any) -> None:
    a = await engine.store(learning("x marks the spot", tags=["a"]))
    b = await engine.store(learning("x marks the spot", tags=["a", "b"]))
    assert a.id != b.id
    assert sorted(await all_ids(engine)) == sorted([a.id, b.id])


async def test_store_many_receipts_in_order_and_repeat_replays_first_copy(engine: Any) -> None:
    batch = [CORPUS[0], CORPUS[1], CORPUS[0]]
    receipts = await engine.store_many(batch)
    first, second = (i.checked().fingerprint() for i in batch[:2])
    assert [r.id for r in receipts] == [first, second, first]
    assert [r.replayed for r in receipts] == [False, False, True]


async def test_store_many_with_an_invalid_item_writes_nothing(engine: Any) -> None:
    bad = item({"type": "learning", "text": "  ", "kind": "fact", "confidence": 0.5})
    with pytest.raises(InvalidRequest, match=r"items\[2\]"):
        await engine.store_many([CORPUS[0], CORPUS[1], bad])
    assert await all_ids(engine) == []


async def test_store_refuses_a_uri_body(engine: Any) -> None:
    with pytest.raises(InvalidRequest, match="uri"):
        await engine.store(item({"type": "document", "body": {"uri": "https://example.com/a"}}))


# Fetch.


async def test_keyword_question_finds_items_holding_its_words(engine: Any, stored: list[str]) -> None:
    page = await engine.fetch(FetchRequest(query="What does the user prefer, tabs?", mode="keyword", limit=10))
    # The learning holds three of its words; the conversation only "user" (its role).
    assert [h.id for h in page.hits] == [stored[0], stored[4]]
    assert page.hits[0].text == "the user prefers tabs over spaces"


async def test_keyword_is_or_over_terms(engine: Any, stored: list[str]) -> None:
    page = await engine.fetch(FetchRequest(query="fridays ownership", mode="keyword", limit=10))
    assert sorted(h.id for h in page.hits) == sorted([stored[1], stored[2]])


async def test_keyword_phrase_in_quotes_is_honoured(engine: Any, stored: list[str]) -> None:
    page = await engine.fetch(FetchRequest(query='"borrow checker"', mode="keyword", limit=10))
    assert [h.id for h in page.hits] == [stored[2]]
    none = await engine.fetch(FetchRequest(query='"checker borrow"', mode="keyword", limit=10))
    assert none.hits == []


async def test_keyword_of_stop_words_only_matches_nothing(engine: Any, stored: list[str]) -> None:
    page = await engine.fetch(FetchRequest(query="the of and", mode="keyword", limit=10))
    assert page.hits == []


# Stop words of both engines (PostgreSQL's english ones too), more than a query's MAX_TERMS.
STOP_WORDS = sorted(keywords.STOP_WORDS)


async def test_keyword_stop_words_leave_the_words_after_them_searched(engine: Any, stored: list[str]) -> None:
    """MAX_TERMS counts the terms that are not stop words: more stop words than that first still leave the rest."""
    assert len(STOP_WORDS) > MAX_TERMS
    page = await engine.fetch(FetchRequest(query=" ".join([*STOP_WORDS, "ownership"]), mode="keyword", limit=10))
    assert [h.id for h in page.hits] == [stored[2]]
    question = (
        "could you please remind me what it was that we had said to each other about the way in which we should"
        " all be handling it when there is some sort of problem with borrowing and ownership"
    )
    page = await engine.fetch(FetchRequest(query=question, mode="keyword", limit=10))
    assert [h.id for h in page.hits] == [stored[2]]


async def test_keyword_searches_a_token_the_text_search_keeps_whole(engine: Any, stored: list[str]) -> None:
    """An email, a file name, a version or a path is one token to the text search, and a query searches it so;
    a run it splits still finds its words."""
    tokens = ["alice@example.com", "main.py", "3.11.4", "/etc/nginx/nginx.conf"]
    receipts = await engine.store_many([learning(f"see {t} for the details") for t in tokens])
    for token, receipt in zip(tokens, receipts, strict=True):
        for query in (token, f"where is {token}?", f'"see {token}"'):
            page = await engine.fetch(FetchRequest(query=query, mode="keyword", limit=10))
            assert [h.id for h in page.hits] == [receipt.id], query
    for query in ("tabs/spaces", "tabs,spaces", "spaces-tabs"):
        page = await engine.fetch(FetchRequest(query=query, mode="keyword", limit=10))
        assert [h.id for h in page.hits] == [stored[0]], query


async def test_keyword_input_is_never_syntax(engine: Any, stored: list[str]) -> None:
    hostile = ["'", "\\", ":*", "&|!()", "%", "_", "tabs:* & !", "a' OR '1'='1", "a@b.c' | 'd", "x.py':*", "/a\\'b"]
    for query in [*hostile, "1.2'<->'3", "'tabs'':*", "\"tabs' & !'spaces\""]:
        page = await engine.fetch(FetchRequest(query=query, mode="keyword", limit=10))
        assert all(h.id in stored for h in page.hits)


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_vector_and_hybrid_have_no_cut_off(engine: Any, stored: list[str], mode: str) -> None:
    page = await engine.fetch(FetchRequest(query="completely unrelated words", mode=mode, limit=3))
    assert len(page.hits) == 3
    everything = await engine.fetch(FetchRequest(query="completely unrelated words", mode=mode, limit=100))
    assert sorted(h.id for h in everything.hits) == sorted(stored)
    scores = [h.score for h in everything.hits]
    assert scores == sorted(scores, reverse=True)


async def test_vector_ranks_by_meaning(engine: Any, stored: list[str]) -> None:
    page = await engine.fetch(FetchRequest(query="capital city of France", mode="vector", limit=1))
    assert page.hits[0].id == stored[4]


async def test_hybrid_puts_a_keyword_and_vector_match_first(engine: Any, stored: list[str]) -> None:
    page = await engine.fetch(FetchRequest(query="tabs or spaces preference", mode="hybrid", limit=5))
    assert page.hits[0].id == stored[0]


@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
async def test_fetch_pages_visit_every_hit_once(engine: Any, mode: str) -> None:
    ids = [r.id for r in await engine.store_many([learning(f"note {n} about gardening") for n in range(7)])]
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = await engine.fetch(FetchRequest(query="gardening", mode=mode, limit=3, cursor=cursor))
        seen += [h.id for h in page.hits]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids)


async def test_hybrid_pages_cut_one_order_over_varied_items(engine: Any) -> None:
    """Items unlike each other, so the keyword and vector rankings disagree and pages run past the
    fusion's depth: fused again at each page's own depth, pages repeated and skipped items."""
    chance = random.Random(11)
    words = [
        "ownership",
        "borrow",
        "lifetime",
        "garden",
        "tomato",
        "compost",
        "mutex",
        "thread",
        "async",
        "queue",
        "river",
        "bridge",
    ]
    texts = {" ".join(chance.choice(words) for _ in range(chance.randrange(3, 9))) + f" {n}" for n in range(130)}
    ids = [r.id for r in await engine.store_many([learning(t) for t in sorted(texts)[:100]])]
    ids += [r.id for r in await engine.store_many([learning(t) for t in sorted(texts)[100:]])]
    query = "ownership of the garden mutex"
    whole = await engine.fetch(FetchRequest(query=query, mode="hybrid", limit=1000))
    assert sorted(h.id for h in whole.hits) == sorted(ids)
    pages: list[Any] = []
    cursor = None
    while True:
        page = await engine.fetch(FetchRequest(query=query, mode="hybrid", limit=7, cursor=cursor))
        pages += page.hits
        cursor = page.next_cursor
        if cursor is None:
            break
    assert [h.id for h in pages] == [h.id for h in whole.hits]
    scores = [h.score for h in pages]
    assert scores == sorted(scores, reverse=True)


async def test_an_item_forgotten_and_stored_again_while_paging_is_not_listed_twice(engine: Any) -> None:
    """Stored again, an item takes a new place at the end of the listing; a cursor that had passed
    it met it there again. A listing holds what was stored when its first page was read."""
    items = [learning(f"paging note {n}", tags=["paged"]) for n in range(3)]
    first, second, third = [r.id for r in await engine.store_many(items)]
    only = Filter.model_validate({"tags_any": ["paged"]})
    page = await engine.list(ListRequest(filter=only, limit=1))
    assert [h.id for h in page.items] == [first]
    assert (await engine.forget(ForgetByIds(ids=[first]))).forgotten == 1
    assert (await engine.store(items[0])).replayed is False
    late = (await engine.store(learning("paging note, stored late", tags=["paged"]))).id
    seen = [h.id for h in page.items]
    cursor = page.next_cursor
    while cursor is not None:
        page = await engine.list(ListRequest(filter=only, limit=1, cursor=cursor))
        seen += [h.id for h in page.items]
        cursor = page.next_cursor
    assert seen == [first, second, third]
    fresh = await engine.list(ListRequest(filter=only, limit=10))
    assert [h.id for h in fresh.items] == [second, third, first, late]


async def test_a_cursor_for_another_query_or_forged_is_refused(engine: Any, stored: list[str]) -> None:
    page = await engine.fetch(FetchRequest(query="capital", mode="vector", limit=1))
    assert page.next_cursor
    with pytest.raises(InvalidRequest, match="cursor"):
        await engine.fetch(FetchRequest(query="other", mode="vector", limit=1, cursor=page.next_cursor))
    with pytest.raises(InvalidRequest, match="cursor"):
        await engine.fetch(FetchRequest(query="capital", mode="keyword", limit=1, cursor=page.next_cursor))
    with pytest.raises(InvalidRequest, match="cursor"):
        await engine.fetch(FetchRequest(query="capital", mode="vector", limit=1, cursor="10"))
    with pytest.raises(InvalidRequest, match="cursor"):
        await engine.list(ListRequest(limit=1, cursor=page.next_cursor))


@pytest.mark.parametrize("limit", [0, -1, 1001])
async def test_fetch_limit_out_of_range(engine: Any, limit: int) -> None:
    with pytest.raises(InvalidRequest, match="limit"):
        await engine.fetch(FetchRequest(query="x", mode="keyword", limit=limit))


async def test_blank_query_is_refused(engine: Any) -> None:
    with pytest.raises(InvalidRequest, match="query must not be blank"):
        await engine.fetch(FetchRequest(query="   ", mode="hybrid", limit=1))


async def test_writes_are_visible_at_once(engine: Any) -> None:
    receipt = await engine.store(learning("zebras are striped"))
    for mode in ("keyword", "vector", "hybrid"):
        page = await engine.fetch(FetchRequest(query="zebras", mode=mode, limit=1))
        assert [h.id for h in page.hits] == [receipt.id]


# Filters, each field through list and fetch.

FILTER_CASES: list[tuple[dict[str, Any], list[int]]] = [
    ({}, [0, 1, 2, 3, 4]),
    ({"reach": {}}, [2, 3]),
    ({"reach": {"at": "team:acme/agent:writer"}}, [0, 1, 2, 3]),
    ({"reach": {"at": "team:acme/agent:writer", "inherit": False}}, [0]),
    ({"reach": {"at": "team:acme", "inherit": False, "descendants": True}}, [0, 1, 4]),
    ({"reach": {"at": "team:acme/agent:writer", "descendants": True}}, [0, 1, 2, 3]),
    ({"reach": {"at": "team:acme/agent:w", "inherit": False, "descendants": True}}, []),  # a prefix, not a parent
    ({"reach": {"at": "root", "inherit": False, "descendants": True}}, [0, 1, 2, 3, 4]),
    ({"folder": "/notes"}, [2, 3]),
    ({"folder": "/notes/rust/"}, [2]),
    ({"folder": "/notes/ru"}, []),
    ({"file_path": "/notes/rust"}, [2]),
    ({"language": "en"}, [2]),
    ({"thread_id": "t-1"}, [4]),
    ({"agent_id": "agent-7"}, [4]),
    ({"source_id": "chat-9"}, [4]),
    ({"turns": {"first": 0, "last": 1}}, [4]),
    ({"turns": {"first": 0, "last": 2}}, []),
    ({"tool_call": "search"}, [4]),
    ({"kinds": ["document"]}, [2, 3]),
    ({"kinds": []}, [0, 1, 2, 3, 4]),
    ({"sources": ["conversation"]}, [4]),
    ({"sources": ["agent"]}, [0, 1, 2, 3]),
    ({"tags_any": ["rust", "ops"]}, [1, 2]),
    ({"observed_after": "2026-10-04T07:30:00Z"}, [4]),
    ({"observed_after": "2026-10-04T07:30:00.000001Z"}, []),
    ({"observed_before": "2026-10-04T07:30:00Z"}, []),
    ({"observed_before": "2026-10-04T09:30:00Z"}, [4]),
    ({"kinds": ["document"], "tags_any": ["rust"]}, [2]),
    ({"workspace": "nowhere"}, []),
]

# One word of each CORPUS item, so that a keyword ranking matches every item a filter admits.
A_WORD_OF_EACH = "tabs fridays ownership python capital"


@pytest.mark.parametrize(("spec", "expected"), FILTER_CASES, ids=[str(c[0]) for c in FILTER_CASES])
async def test_filter_fields(engine: Any, stored: list[str], spec: dict[str, Any], expected: list[int]) -> None:
    request_filter = Filter.model_validate(spec)
    assert sorted(await all_ids(engine, request_filter)) == sorted(stored[i] for i in expected)
    page = await engine.fetch(FetchRequest(query="anything at all", mode="vector", filter=request_filter, limit=50))
    assert sorted(h.id for h in page.hits) == sorted(stored[i] for i in expected)
    # A keyword ranking writes some filters its own way (the terms index, migration 0006).
    page = await engine.fetch(FetchRequest(query=A_WORD_OF_EACH, mode="keyword", filter=request_filter, limit=50))
    assert sorted(h.id for h in page.hits) == sorted(stored[i] for i in expected)
    for i in expected:
        assert request_filter.matches(CORPUS[i].type, CORPUS[i].checked().meta)


# List.


async def test_list_pages_visit_every_match_once_and_end(engine: Any) -> None:
    ids = [r.id for r in await engine.store_many([learning(f"fact number {n}") for n in range(11)])]
    seen: list[str] = []
    cursor = None
    while True:
        page = await engine.list(ListRequest(limit=4, cursor=cursor))
        assert all(h.score == 0.0 for h in page.items)
        seen += [h.id for h in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ids


# Get.


async def test_get_in_order_asked_each_once_unknowns_left_out(engine: Any, stored: list[str]) -> None:
    hits = await engine.get(GetRequest(ids=[stored[3], "nope", stored[0], stored[3], "0" * 40]))
    assert [h.id for h in hits] == [stored[3], stored[0]]
    assert all(h.score == 0.0 for h in hits)
    assert hits[1].confidence == 0.5 and hits[0].confidence is None


async def test_get_says_when_each_item_was_stored_and_a_replay_keeps_it(engine: Any) -> None:
    before = datetime.now(UTC)
    (first,) = await engine.store_many([CORPUS[0]])
    after = datetime.now(UTC)
    (hit,) = await engine.get(GetRequest(ids=[first.id]))
    assert hit.stored_at is not None and before <= hit.stored_at <= after
    assert hit.stored_at.utcoffset() == timedelta(0)
    assert (await engine.store(CORPUS[0])).replayed
    (again,) = await engine.get(GetRequest(ids=[first.id]))
    assert again.stored_at == hit.stored_at
    # Rankings and listings leave it out (beyond the seed contract, only get answers it).
    listed = (await engine.list(ListRequest(limit=10))).items
    fetched = (await engine.fetch(FetchRequest(query="tabs", mode="keyword", limit=10))).hits
    assert [h.stored_at for h in listed + fetched] == [None, None]


async def test_get_applies_reach(engine: Any, stored: list[str]) -> None:
    reach = Reach(at="team:acme/agent:writer", inherit=False)
    hits = await engine.get(GetRequest(ids=stored, reach=reach))
    assert [h.id for h in hits] == [stored[0]]


async def test_get_refuses_no_ids_or_a_blank_one(engine: Any) -> None:
    with pytest.raises(InvalidRequest):
        await engine.get(GetRequest(ids=[]))
    with pytest.raises(InvalidRequest):
        await engine.get(GetRequest(ids=["ok", " "]))
    with pytest.raises(InvalidRequest):
        await engine.get(GetRequest(ids=["a"] * 201))


# Forget.


async def test_forget_by_ids_counts_what_was_removed(engine: Any, stored: list[str]) -> None:
    report = await engine.forget(ForgetByIds(ids=[stored[0], stored[0], "unknown"]))
    assert report.forgotten == 1
    again = await engine.forget(ForgetByIds(ids=[stored[0]]))
    assert again.forgotten == 0
    assert stored[0] not in await all_ids(engine)
    page = await engine.fetch(FetchRequest(query="tabs", mode="hybrid", limit=10))
    assert stored[0] not in [h.id for h in page.hits]


async def test_forget_by_filter(engine: Any, stored: list[str]) -> None:
    report = await engine.forget(ForgetByFilter(filter=Filter(tags_any=["lang"])))
    assert report.forgotten == 2
    assert sorted(await all_ids(engine)) == sorted([stored[0], stored[1], stored[4]])


async def test_forget_refuses_an_empty_target_and_removes_nothing(engine: Any, stored: list[str]) -> None:
    for target in (ForgetByFilter(filter=Filter()), ForgetByFilter(filter=Filter(kinds=[])), ForgetByIds(ids=[])):
        with pytest.raises(InvalidRequest):
            await engine.forget(target)
    with pytest.raises(InvalidRequest):
        await engine.forget(ForgetByIds(ids=[stored[0], ""]))
    assert len(await all_ids(engine)) == 5


async def test_forget_within_removes_only_ids_in_reach(engine: Any, stored: list[str]) -> None:
    reach = Reach(at="team:acme", inherit=False, descendants=True)
    report = await engine.forget_within([stored[0], stored[2], stored[4]], reach)
    assert report.forgotten == 2
    assert sorted(await all_ids(engine)) == sorted([stored[1], stored[2], stored[3]])


@pytest.mark.parametrize(
    "everything",
    [
        Filter(reach=Reach(at="root", descendants=True)),
        Filter(reach=Reach(at="", inherit=False, descendants=True)),
        Filter(kinds=["document", "conversation", "learning"]),
        Filter(sources=["folder", "file", "conversation", "agent", "import"], kinds=[]),
    ],
)
async def test_a_filter_that_admits_every_item_forgets_only_when_told_all(
    engine: Any, stored: list[str], everything: Filter
) -> None:
    with pytest.raises(InvalidRequest, match='admits every item: send "all": true'):
        await engine.forget(ForgetByFilter(filter=everything))
    assert len(await all_ids(engine)) == 5
    assert (await engine.forget(ForgetByFilter(filter=everything, all=True))).forgotten == 5
    assert await all_ids(engine) == []


async def test_a_dry_run_says_what_would_go_and_removes_nothing(engine: Any, stored: list[str]) -> None:
    by_filter = await engine.forget(ForgetByFilter(filter=Filter(tags_any=["lang"]), dry_run=True))
    by_ids = await engine.forget(ForgetByIds(ids=[stored[4], stored[0], "unknown"], dry_run=True))
    reach = Reach(at="team:acme", inherit=False, descendants=True)
    within = await engine.forget_within([stored[0], stored[2], stored[4]], reach, dry_run=True)
    assert len(await all_ids(engine)) == 5
    lang = [i for i in stored if i not in (stored[0], stored[1], stored[4])]
    assert (by_filter.forgotten, by_filter.would_forget, by_filter.first_ids) == (0, 2, lang)
    assert (by_ids.would_forget, by_ids.first_ids) == (2, [stored[0], stored[4]]), "first stored first"
    assert (within.would_forget, within.forgotten) == (2, 0)
    real = await engine.forget_within([stored[0], stored[2], stored[4]], reach)
    assert real.forgotten == within.would_forget and real.would_forget is None


# Recall.


async def test_recall_cites_admitted_items_that_resolve(engine: Any, stored: list[str]) -> None:
    request_filter = Filter(reach=Reach(at="team:acme/agent:writer"))
    answer = await engine.recall(RecallRequest(question="does the user prefer tabs?", filter=request_filter, limit=2))
    assert answer.answer.strip()
    assert 1 <= len(answer.citations) <= 2
    assert answer.citations[0].id == stored[0]
    assert "tabs" in answer.answer
    admitted = set(await all_ids(engine, request_filter))
    assert {c.id for c in answer.citations} <= admitted
    resolved = await engine.get(GetRequest(ids=[c.id for c in answer.citations]))
    assert len(resolved) == len(answer.citations)
    assert answer.model


async def test_recall_says_so_when_nothing_is_stored(engine: Any) -> None:
    answer = await engine.recall(RecallRequest(question="what is the meaning of life?", limit=3))
    assert answer.citations == []
    assert "nothing relevant is stored" in answer.answer


async def test_recall_cites_something_whenever_the_filter_admits_an_item(engine: Any, stored: list[str]) -> None:
    answer = await engine.recall(RecallRequest(question="quantum chromodynamics", limit=3))
    assert len(answer.citations) >= 1
    assert answer.answer.strip()


# Explore.


async def test_explore_tag_counts_each_tag(engine: Any, stored: list[str]) -> None:
    page = await engine.explore(ExploreRequest(facet="tag", limit=10))
    assert [(b.value, b.count) for b in page.buckets] == [
        ("lang", 2),
        ("calendar", 1),
        ("ops", 1),
        ("rust", 1),
        ("style", 1),
    ]
    assert (page.total, page.missing, page.more_buckets, page.truncated) == (5, 1, 0, False)


async def test_explore_cuts_to_limit_and_says_how_many_were_cut(engine: Any, stored: list[str]) -> None:
    page = await engine.explore(ExploreRequest(facet="tag", limit=2))
    assert [(b.value, b.count) for b in page.buckets] == [("lang", 2), ("calendar", 1)]
    assert page.more_buckets == 3


async def test_explore_namespace_facet_and_narrowing(engine: Any, stored: list[str]) -> None:
    page = await engine.explore(ExploreRequest(facet="namespace", limit=10))
    counts = {b.value: b.count for b in page.buckets}
    assert counts == {"root": 2, "team:acme": 1, "team:acme/agent:writer": 1, "team:acme/agent:reviewer": 1}
    for bucket in page.buckets:
        narrowed = narrow("namespace", bucket.value)
        assert len(await all_ids(engine, narrowed)) == bucket.count


@pytest.mark.parametrize(
    ("facet", "expected", "missing"),
    [
        ("kind", {"learning": 2, "document": 2, "conversation": 1}, 0),
        ("source", {"agent": 4, "conversation": 1}, 0),
        ("source_id", {"chat-9": 1}, 4),
        ("folder", {"/notes/rust": 1, "/notes/python": 1}, 3),
        ("file_path", {"/notes/rust/ownership.md": 1}, 4),
        ("language", {"en": 1}, 4),
        ("thread", {"t-1": 1}, 4),
        ("agent", {"agent-7": 1}, 4),
        ("tool_call", {"search": 1}, 4),
        ("workspace", {}, 5),
    ],
)
async def test_explore_every_facet_narrows_back(
    engine: Any, stored: list[str], facet: str, expected: dict[str, int], missing: int
) -> None:
    page = await engine.explore(ExploreRequest(facet=facet, limit=10))  # type: ignore[arg-type]
    assert {b.value: b.count for b in page.buckets} == expected
    assert page.missing == missing and page.total == 5
    for bucket in page.buckets:
        assert len(await all_ids(engine, narrow(facet, bucket.value))) == bucket.count


async def test_explore_counts_observed_at_by_utc_unit_and_narrows_back(engine: Any) -> None:
    observed = ["2023-12-31T23:30:00-01:00", "2024-01-01T00:10:00Z", "2024-01-01T00:50:00Z", "2024-02-29T12:00:00Z"]
    await engine.store_many([learning(f"seen {n}", observed_at=at) for n, at in enumerate(observed)])
    await engine.store_many([learning("never observed"), learning("seen in 999", observed_at="0999-06-01T00:00:00Z")])
    expected = {
        "observed_year": {"2024-01-01T00:00:00Z": 4, "0999-01-01T00:00:00Z": 1},
        "observed_month": {"2024-01-01T00:00:00Z": 3, "0999-06-01T00:00:00Z": 1, "2024-02-01T00:00:00Z": 1},
        "observed_day": {"2024-01-01T00:00:00Z": 3, "0999-06-01T00:00:00Z": 1, "2024-02-29T00:00:00Z": 1},
        "observed_hour": {
            "2024-01-01T00:00:00Z": 3,  # 23:30 at -01:00 is 00:30 UTC
            "0999-06-01T00:00:00Z": 1,
            "2024-02-29T12:00:00Z": 1,
        },
    }
    for facet, counts in expected.items():
        page = await engine.explore(ExploreRequest(facet=facet, limit=10))  # type: ignore[arg-type]
        assert [(b.value, b.count) for b in page.buckets] == list(counts.items()), facet
        assert (page.total, page.missing, page.more_buckets) == (6, 1, 0), facet
        for bucket in page.buckets:
            assert len(await all_ids(engine, narrow(facet, bucket.value))) == bucket.count
    # Under a filter (here one a bar of a histogram makes), and cut to the limit.
    january = narrow("observed_month", "2024-01-01T00:00:00Z")
    page = await engine.explore(ExploreRequest(facet="observed_day", filter=january, limit=10))
    assert [(b.value, b.count) for b in page.buckets] == [("2024-01-01T00:00:00Z", 3)]
    assert (page.total, page.missing) == (3, 0)
    cut = await engine.explore(ExploreRequest(facet="observed_month", filter=Filter(kinds=["learning"]), limit=1))
    assert [(b.value, b.count) for b in cut.buckets] == [("2024-01-01T00:00:00Z", 3)]
    assert (cut.total, cut.missing, cut.more_buckets) == (6, 1, 2)


async def test_explore_respects_the_filter(engine: Any, stored: list[str]) -> None:
    page = await engine.explore(ExploreRequest(facet="kind", filter=Filter(tags_any=["lang"]), limit=10))
    assert [(b.value, b.count) for b in page.buckets] == [("document", 2)]
    assert page.total == 2


async def test_explore_counts_an_item_once_per_value_however_often_it_holds_it(engine: Any) -> None:
    await engine.store_many(
        [learning("a", tags=["x", "y", "x"]), learning("b", tags=["x"]), learning("c"), learning("d", tags=["y"])]
    )
    page = await engine.explore(ExploreRequest(facet="tag", limit=10))
    assert [(b.value, b.count) for b in page.buckets] == [("x", 2), ("y", 2)]
    assert (page.total, page.missing, page.more_buckets) == (4, 1, 0)
    only_x = await engine.explore(ExploreRequest(facet="tag", filter=Filter(tags_any=["x"]), limit=1))
    assert [(b.value, b.count) for b in only_x.buckets] == [("x", 2)]
    assert (only_x.total, only_x.missing, only_x.more_buckets) == (2, 0, 1)


async def test_explore_over_nothing_admitted_is_empty(engine: Any, stored: list[str]) -> None:
    for facet in ("tag", "kind", "namespace"):
        page = await engine.explore(ExploreRequest(facet=facet, filter=Filter(tags_any=["nowhere"]), limit=10))
        assert (page.buckets, page.total, page.missing, page.more_buckets) == ([], 0, 0, 0)


async def test_explore_orders_ties_by_code_point(engine: Any) -> None:
    await engine.store_many([learning(f"t{n}", tags=[tag]) for n, tag in enumerate(["b", "B", "a", "_"])])
    page = await engine.explore(ExploreRequest(facet="tag", limit=10))
    assert [b.value for b in page.buckets] == ["B", "_", "a", "b"]
