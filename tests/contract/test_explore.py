"""Explore (contract §6): facet values, bucket order, and narrowing a bucket back into a filter."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from app.contract.explore import explore_page, facet_values
from app.contract.meta import Filter, Meta
from app.contract.namespaces import Reach
from app.contract.requests import FACETS, FacetBucket, narrow
from tests.contract.support import refused

RICH = Meta.model_validate(
    {
        "namespace": "team:acme/agent:writer",
        "workspace": "ws-1",
        "folder": "/a/b",
        "file_path": "/a/b/c.rs",
        "language": "rust",
        "repo": "acme/engram",
        "url": "https://example.org",
        "thread_id": "t-7",
        "agent_id": "writer-1",
        "tool_call": {"name": "search", "id": "c1"},
        "source": {"kind": "file", "id": "src-1"},
        "tags": ["style", "rust", "style"],
        "observed_at": "2024-05-10T17:30:00+02:00",
    }
).checked()
BARE = Meta().checked()

NARROWED: list[tuple[str, str, dict[str, Any]]] = [
    ("kind", "learning", {"kinds": ["learning"]}),
    ("source", "file", {"sources": ["file"]}),
    ("source_id", "src-1", {"source_id": "src-1"}),
    ("workspace", "ws-1", {"workspace": "ws-1"}),
    ("folder", "/a/b", {"folder": "/a/b"}),
    ("file_path", "/a/b/c.rs", {"file_path": "/a/b/c.rs"}),
    ("language", "rust", {"language": "rust"}),
    ("repo", "acme/engram", {"repo": "acme/engram"}),
    ("url", "https://example.org", {"url": "https://example.org"}),
    ("thread", "t-7", {"thread_id": "t-7"}),
    ("agent", "writer-1", {"agent_id": "writer-1"}),
    ("tool_call", "search", {"tool_call": "search"}),
    ("tag", "style", {"tags_any": ["style"]}),
    (
        "namespace",
        "team:acme/agent:writer",
        {"reach": {"at": "team:acme/agent:writer", "inherit": False, "descendants": False}},
    ),
    (
        "observed_year",
        "2024-01-01T00:00:00Z",
        {"observed_after": "2024-01-01T00:00:00Z", "observed_before": "2025-01-01T00:00:00Z"},
    ),
    (
        "observed_month",
        "2024-12-01T00:00:00Z",
        {"observed_after": "2024-12-01T00:00:00Z", "observed_before": "2025-01-01T00:00:00Z"},
    ),
    (
        "observed_day",
        "2024-02-29T00:00:00Z",
        {"observed_after": "2024-02-29T00:00:00Z", "observed_before": "2024-03-01T00:00:00Z"},
    ),
    (
        "observed_hour",
        "2024-05-10T15:00:00Z",
        {"observed_after": "2024-05-10T15:00:00Z", "observed_before": "2024-05-10T16:00:00Z"},
    ),
]


def test_the_table_covers_every_facet() -> None:
    assert sorted(row[0] for row in NARROWED) == sorted(FACETS)
    assert len(FACETS) == 18


@pytest.mark.parametrize(("facet", "value", "expected"), NARROWED, ids=[row[0] for row in NARROWED])
def test_narrow(facet: str, value: str, expected: dict[str, Any]) -> None:
    narrowed = narrow(facet, value)
    assert narrowed == Filter.model_validate(expected)
    assert FacetBucket(value=value, count=1).narrow(facet) == narrowed


@pytest.mark.parametrize("facet", FACETS)
def test_a_narrowed_bucket_selects_the_items_counted_in_it(facet: str) -> None:
    values = facet_values(facet, "learning", RICH)
    assert values, f"the rich item has a {facet}"
    for value in values:
        assert narrow(facet, value).checked().matches("learning", RICH)


def test_narrowing_a_namespace_sees_only_that_node() -> None:
    only = narrow("namespace", "team:acme")
    assert only.reach == Reach(at="team:acme", inherit=False, descendants=False)
    assert only.matches("document", Meta(namespace="team:acme").checked())
    assert not only.matches("document", RICH)  # a descendant
    assert not only.matches("document", BARE)  # an ancestor
    root = narrow("namespace", "root")
    assert root.matches("document", BARE)
    assert not root.matches("document", RICH)


def test_narrowing_a_folder_is_by_prefix() -> None:
    assert narrow("folder", "/a").matches("document", RICH)
    assert not narrow("folder", "/a/bc").matches("document", Meta(folder="/a/b").checked())


def test_narrowing_an_unknown_facet_is_refused() -> None:
    refused(narrow, "colour", "red")
    refused(narrow, "commit", "abc")  # commit is a filter field but not a facet


def test_time_facets_count_observed_at_by_its_utc_unit() -> None:
    # 17:30 at +02:00 is 15:30 UTC.
    assert facet_values("observed_year", "learning", RICH) == ["2024-01-01T00:00:00Z"]
    assert facet_values("observed_month", "learning", RICH) == ["2024-05-01T00:00:00Z"]
    assert facet_values("observed_day", "learning", RICH) == ["2024-05-10T00:00:00Z"]
    assert facet_values("observed_hour", "learning", RICH) == ["2024-05-10T15:00:00Z"]
    early = Meta(observed_at="0999-12-31T23:59:59.5Z").checked()
    assert facet_values("observed_year", "learning", early) == ["0999-01-01T00:00:00Z"]  # four digits


def test_a_bucket_start_written_at_another_offset_is_the_same_bucket() -> None:
    assert narrow("observed_hour", "2024-05-10T15:00:00+02:00") == narrow("observed_hour", "2024-05-10T13:00:00Z")


def test_the_last_bucket_a_timestamp_holds_has_no_end() -> None:
    assert narrow("observed_year", "9999-01-01T00:00:00Z") == Filter(observed_after="9999-01-01T00:00:00Z")
    assert narrow("observed_hour", "9999-12-31T23:00:00Z").observed_before is None


@pytest.mark.parametrize(
    ("facet", "value"),
    [
        ("observed_day", "2024-05-10T15:00:00Z"),  # within the day, not its start
        ("observed_month", "2024-05-02T00:00:00Z"),
        ("observed_year", "2024-05-01T00:00:00Z"),
        ("observed_hour", "2024-05-10T15:00:00+05:30"),  # an hour's start there, 09:30 in utc
        ("observed_hour", "2024-05-10T15:00:00"),  # no offset
        ("observed_day", "last tuesday"),
    ],
)
def test_narrowing_a_time_facet_takes_only_a_bucket_start_in_utc(facet: str, value: str) -> None:
    refused(narrow, facet, value)


def test_facet_values() -> None:
    assert facet_values("kind", "document", BARE) == ["document"]
    assert facet_values("source", "document", BARE) == ["agent"]
    assert facet_values("source", "document", Meta()) == ["agent"]
    assert facet_values("namespace", "document", BARE) == ["root"]
    assert facet_values("namespace", "document", RICH) == ["team:acme/agent:writer"]
    assert facet_values("tag", "document", RICH) == ["rust", "style"]  # each distinct tag once


@pytest.mark.parametrize("facet", [f for f in FACETS if f not in ("kind", "source", "namespace")])
def test_an_item_lacking_the_facet_has_no_value(facet: str) -> None:
    assert facet_values(facet, "document", BARE) == []


def test_buckets_sort_by_count_then_code_point_and_are_cut_to_limit() -> None:
    counts = Counter({"a": 2, "B": 2, "c": 5, "Z": 1, "é": 2, "_": 2})
    page = explore_page("tag", counts, total=9, missing=3, limit=4)
    assert [(b.value, b.count) for b in page.buckets] == [("c", 5), ("B", 2), ("_", 2), ("a", 2)]
    assert page.more_buckets == 2
    assert (page.facet, page.total, page.missing, page.truncated) == ("tag", 9, 3, False)


def test_code_point_order_is_not_the_locale_order() -> None:
    counts = Counter({"b": 1, "a": 1, "B": 1, "A": 1, "é": 1, "e": 1, "ß": 1, "😀": 1, "ｚ": 1})
    page = explore_page("tag", counts, total=9, missing=0, limit=500)
    assert [b.value for b in page.buckets] == ["A", "B", "a", "b", "e", "ß", "é", "ｚ", "😀"]
    assert page.more_buckets == 0


def test_an_empty_page() -> None:
    page = explore_page("repo", Counter(), total=4, missing=4, limit=10)
    assert page.buckets == []
    assert (page.more_buckets, page.total, page.missing) == (0, 4, 4)
    assert page.model_dump(mode="json") == {
        "facet": "repo",
        "buckets": [],
        "total": 4,
        "missing": 4,
        "more_buckets": 0,
        "truncated": False,
    }
