"""The cursors checks pass against a faithful service and catch cursors that restart, drift or lie."""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest

from app.contract.errors import InvalidRequest
from app.contract.requests import FetchPage, FetchRequest, ListPage, ListRequest
from app.embeddings.protocol import Embedder
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.cursors import CursorCodec, _unb64, listing_position, scope_of
from app.engine.reference import ReferenceEngine
from tests.conformance.faults import Fault, assert_caught
from tests.conformance.support import failed, outcomes_against


class RestartingCodec(CursorCodec):
    """A cursor it cannot read (or not for this request) starts again from the first page."""

    def resume(self, cursor: str | None, scope: str, start: Any) -> Any:
        try:
            return super().resume(cursor, scope, start)
        except InvalidRequest:
            return start


class UnboundCodec(CursorCodec):
    """Refuses forgeries but honours a cursor whatever request it was minted for."""

    def read(self, cursor: str, scope: str) -> Any:
        try:
            minted_for = json.loads(_unb64(cursor.split(".")[0]))["s"]
        except (ValueError, KeyError, TypeError):
            minted_for = scope
        return super().read(cursor, minted_for)


def with_codec(codec: type[CursorCodec]) -> Any:
    def build(embedder: Embedder) -> ReferenceEngine:
        engine = ReferenceEngine(embedder)
        engine._cursors = codec(secrets.token_bytes(32))
        return engine

    return build


class OffsetListing(ReferenceEngine):
    """List pages by position in the matches: forgetting an item already listed shifts the next page."""

    newest_first = False

    async def list(self, request: ListRequest) -> ListPage:
        request = request.checked()
        scope = scope_of("list", request.filter)
        offset = self._cursors.resume(request.cursor, scope, 0)
        rows = self._admitted(request.filter)
        rows = rows[::-1] if self.newest_first else rows
        page = rows[offset : offset + request.limit]
        more = offset + request.limit < len(rows)
        return ListPage(
            items=[record.hit(item_id, 0.0) for item_id, record in page],
            next_cursor=self._cursors.issue(scope, offset + request.limit) if more else None,
        )


class NewestFirstOffsetListing(OffsetListing):
    """Newest first by position: an item stored while paging pushes the next page back onto the last."""

    newest_first = True


class CursorOnTheLastPage(ReferenceEngine):
    """The page that ends the matches still carries a cursor, to an empty page."""

    async def list(self, request: ListRequest) -> ListPage:
        page = await super().list(request)
        if page.next_cursor is None and page.items:
            scope = scope_of("list", request.filter.checked())
            return page.model_copy(update={"next_cursor": self._cursors.issue(scope, [self._seq, self._seq])})
        return page


class FetchCursorIgnored(ReferenceEngine):
    """Every fetch page is the first."""

    async def fetch(self, request: FetchRequest) -> FetchPage:
        return await super().fetch(request.model_copy(update={"cursor": None}))


class OverlappingFetchPages(ReferenceEngine):
    """Each next page starts one hit early: the last hit of a page comes again."""

    async def fetch(self, request: FetchRequest) -> FetchPage:
        page = await super().fetch(request)
        if page.next_cursor is None:
            return page
        checked = request.checked()
        scope = scope_of(checked.query, checked.mode, checked.filter)
        offset = self._cursors.resume(checked.cursor, scope, 0)
        return page.model_copy(update={"next_cursor": self._cursors.issue(scope, offset + request.limit - 1)})


class ListingNewItemsToo(ReferenceEngine):
    """Faithful too: pages by the last item listed with no ceiling, so items stored while paging appear once."""

    async def list(self, request: ListRequest) -> ListPage:
        request = request.checked()
        scope = scope_of("list", request.filter)
        after, _ = listing_position(self._cursors.resume(request.cursor, scope, None))
        rows = [(i, r) for i, r in self._admitted(request.filter) if after < r.seq]
        page = rows[: request.limit]
        more = len(rows) > request.limit
        return ListPage(
            items=[record.hit(item_id, 0.0) for item_id, record in page],
            next_cursor=self._cursors.issue(scope, page[-1][1].seq) if more else None,
        )


FAULTS = [
    Fault("a cursor it cannot read restarts", "a_cursor_not_issued_is_refused", with_codec(RestartingCodec)),
    Fault(
        "a cursor honoured for any request", "a_cursor_is_bound_to_its_query_filter_and_mode", with_codec(UnboundCodec)
    ),
    Fault("list pages by offset", "listing_is_stable_under_concurrent_writes", OffsetListing),
    Fault("list pages newest first by offset", "listing_is_stable_under_concurrent_writes", NewestFirstOffsetListing),
    Fault("a cursor on the last list page", "list_cursors_visit_every_match_once_and_end", CursorOnTheLastPage),
    Fault("a fetch cursor ignored", "fetch_cursors_visit_every_hit_once_and_end", FetchCursorIgnored),
    Fault("fetch pages overlap", "fetch_cursors_visit_every_hit_once_and_end", OverlappingFetchPages),
]


async def test_a_faithful_service_passes(embedder: WordLlamaEmbedder) -> None:
    assert failed(await outcomes_against(ReferenceEngine(embedder), ["cursors"])) == []


async def test_a_listing_that_shows_items_stored_while_paging_passes(embedder: WordLlamaEmbedder) -> None:
    assert failed(await outcomes_against(ListingNewItemsToo(embedder), ["cursors"])) == []


@pytest.mark.parametrize("fault", FAULTS, ids=str)
async def test_each_fault_is_caught(fault: Fault, embedder: WordLlamaEmbedder) -> None:
    await assert_caught(fault, embedder, "cursors")
