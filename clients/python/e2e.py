"""End-to-end check of the generated Python client against a live ``engram serve``.

ENGRAM_URL (e.g. http://127.0.0.1:8080) and ENGRAM_API_KEY (when the service has keys)
come from the environment; the client is generated into ``generated/`` (on PYTHONPATH).
Everything is stored in a fresh namespace, so the script can run against a service that
holds other data. Prints each check; exits 1 if any fails. Mirrors ../typescript/src/e2e.ts.
"""

from __future__ import annotations

import datetime
import math
import os
import re
import secrets
import sys
from typing import Any, TypeVar

import attrs
from engram_client import AuthenticatedClient, Client
from engram_client.api.default import (
    engine,
    errors,
    explore,
    fetch,
    forget,
    forget_within,
    get,
    health,
    list_,
    recall,
    store,
    store_many,
)
from engram_client.models import (
    Conversation,
    Document,
    EngineDescriptor,
    ErrorCatalogue,
    ErrorEnvelope,
    ExplorePage,
    ExploreRequest,
    Facet,
    FetchMode,
    FetchPage,
    FetchRequest,
    Filter,
    ForgetByFilter,
    ForgetByIds,
    ForgetReport,
    ForgetWithinRequest,
    GetRequest,
    GetResult,
    Health,
    HealthState,
    Hit,
    ItemKind,
    Learning,
    LearningKind,
    ListPage,
    ListRequest,
    Meta,
    Reach,
    RecallAnswer,
    RecallRequest,
    Role,
    Source,
    SourceKind,
    StoredSource,
    StoreManyRequest,
    StoreManyResult,
    StoreReceipt,
    TextBody,
    ToolCall,
    Turn,
)
from engram_client.types import UNSET, Response

T = TypeVar("T")
Item = Document | Conversation | Learning
Api = AuthenticatedClient | Client


class Stop(Exception):
    """A call that had to succeed did not: the run cannot go on."""


class Checks:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def __call__(self, ok: bool, what: str, detail: object = None) -> None:
        if ok:
            self.passed += 1
            print(f"ok    {what}")
        else:
            self.failed += 1
            print(f"FAIL  {what}" + ("" if detail is None else f": {detail!r}"))


check = Checks()


def ok(response: Response[Any], kind: type[T], what: str) -> T:
    """The typed answer of a call that must succeed; anything else stops the run."""
    if not isinstance(response.parsed, kind):
        check(False, what, (response.status_code, response.content[:300]))
        raise Stop(what)
    return response.parsed


def refused(response: Response[Any], status: int, what: str) -> ErrorEnvelope:
    """The typed envelope of a call that must fail with ``status``."""
    envelope = response.parsed
    if not isinstance(envelope, ErrorEnvelope):
        check(False, what, (response.status_code, response.content[:300]))
        raise Stop(what)
    check(response.status_code == status, f"{what}: HTTP {status}", int(response.status_code))
    check(envelope.request_id == response.headers.get("x-request-id"), f"{what}: request_id equals X-Request-ID")
    check(envelope.message.startswith(envelope.code.replace("_", " ") + ":"), f"{what}: message starts with its code")
    return envelope


def narrow(facet: Facet, value: str, scope: Reach) -> Filter:
    """A bucket turned back into the filter that selects it (contract §6), within ``scope``."""
    match facet:
        case Facet.KIND:
            return Filter(reach=scope, kinds=[ItemKind(value)])
        case Facet.SOURCE:
            return Filter(reach=scope, sources=[SourceKind(value)])
        case Facet.TAG:
            return Filter(reach=scope, tags_any=[value])
        case Facet.THREAD:
            return Filter(reach=scope, thread_id=value)
        case Facet.AGENT:
            return Filter(reach=scope, agent_id=value)
        case Facet.NAMESPACE:
            return Filter(reach=Reach(at=value, inherit=False, descendants=False))
        case Facet.SOURCE_ID:
            return Filter(reach=scope, source_id=value)
        case Facet.WORKSPACE:
            return Filter(reach=scope, workspace=value)
        case Facet.FOLDER:
            return Filter(reach=scope, folder=value)
        case Facet.FILE_PATH:
            return Filter(reach=scope, file_path=value)
        case Facet.LANGUAGE:
            return Filter(reach=scope, language=value)
        case Facet.REPO:
            return Filter(reach=scope, repo=value)
        case Facet.URL:
            return Filter(reach=scope, url=value)
        case Facet.TOOL_CALL:
            return Filter(reach=scope, tool_call=value)
        case Facet.OBSERVED_YEAR | Facet.OBSERVED_MONTH | Facet.OBSERVED_DAY | Facet.OBSERVED_HOUR:
            # A time bucket is named by the UTC instant it starts at; it ends one unit later.
            start = datetime.datetime.fromisoformat(value)
            return Filter(reach=scope, observed_after=start, observed_before=bucket_end(facet, start))


