"""The explore checks pass against a faithful service and catch counts that sample, miscount or misorder."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from app.contract.explore import explore_page, facet_values
from app.contract.meta import Meta
from app.contract.requests import ExplorePage, ExploreRequest, FacetBucket
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.reference import ReferenceEngine
from tests.conformance.faults import Fault, assert_caught
from tests.conformance.support import failed, outcomes_against

Values = Callable[[str, str, Meta], list[str]]


class Counting(ReferenceEngine):
    """The reference engine's explore, counting each admitted item (every ``step``-th one) by ``values``."""

    step = 1
    missing_offset = 0

    def values(self, facet: str, kind: str, meta: Meta) -> list[str]:
        return facet_values(facet, kind, meta)

    async def explore(self, request: ExploreRequest) -> ExplorePage:
        request = request.checked()
        counts: Counter[str] = Counter()
        total = missing = 0
        for _, record in self._admitted(request.filter)[:: self.step]:
            total += 1
            found = self.values(request.facet, record.item.type, record.item.meta)
            missing += not found
            counts.update(found)
        return explore_page(request.facet, counts, total, missing + self.missing_offset, request.limit)


class Sampled(Counting):
    """Counts every other item and still answers truncated false."""

    step = 2


class MissingOffByOne(Counting):
    missing_offset = 1


class FirstTagOnly(Counting):
    def values(self, facet: str, kind: str, meta: Meta) -> list[str]:
        found = super().values(facet, kind, meta)
        return found[:1] if facet == "tag" else found


class LastSegmentNamespaces(Counting):
    """Namespace values as the node's last segment instead of its path."""

    def values(self, facet: str, kind: str, meta: Meta) -> list[str]:
        found = super().values(facet, kind, meta)
        return [v.rsplit("/", 1)[-1] for v in found] if facet == "namespace" else found


class ToolCallIds(Counting):
    """The tool_call facet counts a call's id where it has one, which no filter narrows to."""

    def values(self, facet: str, kind: str, meta: Meta) -> list[str]:
        if facet == "tool_call" and meta.tool_call is not None and meta.tool_call.id:
            return [meta.tool_call.id]
        return super().values(facet, kind, meta)


class Paging(ReferenceEngine):
    """The reference engine's explore page passed through ``change``."""

    def change(self, page: ExplorePage, request: ExploreRequest) -> ExplorePage:
        return page

    async def explore(self, request: ExploreRequest) -> ExplorePage:
        return self.change(await super().explore(request), request)


class TiesCaseFolded(Paging):
    """Ties in a locale's order (case folded) rather than by code point."""

    def change(self, page: ExplorePage, request: ExploreRequest) -> ExplorePage:
        buckets = sorted(page.buckets, key=lambda b: (-b.count, b.value.casefold()))
        return page.model_copy(update={"buckets": buckets})


class TiesInUtf16Order(Paging):
    """Ties by UTF-16 code units, as a JavaScript or Java sort: an emoji before U+FF5E."""

    def change(self, page: ExplorePage, request: ExploreRequest) -> ExplorePage:
        buckets = sorted(page.buckets, key=lambda b: (-b.count, b.value.encode("utf-16-be")))
        return page.model_copy(update={"buckets": buckets})


class CutNotCounted(Paging):
    def change(self, page: ExplorePage, request: ExploreRequest) -> ExplorePage:
        return page.model_copy(update={"more_buckets": 0})


class CutBeforeSorting(ReferenceEngine):
    """Cuts to ``limit`` in the order values were met, then sorts what is left."""

    async def explore(self, request: ExploreRequest) -> ExplorePage:
        page = await super().explore(request.model_copy(update={"limit": 500}))
        met: dict[str, FacetBucket] = {}
        for _, record in self._admitted(request.checked().filter):
            for value in facet_values(request.facet, record.item.type, record.item.meta):
                met.setdefault(value, next(b for b in page.buckets if b.value == value))
        kept = sorted(list(met.values())[: request.limit], key=lambda b: (-b.count, b.value.encode()))
        return page.model_copy(update={"buckets": kept, "more_buckets": max(0, len(met) - request.limit)})


class AlwaysTruncated(Paging):
    def change(self, page: ExplorePage, request: ExploreRequest) -> ExplorePage:
        return page.model_copy(update={"truncated": True})


class ScanLimitIgnoredQuietly(ReferenceEngine):
    """Stops at scan_limit items but answers truncated false."""

    async def explore(self, request: ExploreRequest) -> ExplorePage:
        request = request.checked()
        counts: Counter[str] = Counter()
        admitted = self._admitted(request.filter)[: request.scan_limit]
        missing = 0
        for _, record in admitted:
            found = facet_values(request.facet, record.item.type, record.item.meta)
            missing += not found
            counts.update(found)
        return explore_page(request.facet, counts, len(admitted), missing, request.limit)


FAULTS = [
    Fault("a sample counted as exact", "every_facet_counts_exactly", Sampled),
    Fault("missing off by one", "every_facet_counts_exactly", MissingOffByOne),
    Fault("an item counted under its first tag only", "every_facet_counts_exactly", FirstTagOnly),
    Fault("namespace values that are not paths", "a_narrowed_bucket_lists_its_count", LastSegmentNamespaces),
    Fault("tool_call buckets by call id", "a_narrowed_bucket_lists_its_count", ToolCallIds),
    Fault("ties in a locale's order", "buckets_sort_by_count_then_code_point", TiesCaseFolded),
    Fault("ties in UTF-16 order", "buckets_sort_by_count_then_code_point", TiesInUtf16Order),
    Fault("the cut not counted", "buckets_are_cut_to_the_limit_and_the_cut_is_counted", CutNotCounted),
    Fault("cut before sorting", "buckets_are_cut_to_the_limit_and_the_cut_is_counted", CutBeforeSorting),
    Fault("an exact count said truncated", "a_complete_count_is_not_truncated", AlwaysTruncated),
    Fault("a partial scan said exact", "a_complete_count_is_not_truncated", ScanLimitIgnoredQuietly),
]


async def test_a_faithful_service_passes(embedder: WordLlamaEmbedder) -> None:
    assert failed(await outcomes_against(ReferenceEngine(embedder), ["explore"])) == []


@pytest.mark.parametrize("fault", FAULTS, ids=str)
async def test_each_fault_is_caught(fault: Fault, embedder: WordLlamaEmbedder) -> None:
    await assert_caught(fault, embedder, "explore")
