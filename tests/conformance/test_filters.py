"""The filters checks pass against a faithful service and catch each filter that leaks or drops an item."""

from __future__ import annotations

import re
from typing import Any

import pytest

from app.contract.meta import Filter, Meta
from app.contract.namespaces import Namespace
from app.embeddings.wordllama import WordLlamaEmbedder
from app.engine.reference import ReferenceEngine
from tests.conformance.faults import Fault, admitting, assert_caught
from tests.conformance.support import failed, outcomes_against


def without(rule: Filter, **unset: Any) -> Filter:
    """``rule`` with some of its constraints dropped."""
    return rule.model_copy(update=unset)


def reach_flags(rule: Filter, **flags: bool) -> Filter:
    return rule if rule.reach is None else rule.model_copy(update={"reach": rule.reach.model_copy(update=flags)})


def descendants_by_text(rule: Filter, kind: str, meta: Meta) -> bool:
    """Subtrees found by string prefix: ``agent:a`` takes in its sibling ``agent:ab``."""
    if rule.reach is None or not rule.reach.descendants:
        return rule.matches(kind, meta)
    below = meta.namespace_node.path.startswith(rule.reach.node.path)
    return rule.matches(kind, meta) or (below and without(rule, reach=None).matches(kind, meta))


def folder_by_text(rule: Filter, kind: str, meta: Meta) -> bool:
    """A folder prefix with no ``/`` boundary: ``/a/b`` takes in ``/a/bc``."""
    if rule.folder is None:
        return rule.matches(kind, meta)
    return without(rule, folder=None).matches(kind, meta) and (meta.folder or "\0").startswith(rule.folder)


def like(prefix: str, value: str | None) -> bool:
    """SQL's ``value = prefix OR value LIKE prefix || '/%'``, the prefix unescaped: ``_`` and ``%`` are wildcards."""
    pattern = re.escape(prefix.rstrip("/")).replace("_", ".").replace("%", ".*")
    return value is not None and re.fullmatch(f"{pattern}(/.*)?", value, re.DOTALL) is not None


def folder_by_unescaped_like(rule: Filter, kind: str, meta: Meta) -> bool:
    if rule.folder is None:
        return rule.matches(kind, meta)
    return without(rule, folder=None).matches(kind, meta) and like(rule.folder, meta.folder)


def subtree_by_unescaped_like(rule: Filter, kind: str, meta: Meta) -> bool:
    if rule.reach is None or not rule.reach.descendants:
        return rule.matches(kind, meta)
    below = like(rule.reach.node.path, meta.namespace_node.path)
    return rule.matches(kind, meta) or (below and without(rule, reach=None).matches(kind, meta))


def trailing_slash_kept(rule: Filter, kind: str, meta: Meta) -> bool:
    if rule.file_path is None or not rule.file_path.endswith("/"):
        return rule.matches(kind, meta)
    path = meta.file_path
    return without(rule, file_path=None).matches(kind, meta) and path is not None and path.startswith(rule.file_path)


def exact_ignoring_case(rule: Filter, kind: str, meta: Meta) -> bool:
    if rule.repo is None:
        return rule.matches(kind, meta)
    return without(rule, repo=None).matches(kind, meta) and (meta.repo or "").lower() == rule.repo.lower()


def thread_by_prefix(rule: Filter, kind: str, meta: Meta) -> bool:
    if rule.thread_id is None:
        return rule.matches(kind, meta)
    return without(rule, thread_id=None).matches(kind, meta) and (meta.thread_id or "\0").startswith(rule.thread_id)


def turns_overlapping(rule: Filter, kind: str, meta: Meta) -> bool:
    if rule.turns is None:
        return rule.matches(kind, meta)
    turns = meta.turns
    overlaps = turns is not None and turns.first <= rule.turns.last and rule.turns.first <= turns.last
    return without(rule, turns=None).matches(kind, meta) and overlaps


def tool_by_prefix(rule: Filter, kind: str, meta: Meta) -> bool:
    if rule.tool_call is None:
        return rule.matches(kind, meta)
    name = meta.tool_call.name if meta.tool_call else "\0"
    return without(rule, tool_call=None).matches(kind, meta) and name.startswith(rule.tool_call)


def tags_all(rule: Filter, kind: str, meta: Meta) -> bool:
    return without(rule, tags_any=[]).matches(kind, meta) and set(rule.tags_any) <= set(meta.tags or ())


def empty_tags_match_nothing(rule: Filter, kind: str, meta: Meta) -> bool:
    return rule.matches(kind, meta) and ("tags_any" not in rule.model_fields_set or bool(rule.tags_any))


def after_exclusive(rule: Filter, kind: str, meta: Meta) -> bool:
    after = rule.observed_after
    return rule.matches(kind, meta) and (after is None or meta.observed_at != after)


def observed_to_the_second(rule: Filter, kind: str, meta: Meta) -> bool:
    """Instants compared without their fraction of a second."""
    seconds = meta.observed_at and meta.observed_at.replace(microsecond=0)
    bounds = {k: v.replace(microsecond=0) for k in ("observed_after", "observed_before") if (v := getattr(rule, k))}
    return rule.model_copy(update=bounds).matches(kind, meta.model_copy(update={"observed_at": seconds}))


def unobserved_before_anything(rule: Filter, kind: str, meta: Meta) -> bool:
    if rule.observed_before is not None and meta.observed_at is None:
        return without(rule, observed_before=None).matches(kind, meta)
    return rule.matches(kind, meta)