def bucket_end(facet: Facet, start: datetime.datetime) -> datetime.datetime:
    """Where the time bucket starting at ``start`` ends."""
    if facet == Facet.OBSERVED_YEAR:
        return start.replace(year=start.year + 1)
    if facet == Facet.OBSERVED_MONTH:
        return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    if facet == Facet.OBSERVED_DAY:
        return start + datetime.timedelta(days=1)
    return start + datetime.timedelta(hours=1)


def list_all(api: Api, filter_: Filter, limit: int) -> tuple[list[Hit], int]:
    """Every hit the filter admits, following next_cursor to the end; and the number of pages."""
    hits: list[Hit] = []
    cursor: str | None = None
    pages = 0
    while True:
        body = ListRequest(filter_=filter_, limit=limit, cursor=cursor if cursor is not None else UNSET)
        page = ok(list_.sync_detailed(client=api, body=body), ListPage, "list page")
        hits.extend(page.items)
        pages += 1
        cursor = page.next_cursor or None
        if cursor is None:
            return hits, pages
        if pages > 1000:
            raise Stop("list did not end")


def ids_of(hits: list[Hit]) -> list[str]:
    return [hit.id for hit in hits]


def run(base_url: str, api_key: str) -> None:
    api: Api = AuthenticatedClient(base_url=base_url, token=api_key) if api_key else Client(base_url=base_url)
    namespace = f"project:py-{secrets.token_hex(6)}"
    reach = Reach(at=namespace, inherit=False, descendants=False)
    scope = Filter(reach=reach)
    print(f"engram at {base_url}, namespace {namespace}")

    # The engine and its health.
    descriptor = ok(engine.sync_detailed(client=api), EngineDescriptor, "engine")
    modes = list(descriptor.fetch_modes)
    check(bool(modes), f"engine {descriptor.id} lists fetch modes {', '.join(modes)}")
    state = ok(health.sync_detailed(client=api), Health, "health")
    check(state.state == HealthState.OK, "health is ok", state)
    catalogue = ok(errors.sync_detailed(client=api), ErrorCatalogue, "errors")
    check(
        any(e.code == "invalid_request" and e.http_status == 400 for e in catalogue.errors),
        "error catalogue lists invalid_request",
    )

    # One item of each kind, built from the generated models of the item union.
    document = Document(
        title="Rust ownership",
        body=TextBody(text="Ownership moves values; borrowing lends them without a move."),
        mime="text/markdown",
        meta=Meta(
            namespace=namespace,
            folder="/repo/src",
            file_path="/repo/src/lib.rs",
            language="rust",
            tags=["e2e", "rust"],
            source=Source(kind=SourceKind.FILE, id="lib.rs"),
        ),
    )
    conversation = Conversation(
        turns=[
            Turn(role=Role.USER, text="Which editor settings do I use?"),
            Turn(role=Role.ASSISTANT, text="Tabs, width four.", tool_calls=[ToolCall(name="read_config", id="call-1")]),
        ],
        meta=Meta(
            namespace=namespace,
            thread_id="t-42",
            tags=["e2e"],
            source=Source(kind=SourceKind.CONVERSATION, id="t-42"),
        ),
    )
    observed = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    learning = Learning(
        text="prefers tabs over spaces",
        kind=LearningKind.PREFERENCE,
        confidence=0.8,
        evidence="said so in thread t-42",
        meta=Meta(namespace=namespace, tags=["e2e", "style"], observed_at=observed),
    )
    stored: dict[str, str] = {}
    items: list[Item] = [document, conversation, learning]
    for item in items:
        response = store.sync_detailed(client=api, body=item)
        receipt = ok(response, StoreReceipt, f"store {item.type_}")
        check(response.status_code == 201 and not receipt.replayed, f"store {item.type_}: 201, not replayed")
        check(re.fullmatch(r"[0-9a-f]{40}", receipt.id) is not None, f"store {item.type_}: id is 40 hex characters")
        stored[item.type_] = receipt.id
    again = store.sync_detailed(client=api, body=learning)
    replay = ok(again, StoreReceipt, "store again")
    check(
        again.status_code == 200 and replay.replayed and replay.id == stored["learning"],
        "store the learning again: 200, replayed, same id",
    )
    # null in a request means unset: the same learning with every unset field sent as None.
    with_nones = Learning(
        text=learning.text,
        kind=learning.kind,
        confidence=learning.confidence,
        evidence=learning.evidence,
        meta=Meta(namespace=namespace, tags=["e2e", "style"], observed_at=observed, workspace=None, source=None),
    )
    nones = store.sync_detailed(client=api, body=with_nones)
    replay = ok(nones, StoreReceipt, "store with None")
    check(
        nones.status_code == 200 and replay.replayed and replay.id == stored["learning"],
        "store the learning with unset fields as None: the same item, replayed",
    )

    # store_many: four learnings and a repeat of the document.
    batch: list[Item] = [
        Learning(
            text=f"batch fact {n}: the build runs cargo test {n} times",
            kind=LearningKind.FACT,
            confidence=0.5,
            meta=Meta(namespace=namespace, tags=["batch"]),
        )
        for n in (1, 2, 3, 4)
    ]
    many = ok(
        store_many.sync_detailed(client=api, body=StoreManyRequest(items=[*batch, document])),
        StoreManyResult,
        "store_many",
    )
    check(len(many.receipts) == 5, "store_many: one receipt per item", len(many.receipts))
    check(all(not r.replayed for r in many.receipts[:4]), "store_many: new items are written")
    check(
        many.receipts[4].replayed and many.receipts[4].id == stored["document"],
        "store_many: the repeated document is a replay",
    )
    batch_ids = [r.id for r in many.receipts[:4]]
    every_id = {stored["document"], stored["conversation"], stored["learning"], *batch_ids}

    # fetch in every mode the engine lists.
    expected = {FetchMode.KEYWORD: 2, FetchMode.VECTOR: len(every_id), FetchMode.HYBRID: len(every_id)}
    for mode in modes:
        request = FetchRequest(query="tabs", mode=mode, filter_=scope, limit=10)
        page = ok(fetch.sync_detailed(client=api, body=request), FetchPage, f"fetch {mode}")
        check(len(page.hits) == expected[mode], f"fetch {mode}: {expected[mode]} hits", len(page.hits))
        check(all(h.id in every_id for h in page.hits), f"fetch {mode}: every hit is in the namespace")
        scores = [h.score for h in page.hits]
        check(scores == sorted(scores, reverse=True), f"fetch {mode}: best first", scores)
        hit = next((h for h in page.hits if h.id == stored["learning"]), None)
        check(
            hit is not None and hit.kind == ItemKind.LEARNING and hit.confidence == 0.8,
            f"fetch {mode}: the learning with confidence 0.8",
            hit,
        )
        check(not page.next_cursor, f"fetch {mode}: a single page has no next_cursor")
    paged_mode = FetchMode.VECTOR if FetchMode.VECTOR in modes else modes[0]
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        request = FetchRequest(
            query="editor settings",
            mode=paged_mode,
            filter_=scope,
            limit=3,
            cursor=cursor if cursor is not None else UNSET,
        )
        page = ok(fetch.sync_detailed(client=api, body=request), FetchPage, f"fetch {paged_mode} page")
        seen += ids_of(page.hits)
        pages += 1
        cursor = page.next_cursor or None
        if cursor is None or pages >= 20:
            break
    check(
        len(set(seen)) == len(seen) and (paged_mode != FetchMode.VECTOR or len(seen) == len(every_id)),
        f"fetch {paged_mode}: following next_cursor visits each hit once ({len(seen)} in {pages} pages)",
    )

    # recall.
    question = RecallRequest(question="what indentation does the writer prefer?", filter_=scope, limit=3)
    answer = ok(recall.sync_detailed(client=api, body=question), RecallAnswer, "recall")
    check(answer.answer.strip() != "", "recall: the answer is not blank")
    check(1 <= len(answer.citations) <= 3, "recall: 1 to 3 citations", len(answer.citations))
    cited = ok(get.sync_detailed(client=api, body=GetRequest(ids=[c.id for c in answer.citations])), GetResult, "get")
    check(len(cited.hits) == len(answer.citations), "recall: every citation resolves through get")

    # list with cursors until the end.
    listed, list_pages = list_all(api, scope, 2)
    check(list_pages == math.ceil(len(every_id) / 2), f"list: {list_pages} pages of 2", list_pages)
    check(set(ids_of(listed)) == every_id, "list: every item", ids_of(listed))
    check(len(set(ids_of(listed))) == len(listed), "list: no item twice")
    check(all(h.score == 0 for h in listed), "list: every score is 0")

    # explore, then narrow each bucket back into a filter and count what it selects.
    explored_facets = (Facet.KIND, Facet.TAG, Facet.SOURCE, Facet.FOLDER, Facet.THREAD, Facet.NAMESPACE)
    for facet in (*explored_facets, Facet.OBSERVED_MONTH, Facet.OBSERVED_HOUR):
        by_facet = ExploreRequest(facet=facet, filter_=scope, limit=50)
        explored = ok(explore.sync_detailed(client=api, body=by_facet), ExplorePage, f"explore {facet}")
        check(
            explored.total == len(every_id) and not explored.truncated,
            f"explore {facet}: total {len(every_id)}, exact",
            explored,
        )
        if facet != Facet.TAG:
            counted = sum(b.count for b in explored.buckets)
            check(counted + explored.missing == explored.total, f"explore {facet}: buckets and missing add up to total")
        for bucket in explored.buckets:
            selected, _ = list_all(api, narrow(facet, bucket.value, reach), 1000)
            check(
                len(selected) == bucket.count,
                f"explore {facet}: bucket {bucket.value} narrows to {bucket.count} items",
                len(selected),
            )
    two_kinds = ExploreRequest(facet=Facet.KIND, filter_=scope, limit=2)
    kinds = ok(explore.sync_detailed(client=api, body=two_kinds), ExplorePage, "explore kind")
    check(
        [(b.value, b.count) for b in kinds.buckets] == [("learning", 5), ("conversation", 1)]
        and kinds.more_buckets == 1,
        "explore kind: count descending, ties by value, cut to limit with more_buckets",
        kinds,
    )

    # get by ids: in the order asked, each once, unknown ids left out.
    unknown = "0" * 40
    asked = GetRequest(ids=[stored["learning"], unknown, stored["document"], stored["learning"]])
    got = ok(get.sync_detailed(client=api, body=asked), GetResult, "get")
    check(
        ids_of(got.hits) == [stored["learning"], stored["document"]],
        "get: hits in the order asked, each once, unknown left out",
        ids_of(got.hits),
    )
    got_learning, got_document = got.hits
    source = got_learning.meta.source
    check(
        got_learning.meta.observed_at == observed
        and got_learning.meta.to_dict().get("observed_at") == "2026-01-02T02:04:05+00:00"
        and isinstance(source, StoredSource)
        and source.kind == SourceKind.AGENT,
        "get: observed_at read back as the same instant, source defaults to agent",
        got_learning.meta,
    )
    check(
        got_document.text == "# Rust ownership\n\nOwnership moves values; borrowing lends them without a move.",
        "get: a document's text is its rendered form",
        got_document.text,
    )
    stored_at = got_learning.stored_at
    check(
        isinstance(stored_at, datetime.datetime)
        and stored_at.utcoffset() == datetime.timedelta(0)
        and stored_at <= datetime.datetime.now(datetime.UTC),
        "get: stored_at, when the service wrote the item, in UTC",
        stored_at,
    )

    # forget by id, then by filter.
    twice = ForgetByIds(ids=[stored["conversation"], stored["conversation"]])
    by_id = ok(forget.sync_detailed(client=api, body=twice), ForgetReport, "forget ids")
    check(by_id.forgotten == 1, "forget by id: a repeated id counts once", by_id)
    gone = ok(get.sync_detailed(client=api, body=GetRequest(ids=[stored["conversation"]])), GetResult, "get")
    check(gone.hits == [], "forget by id: the item is gone")
    tagged = ForgetByFilter(filter_=attrs.evolve(scope, tags_any=["batch"]))
    by_filter = ok(forget.sync_detailed(client=api, body=tagged), ForgetReport, "forget filter")
    check(by_filter.forgotten == 4, "forget by filter: the four batch items", by_filter)
    elsewhere = ForgetWithinRequest(ids=[stored["document"]], reach=Reach(at="project:elsewhere", inherit=False))
    within = ok(forget_within.sync_detailed(client=api, body=elsewhere), ForgetReport, "forget_within")
    check(within.forgotten == 0, "forget_within: an id outside the reach stays", within)
    remaining, _ = list_all(api, scope, 10)
    check(
        sorted(ids_of(remaining)) == sorted([stored["document"], stored["learning"]]),
        "forget: the document and the learning remain",
    )

    # Bad requests surface the typed envelope.
    blank = refused(
        fetch.sync_detailed(client=api, body=FetchRequest(query="  ", mode=FetchMode.KEYWORD, limit=5)),
        400,
        "blank query",
    )
    check(blank.code == "invalid_request" and not blank.retryable, "blank query: code invalid_request", blank)
    too_sure = Learning(text="x", kind=LearningKind.FACT, confidence=1.5)
    bad = refused(store.sync_detailed(client=api, body=too_sure), 400, "confidence 1.5")
    check(bad.code == "invalid_request", "confidence 1.5: code invalid_request", bad)
    empty_filter = refused(forget.sync_detailed(client=api, body=ForgetByFilter(filter_=Filter())), 400, "forget {}")
    check(empty_filter.code == "invalid_request", "forget with an empty filter: invalid_request", empty_filter)
    # A body the schema refuses (an unknown key) cannot be built from the models: send it raw,
    # read the answer with the generated envelope model.
    raw = api.get_httpx_client().post("/v1/fetch", json={"query": "tabs", "mode": "keyword", "limit": 5, "colour": 1})
    shape = ErrorEnvelope.from_dict(raw.json())
    check(raw.status_code == 422, "unknown key: HTTP 422", raw.status_code)
    check(
        shape.code == "invalid_request" and any(d.field == "colour" for d in (shape.details or [])),
        "unknown key: invalid_request with details naming the field",
        shape,
    )
    if api_key:
        denied = refused(engine.sync_detailed(client=Client(base_url=base_url)), 401, "no credential")
        check(denied.code == "unauthorized", "no credential: code unauthorized", denied)

    # Leave nothing behind.
    rest = ok(forget.sync_detailed(client=api, body=ForgetByFilter(filter_=scope)), ForgetReport, "forget the rest")
    check(rest.forgotten == 2, "forget the namespace: the last two items", rest)
    empty, _ = list_all(api, scope, 10)
    check(empty == [], "the namespace is empty")


def main() -> int:
    base_url = os.environ.get("ENGRAM_URL", "")
    if not base_url:
        print("ENGRAM_URL must be set", file=sys.stderr)
        return 2
    try:
        run(base_url, os.environ.get("ENGRAM_API_KEY", ""))
    except Stop:
        pass
    except Exception as error:  # any other failure is a failed check, reported and counted
        check(False, f"{type(error).__name__}: {error}")
    print(f"{check.passed} checks passed, {check.failed} failed")
    return 0 if check.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
