"""Filters (contract §4): every set field must match; ``{}`` matches everything."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from app.contract.meta import Filter, Meta, TurnRange, path_has_prefix
from app.contract.namespaces import Reach
from tests.contract.support import refused

RICH: dict[str, Any] = {
    "namespace": "team:acme/agent:writer",
    "workspace": "ws-1",
    "folder": "/a/b",
    "file_path": "/a/b/c.rs",
    "language": "rust",
    "repo": "github.com/acme/engram",
    "commit": "abc123",
    "url": "https://example.org/doc",
    "thread_id": "thread-7",
    "turns": {"first": 2, "last": 5},
    "agent_id": "writer-1",
    "tool_call": {"name": "search", "id": "call-1"},
    "source": {"kind": "file", "id": "src-1"},
    "tags": ["style", "rust"],
    "observed_at": "2024-05-01T10:00:00Z",
}


def meta(**fields: Any) -> Meta:
    return Meta.model_validate(fields).checked()


def flt(**fields: Any) -> Filter:
    return Filter.model_validate(fields).checked()


RICH_META = meta(**RICH)
BARE_META = meta()


def test_the_empty_filter_matches_everything() -> None:
    assert flt().matches("document", RICH_META)
    assert flt().matches("conversation", BARE_META)


# --- exact fields ---------------------------------------------------------------

EXACT = ["workspace", "language", "repo", "commit", "url", "thread_id", "agent_id"]


@pytest.mark.parametrize("name", EXACT)
def test_exact_fields(name: str) -> None:
    value = RICH[name]
    assert flt(**{name: value}).matches("document", RICH_META)
    assert not flt(**{name: value + "x"}).matches("document", RICH_META)
    assert not flt(**{name: value[:-1]}).matches("document", RICH_META)  # not a prefix match
    assert not flt(**{name: value.upper()}).matches("document", RICH_META)
    # an item without the field never matches
    assert not flt(**{name: value}).matches("document", BARE_META)


def test_source_id_is_the_source_id() -> None:
    assert flt(source_id="src-1").matches("document", RICH_META)
    assert not flt(source_id="src-2").matches("document", RICH_META)
    assert not flt(source_id="src-1").matches("document", meta(source={"kind": "file"}))
    assert not flt(source_id="src-1").matches("document", BARE_META)


# --- folder and file_path: path prefix on a / boundary ----------------------------


@pytest.mark.parametrize("name", ["folder", "file_path"])
@pytest.mark.parametrize(
    ("held", "wanted", "matches"),
    [
        ("/a/b", "/a/b", True),
        ("/a/b/c.rs", "/a/b", True),
        ("/a/b/c/d/e.rs", "/a/b", True),
        ("/a/bc", "/a/b", False),
        ("/a/bc/d.rs", "/a/b", False),
        ("/a", "/a/b", False),
        ("/x/a/b", "/a/b", False),
        ("/a/b", "/a/b/", True),  # a trailing / on the filter is ignored
        ("/a/b/c.rs", "/a/b/", True),
        ("/a/bc", "/a/b/", False),
        ("/a/b/c.rs", "/a/b/c.rs", True),
        ("/a/b/c.rs", "/a/b/c", False),
    ],
)
def test_path_prefix(name: str, held: str, wanted: str, matches: bool) -> None:
    assert flt(**{name: wanted}).matches("document", meta(**{name: held})) is matches


@pytest.mark.parametrize("name", ["folder", "file_path"])
def test_path_filter_never_matches_an_item_without_the_field(name: str) -> None:
    assert not flt(**{name: "/a/b"}).matches("document", BARE_META)


def test_path_has_prefix_directly() -> None:
    assert path_has_prefix("/a/b/c.rs", "/a/b")
    assert not path_has_prefix("/a/bc", "/a/b")
    assert not path_has_prefix(None, "/a/b")


# --- turns, tool_call, kinds, sources, tags_any --------------------------------------


def test_turns_is_an_exact_range() -> None:
    assert flt(turns={"first": 2, "last": 5}).matches("conversation", RICH_META)
    assert not flt(turns={"first": 2, "last": 4}).matches("conversation", RICH_META)
    assert not flt(turns={"first": 3, "last": 5}).matches("conversation", RICH_META)
    assert not flt(turns={"first": 2, "last": 5}).matches("conversation", BARE_META)


def test_turns_first_after_last_is_refused_in_filters_and_in_meta() -> None:
    assert "filter.turns.first" in refused(Filter.model_validate({"turns": {"first": 3, "last": 2}}).checked)
    assert "meta.turns.first" in refused(Meta.model_validate({"turns": {"first": 3, "last": 2}}).checked)
    refused(TurnRange(first=1, last=0).checked, "turns")
    assert TurnRange(first=4, last=4).checked("turns") == TurnRange(first=4, last=4)


def test_turns_are_zero_based_and_never_negative() -> None:
    with pytest.raises(ValidationError):
        TurnRange.model_validate({"first": -1, "last": 2})


def test_tool_call_matches_by_name() -> None:
    assert flt(tool_call="search").matches("conversation", RICH_META)
    assert not flt(tool_call="call-1").matches("conversation", RICH_META)  # the id is not the name
    assert not flt(tool_call="searc").matches("conversation", RICH_META)
    assert not flt(tool_call="search").matches("conversation", BARE_META)
    assert flt(tool_call="open").matches("conversation", meta(tool_call={"name": "open"}))


def test_kinds() -> None:
    assert flt(kinds=["learning"]).matches("learning", BARE_META)
    assert flt(kinds=["document", "learning"]).matches("document", BARE_META)
    assert not flt(kinds=["learning"]).matches("conversation", BARE_META)
    assert flt(kinds=[]).matches("conversation", BARE_META)  # empty means all


def test_sources() -> None:
    assert flt(sources=["file"]).matches("document", RICH_META)
    assert not flt(sources=["folder", "import"]).matches("document", RICH_META)
    assert flt(sources=[]).matches("document", RICH_META)
    # the default source is agent, also on a meta that was never validated
    assert flt(sources=["agent"]).matches("document", BARE_META)
    assert flt(sources=["agent"]).matches("document", Meta())
    assert not flt(sources=["file"]).matches("document", Meta())


def test_tags_any() -> None:
    assert flt(tags_any=["rust"]).matches("document", RICH_META)
    assert flt(tags_any=["nope", "style"]).matches("document", RICH_META)
    assert not flt(tags_any=["nope"]).matches("document", RICH_META)
    assert not flt(tags_any=["Style"]).matches("document", RICH_META)
    assert not flt(tags_any=["style"]).matches("document", BARE_META)
    assert flt(tags_any=[]).matches("document", BARE_META)  # no constraint


# --- observed_after / observed_before -----------------------------------------------


@pytest.mark.parametrize(
    ("after", "before", "matches"),
    [
        ("2024-05-01T10:00:00Z", None, True),  # >= after
        ("2024-05-01T09:59:59Z", None, True),
        ("2024-05-01T10:00:00.000001Z", None, False),
        (None, "2024-05-01T10:00:00Z", False),  # < before, not <=
        (None, "2024-05-01T10:00:00.000001Z", True),
        ("2024-05-01T12:00:00+02:00", "2024-05-01T12:00:01+02:00", True),  # offsets compare as instants
        ("2024-05-01T11:00:00+02:00", "2024-05-01T11:30:00+02:00", False),
    ],
)
def test_observed_window(after: str | None, before: str | None, matches: bool) -> None:
    window = {k: v for k, v in {"observed_after": after, "observed_before": before}.items() if v}
    assert flt(**window).matches("document", RICH_META) is matches


@pytest.mark.parametrize("bound", ["observed_after", "observed_before"])
def test_an_item_without_observed_at_never_matches_either_bound(bound: str) -> None:
    assert not flt(**{bound: "2000-01-01T00:00:00Z"}).matches("document", BARE_META)
    assert not flt(**{bound: "2999-01-01T00:00:00Z"}).matches("document", BARE_META)


def test_observed_bounds_are_held_in_utc() -> None:
    window = flt(observed_after="2024-05-01T12:00:00+02:00")
    assert window.observed_after == datetime(2024, 5, 1, 10, tzinfo=UTC)


# --- all set fields must match ----------------------------------------------------


def test_every_set_field_must_match() -> None:
    everything = flt(
        reach={"at": "team:acme", "inherit": False, "descendants": True},
        **{name: RICH[name] for name in EXACT},
        folder="/a",
        file_path="/a/b/",
        turns=RICH["turns"],
        tool_call="search",
        source_id="src-1",
        kinds=["document"],
        sources=["file"],
        tags_any=["rust"],
        observed_after="2024-01-01T00:00:00Z",
        observed_before="2025-01-01T00:00:00Z",
    )
    assert everything.matches("document", RICH_META)
    assert not everything.matches("learning", RICH_META)
    assert not everything.matches("document", meta(**{**RICH, "namespace": "team:other"}))
    assert not everything.matches("document", meta(**{**RICH, "tags": ["style"]}))


# --- emptiness -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [{}, {"kinds": []}, {"sources": []}, {"tags_any": []}, {"kinds": [], "sources": [], "tags_any": []}],
)
def test_a_filter_constraining_nothing_is_empty(data: dict[str, Any]) -> None:
    assert Filter.model_validate(data).is_empty()
    assert flt(**data).is_empty()


@pytest.mark.parametrize(
    "data",
    [
        {"reach": {}},  # a reach-only filter means everything in that reach
        {"reach": {"at": "root"}},
        {"reach": {"at": "team:acme", "descendants": True}},
        {"kinds": ["document"]},
        {"sources": ["agent"]},
        {"tags_any": ["x"]},
        {"workspace": "w"},
        {"source_id": "s"},
        {"tool_call": "t"},
        {"folder": "/"},
        {"turns": {"first": 0, "last": 0}},
        {"observed_after": "2024-01-01T00:00:00Z"},
        {"observed_before": "2024-01-01T00:00:00Z"},
    ],
)
def test_a_filter_with_a_constraint_is_not_empty(data: dict[str, Any]) -> None:
    assert not Filter.model_validate(data).is_empty()
    assert not flt(**data).is_empty()


def test_a_reach_only_filter_still_restricts_to_its_reach() -> None:
    only_root = flt(reach={})
    assert only_root.matches("document", BARE_META)
    assert not only_root.matches("document", RICH_META)


def test_filter_validation_refuses_nul_in_a_value() -> None:
    message = refused(Filter(workspace="a\x00b").checked)
    assert "workspace" in message
    refused(Filter(tags_any=["ok", "\ud800"]).checked)


def test_filter_validation_normalises_the_reach() -> None:
    assert flt(reach={"at": " team:acme "}).reach == Reach(at="team:acme")