def root_reach_sees_all(rule: Filter, kind: str, meta: Meta) -> bool:
    """A reach at the root read as no reach at all."""
    if rule.reach is not None and rule.reach.node == Namespace():
        return without(rule, reach=None).matches(kind, meta)
    return rule.matches(kind, meta)


def sources_default_missing(rule: Filter, kind: str, meta: Meta) -> bool:
    """An item stored without a source counted as having none."""
    explicit = meta.source is not None and meta.source.kind != "agent"
    return rule.matches(kind, meta) and (not rule.sources or explicit)


class VectorFetchIgnoresFolder(ReferenceEngine):
    async def _rank(self, query: str, mode: str, request_filter: Filter) -> Any:
        if mode == "vector":
            request_filter = without(request_filter, folder=None)
        return await super()._rank(query, mode, request_filter)


class ExploreIgnoresTags(ReferenceEngine):
    async def explore(self, request: Any) -> Any:
        return await super().explore(request.model_copy(update={"filter": without(request.filter, tags_any=[])}))


class ForgetIgnoresLanguage(ReferenceEngine):
    async def forget(self, target: Any) -> Any:
        if hasattr(target, "filter"):
            target = target.model_copy(update={"filter": without(target.filter, language=None)})
        return await super().forget(target)


class ReversedTurnsRead(ReferenceEngine):
    """A reversed turns range read as matching nothing instead of refused."""

    async def list(self, request: Any) -> Any:
        turns = request.filter.turns
        if turns is not None and turns.first > turns.last:
            request = request.model_copy(
                update={"filter": without(request.filter, turns=None, tags_any=["no-such-tag"])}
            )
        return await super().list(request)


FAULTS = [
    Fault(
        "descendants ignored",
        "reach_with_descendants_sees_the_subtree",
        admitting(lambda f, k, m: reach_flags(f, descendants=False).matches(k, m)),
    ),
    Fault(
        "inherit ignored",
        "reach_sees_itself_and_with_inherit_its_ancestors",
        admitting(lambda f, k, m: reach_flags(f, inherit=False).matches(k, m)),
    ),
    Fault("a subtree found by text prefix", "reach_never_admits_a_sibling", admitting(descendants_by_text)),
    Fault(
        "a root reach sees everything", "reach_defaults_to_inherit_without_descendants", admitting(root_reach_sees_all)
    ),
    Fault(
        "language ignored",
        "exact_fields_match_only_their_value",
        admitting(lambda f, k, m: without(f, language=None).matches(k, m)),
    ),
    Fault(
        "source_id ignored",
        "exact_fields_match_only_their_value",
        admitting(lambda f, k, m: without(f, source_id=None).matches(k, m)),
    ),
    Fault("repo compared ignoring case", "exact_fields_match_only_their_value", admitting(exact_ignoring_case)),
    Fault("thread_id by prefix", "exact_fields_match_only_their_value", admitting(thread_by_prefix)),
    Fault(
        "folder prefix without a boundary", "folder_and_file_path_match_on_a_slash_boundary", admitting(folder_by_text)
    ),
    Fault(
        "folder by an unescaped LIKE",
        "folder_and_file_path_match_on_a_slash_boundary",
        admitting(folder_by_unescaped_like),
    ),
    Fault("a subtree by an unescaped LIKE", "reach_never_admits_a_sibling", admitting(subtree_by_unescaped_like)),
    Fault("a trailing slash kept", "folder_and_file_path_match_on_a_slash_boundary", admitting(trailing_slash_kept)),
    Fault(
        "fetch ignores folder in vector mode",
        "folder_and_file_path_match_on_a_slash_boundary",
        VectorFetchIgnoresFolder,
    ),
    Fault("turns by overlap", "turns_match_the_exact_range", admitting(turns_overlapping)),
    Fault("a reversed turns range listed", "a_reversed_turns_range_is_refused", ReversedTurnsRead),
    Fault("tool_call by prefix", "tool_call_matches_the_tool_name", admitting(tool_by_prefix)),
    Fault(
        "kinds ignored",
        "kinds_and_sources_admit_the_listed_kinds",
        admitting(lambda f, k, m: without(f, kinds=[]).matches(k, m)),
    ),
    Fault("no default source", "kinds_and_sources_admit_the_listed_kinds", admitting(sources_default_missing)),
    Fault("tags_any needs every tag", "tags_any_needs_one_shared_tag", admitting(tags_all)),
    Fault("an empty tags_any matches nothing", "tags_any_needs_one_shared_tag", admitting(empty_tags_match_nothing)),
    Fault("explore ignores tags_any", "tags_any_needs_one_shared_tag", ExploreIgnoresTags),
    Fault("observed_after exclusive", "observed_after_is_inclusive_and_before_exclusive", admitting(after_exclusive)),
    Fault(
        "instants to the second", "observed_after_is_inclusive_and_before_exclusive", admitting(observed_to_the_second)
    ),
    Fault(
        "unobserved items before any instant",
        "observed_after_is_inclusive_and_before_exclusive",
        admitting(unobserved_before_anything),
    ),
    Fault(
        "forget by filter ignores language", "forget_by_filter_removes_exactly_what_it_admits", ForgetIgnoresLanguage
    ),
]


async def test_a_faithful_service_passes(embedder: WordLlamaEmbedder) -> None:
    assert failed(await outcomes_against(ReferenceEngine(embedder), ["filters"])) == []


@pytest.mark.parametrize("fault", FAULTS, ids=str)
async def test_each_fault_is_caught(fault: Fault, embedder: WordLlamaEmbedder) -> None:
    await assert_caught(fault, embedder, "filters")
