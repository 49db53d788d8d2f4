"""Requests (contract §5, §9): their limits, their refusals, and closed strict schemas."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, RootModel, ValidationError

from app.contract.errors import InvalidRequest, Unsupported
from app.contract.limits import DEFAULT_SCAN_LIMIT
from app.contract.requests import (
    EngineDescriptor,
    ExploreRequest,
    FetchRequest,
    ForgetByFilter,
    ForgetByIds,
    ForgetRequest,
    ForgetWithinRequest,
    GetRequest,
    Hit,
    ListRequest,
    RecallRequest,
    StoreManyRequest,
)
from app.contract.wire import wire_dict, wire_json
from tests.contract.support import refused

ID = "19fc22b957ecd5727c7e03dda8c2e1979528da36"
ITEM = {"type": "learning", "text": "prefers tabs", "kind": "preference", "confidence": 0.8}


def parse(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """Read a body the way the HTTP layer does: JSON through the schema."""
    return model.model_validate_json(json.dumps(data))


def check(model: type[BaseModel], data: dict[str, Any]) -> Any:
    parsed = parse(model, data)
    target = parsed.root if isinstance(parsed, RootModel) else parsed
    return target.checked()


# --- fetch, recall, list: blank text and limit ------------------------------------------


@pytest.mark.parametrize("query", ["", " ", "\n\t "])
def test_a_blank_query_is_refused(query: str) -> None:
    message = refused(check, FetchRequest, {"query": query, "mode": "keyword", "limit": 5})
    assert "query" in message


@pytest.mark.parametrize("question", ["", "   "])
def test_a_blank_question_is_refused(question: str) -> None:
    message = refused(check, RecallRequest, {"question": question, "limit": 5})
    assert "question" in message


@pytest.mark.parametrize("limit", [0, -1, 1001, 10**9])
@pytest.mark.parametrize(
    ("model", "base"),
    [
        (FetchRequest, {"query": "tabs", "mode": "hybrid"}),
        (RecallRequest, {"question": "tabs?"}),
        (ListRequest, {}),
    ],
)
def test_page_limits_outside_one_to_a_thousand_are_refused(
    model: type[BaseModel], base: dict[str, Any], limit: int
) -> None:
    message = refused(check, model, {**base, "limit": limit})
    assert "limit" in message


@pytest.mark.parametrize("limit", [1, 1000])
@pytest.mark.parametrize(
    ("model", "base"),
    [
        (FetchRequest, {"query": "tabs", "mode": "vector"}),
        (RecallRequest, {"question": "tabs?"}),
        (ListRequest, {}),
    ],
)
def test_page_limits_at_the_bounds_are_accepted(model: type[BaseModel], base: dict[str, Any], limit: int) -> None:
    assert check(model, {**base, "limit": limit}).limit == limit


@pytest.mark.parametrize("bad", ["a\x00b", "\ud800"])
def test_nul_and_lone_surrogates_are_refused_in_queries(bad: str) -> None:
    refused(FetchRequest(query=bad, mode="keyword", limit=1).checked)
    refused(RecallRequest(question=bad, limit=1).checked)
    refused(RecallRequest(question="ok", limit=1, instructions=bad).checked)


def test_request_filters_are_validated() -> None:
    refused(check, FetchRequest, {"query": "q", "mode": "keyword", "limit": 1, "filter": {"reach": {"at": "x"}}})
    refused(check, ListRequest, {"limit": 1, "filter": {"turns": {"first": 2, "last": 1}}})
    refused(check, RecallRequest, {"question": "q", "limit": 1, "filter": {"workspace": "\x00"}})
    refused(check, ExploreRequest, {"facet": "tag", "limit": 1, "filter": {"reach": {"at": "Team:a"}}})
    checked = check(ListRequest, {"limit": 1, "filter": {"reach": {"at": " team:acme "}}})
    assert checked.filter.reach.at == "team:acme"


# --- explore ------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1, 501])
def test_explore_limit_is_one_to_five_hundred(limit: int) -> None:
    refused(check, ExploreRequest, {"facet": "tag", "limit": limit})


@pytest.mark.parametrize("scan_limit", [0, -5, 50_001])
def test_explore_scan_limit_is_one_to_fifty_thousand(scan_limit: int) -> None:
    message = refused(check, ExploreRequest, {"facet": "tag", "limit": 10, "scan_limit": scan_limit})
    assert "scan_limit" in message


def test_explore_bounds_are_accepted_and_scan_limit_defaults() -> None:
    assert check(ExploreRequest, {"facet": "kind", "limit": 1, "scan_limit": 1}).scan_limit == 1
    assert check(ExploreRequest, {"facet": "kind", "limit": 500, "scan_limit": 50_000}).limit == 500
    assert check(ExploreRequest, {"facet": "kind", "limit": 5}).scan_limit == DEFAULT_SCAN_LIMIT == 5_000


# --- get, forget, forget_within: ids -------------------------------------------------------


def test_get_takes_one_to_two_hundred_ids() -> None:
    refused(check, GetRequest, {"ids": []})
    refused(check, GetRequest, {"ids": [ID] * 201})
    assert len(check(GetRequest, {"ids": [ID] * 200}).ids) == 200
    assert check(GetRequest, {"ids": ["not-an-id"]}).ids == ["not-an-id"]  # malformed ids are left to the engine


@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_get_refuses_a_blank_id_naming_it(blank: str) -> None:
    message = refused(check, GetRequest, {"ids": [ID, blank]})
    assert "ids[1]" in message


def test_get_reach_is_validated() -> None:
    refused(check, GetRequest, {"ids": [ID], "reach": {"at": "team:"}})
    assert check(GetRequest, {"ids": [ID], "reach": {"at": ""}}).reach.at == "root"
    assert check(GetRequest, {"ids": [ID]}).reach is None


def test_forget_takes_one_to_a_thousand_ids() -> None:
    refused(check, ForgetRequest, {"ids": []})
    refused(check, ForgetRequest, {"ids": [ID] * 1001})
    refused(check, ForgetRequest, {"ids": [ID, " "]})
    assert len(check(ForgetRequest, {"ids": [ID] * 1000}).ids) == 1000


def test_forget_within_takes_one_to_a_thousand_ids_and_a_valid_reach() -> None:
    reach = {"at": "team:acme"}
    refused(check, ForgetWithinRequest, {"ids": [], "reach": reach})
    refused(check, ForgetWithinRequest, {"ids": [ID] * 1001, "reach": reach})
    refused(check, ForgetWithinRequest, {"ids": [""], "reach": reach})
    refused(check, ForgetWithinRequest, {"ids": [ID], "reach": {"at": "Team:acme"}})
    assert len(check(ForgetWithinRequest, {"ids": [ID] * 1000, "reach": reach}).ids) == 1000


@pytest.mark.parametrize("empty", [{}, {"kinds": []}, {"sources": [], "tags_any": []}])
def test_forget_with_an_empty_filter_is_refused(empty: dict[str, Any]) -> None:
    message = refused(check, ForgetRequest, {"filter": empty})
    assert "filter" in message


def test_forget_with_a_reach_only_filter_is_accepted() -> None:
    assert isinstance(check(ForgetRequest, {"filter": {"reach": {}}}), ForgetByFilter)


def test_forget_takes_exactly_one_of_ids_or_filter() -> None:
    assert isinstance(parse(ForgetRequest, {"ids": [ID]}).root, ForgetByIds)
    assert isinstance(parse(ForgetRequest, {"filter": {"kinds": ["document"]}}).root, ForgetByFilter)
    with pytest.raises(ValidationError):
        parse(ForgetRequest, {})
    with pytest.raises(ValidationError):
        parse(ForgetRequest, {"ids": [ID], "filter": {"kinds": ["document"]}})


# --- store_many ----------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 101])
def test_store_many_takes_one_to_a_hundred_items(count: int) -> None:
    message = refused(check, StoreManyRequest, {"items": [ITEM] * count})
    assert "items" in message


def test_store_many_at_the_bounds() -> None:
    assert len(check(StoreManyRequest, {"items": [ITEM]})) == 1
    assert len(check(StoreManyRequest, {"items": [ITEM] * 100})) == 100


def test_store_many_names_the_invalid_item_by_index() -> None:
    items = [ITEM, ITEM, ITEM, {**ITEM, "text": " "}, {**ITEM, "confidence": 2}]
    message = refused(check, StoreManyRequest, {"items": items})
    assert message.startswith("invalid request: items[3]")
    assert "items[4]" not in message


def test_store_many_names_the_index_and_the_turn() -> None:
    bad = {"type": "conversation", "turns": [{"role": "user", "text": "hi"}, {"role": "user", "text": ""}]}
    message = refused(check, StoreManyRequest, {"items": [ITEM, bad]})
    assert "items[1]" in message and "turns[1]" in message


def test_store_many_returns_the_canonical_items_in_order() -> None:
    checked = check(StoreManyRequest, {"items": [ITEM, {**ITEM, "meta": {"namespace": " root "}}]})
    assert [i.meta.namespace for i in checked] == [None, None]
    assert checked[0].fingerprint() == checked[1].fingerprint()


# --- closed, strict schemas ----------------------------------------------------------------

VALID: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (StoreManyRequest, {"items": [ITEM]}),
    (FetchRequest, {"query": "q", "mode": "keyword", "limit": 1}),
    (RecallRequest, {"question": "q", "limit": 1}),
    (ListRequest, {"limit": 1}),
    (GetRequest, {"ids": [ID]}),
    (ForgetRequest, {"ids": [ID]}),
    (ForgetRequest, {"filter": {"kinds": ["document"]}}),
    (ForgetWithinRequest, {"ids": [ID], "reach": {}}),
    (ExploreRequest, {"facet": "tag", "limit": 1}),
]


@pytest.mark.parametrize(("model", "data"), VALID)
def test_the_valid_bodies_parse(model: type[BaseModel], data: dict[str, Any]) -> None:
    check(model, data)


@pytest.mark.parametrize(("model", "data"), VALID)
def test_an_unknown_top_level_key_is_refused(model: type[BaseModel], data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse(model, {**data, "colour": "red"})


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (ListRequest, {"limit": 1, "filter": {"colour": "red"}}),
        (ListRequest, {"limit": 1, "filter": {"reach": {"at": "root", "colour": "red"}}}),
        (ListRequest, {"limit": 1, "filter": {"turns": {"first": 0, "last": 0, "x": 1}}}),
        (FetchRequest, {"query": "q", "mode": "keyword", "limit": 1, "filter": {"namespace": "team:a"}}),
        (GetRequest, {"ids": [ID], "reach": {"at": "root", "depth": 1}}),
        (ForgetRequest, {"filter": {"kinds": ["document"], "colour": "red"}}),
        (ForgetWithinRequest, {"ids": [ID], "reach": {"colour": "red"}}),
        (StoreManyRequest, {"items": [{**ITEM, "colour": "red"}]}),
        (StoreManyRequest, {"items": [{**ITEM, "meta": {"colour": "red"}}]}),
    ],
)
def test_an_unknown_nested_key_is_refused(model: type[BaseModel], data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse(model, data)


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (ListRequest, {"limit": "5"}),
        (ListRequest, {"limit": 5.5}),
        (ListRequest, {"limit": True}),
        (ListRequest, {"limit": None}),
        (ListRequest, {}),
        (FetchRequest, {"query": 5, "mode": "keyword", "limit": 1}),
        (FetchRequest, {"query": "q", "mode": "semantic", "limit": 1}),
        (FetchRequest, {"query": "q", "mode": "Keyword", "limit": 1}),
        (FetchRequest, {"query": "q", "limit": 1}),
        (RecallRequest, {"question": ["q"], "limit": 1}),
        (ExploreRequest, {"facet": "colour", "limit": 1}),
        (ExploreRequest, {"facet": "tag", "limit": 1, "scan_limit": "100"}),
        (GetRequest, {"ids": ID}),
        (GetRequest, {"ids": [1]}),
        (GetRequest, {"ids": [ID], "reach": {"inherit": "true"}}),
        (GetRequest, {"ids": [ID], "reach": {"descendants": 1}}),
        (ForgetRequest, {"ids": ID}),
        (ListRequest, {"limit": 1, "filter": {"kinds": "document"}}),
        (ListRequest, {"limit": 1, "filter": {"kinds": ["note"]}}),
        (ListRequest, {"limit": 1, "filter": {"sources": ["web"]}}),
        (ListRequest, {"limit": 1, "filter": {"tool_call": {"name": "search"}}}),
        (ListRequest, {"limit": 1, "filter": {"observed_after": "last week"}}),
        (ListRequest, {"limit": 1, "filter": {"observed_after": "2024-05-01T10:00:00"}}),
        (ListRequest, {"limit": 1, "filter": {"turns": {"first": 0.5, "last": 1}}}),
        (StoreManyRequest, {"items": ITEM}),
    ],
)
def test_wrong_json_types_are_refused(model: type[BaseModel], data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse(model, data)


# --- answers -------------------------------------------------------------------------------


def test_answers_omit_unset_fields() -> None:
    hit = Hit(id=ID, kind="document", text="t", meta={"source": {"kind": "agent"}}, score=0.0)
    assert wire_dict(hit) == {
        "id": ID,
        "kind": "document",
        "text": "t",
        "meta": {"source": {"kind": "agent"}},
        "score": 0.0,
    }
    assert "null" not in wire_json(hit)


def test_a_fetch_mode_the_descriptor_does_not_list_is_unsupported() -> None:
    descriptor = EngineDescriptor(
        id="e",
        label="E",
        description="d",
        hosted=False,
        needs_endpoint=False,
        needs_key=False,
        fetch_modes=["keyword"],
    )
    descriptor.ensure_mode("keyword")
    with pytest.raises(Unsupported) as caught:
        descriptor.ensure_mode("vector")
    assert caught.value.message.startswith("unsupported: ")
    assert not isinstance(caught.value, InvalidRequest)


# --- null in a request means unset -----------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "with_nulls", "without"),
    [
        (
            FetchRequest,
            {"query": "q", "mode": "keyword", "limit": 5, "filter": None, "cursor": None},
            {"query": "q", "mode": "keyword", "limit": 5},
        ),
        (
            ListRequest,
            {"limit": 5, "filter": {"kinds": None, "sources": None, "tags_any": None, "workspace": None}},
            {"limit": 5},
        ),
        (ExploreRequest, {"facet": "tag", "limit": 5, "scan_limit": None}, {"facet": "tag", "limit": 5}),
        (RecallRequest, {"question": "q", "limit": 5, "instructions": None}, {"question": "q", "limit": 5}),
        (GetRequest, {"ids": [ID], "reach": None}, {"ids": [ID]}),
        (
            ForgetWithinRequest,
            {"ids": [ID], "reach": {"at": None, "inherit": None, "descendants": None}},
            {"ids": [ID], "reach": {}},
        ),
    ],
)
def test_null_means_unset(model: type[BaseModel], with_nulls: dict[str, Any], without: dict[str, Any]) -> None:
    assert check(model, with_nulls) == check(model, without)


def test_null_in_an_item_means_unset() -> None:
    with_nulls = {**ITEM, "evidence": None, "meta": None}
    assert check(StoreManyRequest, {"items": [with_nulls]}) == check(StoreManyRequest, {"items": [ITEM]})
    nested = {**ITEM, "meta": {"namespace": None, "tags": None, "source": None, "workspace": None}}
    assert (
        check(StoreManyRequest, {"items": [nested]})[0].fingerprint()
        == check(StoreManyRequest, {"items": [ITEM]})[0].fingerprint()
    )


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (ListRequest, {"limit": None}),
        (FetchRequest, {"query": None, "mode": "keyword", "limit": 1}),
        (GetRequest, {"ids": None}),
        (ForgetWithinRequest, {"ids": [ID], "reach": None}),
        (ForgetRequest, {"filter": None}),  # no target once null is unset
        (ForgetRequest, {"ids": None, "filter": None}),
        (StoreManyRequest, {"items": None}),
    ],
)
def test_null_for_a_required_field_is_still_refused(model: type[BaseModel], data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse(model, data)


@pytest.mark.parametrize(
    "data",
    [{"ids": [ID], "filter": None}, {"ids": None, "filter": {"kinds": ["document"]}}],
)
def test_a_null_forget_target_is_unset(data: dict[str, Any]) -> None:
    """A client that writes every optional field sends the other target as null: one target, not two."""
    named = {key: value for key, value in data.items() if value is not None}
    assert parse(ForgetRequest, data) == parse(ForgetRequest, named)


INVISIBLE = ["\u200b", "\ufeff", "\u2060 \u200c", "\u00ad", "\u200d\n"]


@pytest.mark.parametrize("text", INVISIBLE)
def test_a_query_question_or_id_of_invisible_characters_is_blank(text: str) -> None:
    assert "query" in refused(check, FetchRequest, {"query": text, "mode": "keyword", "limit": 5})
    assert "question" in refused(check, RecallRequest, {"question": text, "limit": 5})
    for model in (GetRequest, ForgetWithinRequest):
        assert "ids[1]" in refused(check, model, {"ids": [ID, text], "reach": {}})
    assert "ids[0]" in refused(check, ForgetRequest, {"ids": [text]})


def test_a_namespace_keeps_its_own_grammar_for_invisible_characters() -> None:
    from app.contract.namespaces import Namespace

    assert "'\\u200b'" in refused(Namespace.parse, "\u200b")
    assert Namespace.parse(" root ").is_root
