"""Filters and reach (contract §3-4): which items a filter admits, the same set on every read.

Every check stores labelled items in its own namespace and compares, for each filter, the ids that
``list``, ``fetch`` (each mode offered), and ``explore``'s total admit against the labels it
expects. A filter whose reach inherits sees above the check's namespace, so it also asks for a
tag only this check's items carry: other data in the service never changes what a check sees.
"""

from __future__ import annotations

from typing import Any

from app.conformance.kit import Probe, check, expect, require
from app.conformance.reading import explored_total, fetch_modes, fetched, listed, marker, once_each, same_ids

# Every item's text holds this word, so a keyword fetch of it admits what the filter admits.
WORD = "marmalade"


class Labelled:
    """Items stored under labels; a read's ids compared with the labels a filter should admit."""

    def __init__(self, probe: Probe, ids: dict[str, str], modes: list[str]) -> None:
        self.probe = probe
        self.ids = ids
        self.names = {item_id: label for label, item_id in ids.items()}
        self.modes = modes

    @classmethod
    async def store(cls, probe: Probe, items: dict[str, dict[str, Any]]) -> Labelled:
        ids = await probe.store_all(list(items.values()))
        require(len(set(ids)) == len(ids), "distinct items were stored under one id")
        return cls(probe, dict(zip(items, ids, strict=True)), await fetch_modes(probe))

    async def admits(self, filter: dict[str, Any], *labels: str) -> None:
        """``filter`` admits exactly ``labels``, in list, in every fetch mode offered, and in explore's total."""
        expected = [self.ids[label] for label in labels]
        shown = str(filter).replace(self.probe.ns(), "~")
        got = once_each(await listed(self.probe, filter), f"list {shown}")
        same_ids(got, expected, f"list {shown}", self.names)
        for mode in self.modes:
            got = once_each(await fetched(self.probe, WORD, mode, filter), f"{mode} fetch {shown}")
            same_ids(got, expected, f"{mode} fetch {shown}", self.names)
        total = await explored_total(self.probe, filter)
        require(total == len(expected), f"explore {shown} counted {total} items, expected {len(expected)}")


def _item(probe: Probe, label: str, below: str = "", **meta: Any) -> dict[str, Any]:
    return probe.learning(f"{label} {WORD}", below=below, **meta)


# --- reach (contract §3) -----------------------------------------------------------------------------


async def _tree(probe: Probe, tag: str) -> Labelled:
    """One item at the check's node and at nodes below it; ``c``, ``ab``, ``a_b`` and ``axb`` are siblings of ``a``
    (``_`` is a character of an id, never a wildcard)."""
    nodes = {
        "self": "",
        "a": "agent:a",
        "a/b": "agent:a/user:b",
        "a/b/d": "agent:a/user:b/user:d",
        "c": "agent:c",
        "ab": "agent:ab",
        "a_b": "agent:a_b",
        "axb/e": "agent:axb/user:e",
    }
    return await Labelled.store(
        probe, {label: _item(probe, label, below, tags=[tag]) for label, below in nodes.items()}
    )


def _reach(probe: Probe, below: str, inherit: bool, descendants: bool) -> dict[str, Any]:
    return {"at": probe.ns(below), "inherit": inherit, "descendants": descendants}


@check("filters")
async def reach_sees_itself_and_with_inherit_its_ancestors(probe: Probe) -> None:
    tag = marker()
    tree = await _tree(probe, tag)
    await tree.admits({"reach": _reach(probe, "agent:a", False, False)}, "a")
    await tree.admits({"reach": _reach(probe, "agent:a/user:b", False, False)}, "a/b")
    await tree.admits({"reach": _reach(probe, "agent:a", True, False), "tags_any": [tag]}, "self", "a")
    await tree.admits({"reach": _reach(probe, "agent:a/user:b", True, False), "tags_any": [tag]}, "self", "a", "a/b")


@check("filters")
async def reach_with_descendants_sees_the_subtree(probe: Probe) -> None:
    tag = marker()
    tree = await _tree(probe, tag)
    await tree.admits({"reach": _reach(probe, "agent:a", False, True)}, "a", "a/b", "a/b/d")
    await tree.admits({"reach": _reach(probe, "", False, True)}, *tree.ids)
    await tree.admits(
        {"reach": _reach(probe, "agent:a/user:b", True, True), "tags_any": [tag]}, "self", "a", "a/b", "a/b/d"
    )


@check("filters")
async def reach_never_admits_a_sibling(probe: Probe) -> None:
    tag = marker()
    tree = await _tree(probe, tag)
    await tree.admits({"reach": _reach(probe, "agent:c", True, True), "tags_any": [tag]}, "self", "c")
    await tree.admits({"reach": _reach(probe, "agent:a", False, True)}, "a", "a/b", "a/b/d")
    await tree.admits({"reach": _reach(probe, "agent:ab", True, True), "tags_any": [tag]}, "self", "ab")
    await tree.admits({"reach": _reach(probe, "agent:a_b", False, True)}, "a_b")
    await tree.admits(
        {"reach": _reach(probe, "agent:a/user:b/user:d", True, False), "tags_any": [tag]}, "self", "a", "a/b", "a/b/d"
    )


@check("filters")
async def reach_defaults_to_inherit_without_descendants(probe: Probe) -> None:
    tag = marker()
    tree = await _tree(probe, tag)
    await tree.admits({"reach": {"at": probe.ns("agent:a")}, "tags_any": [tag]}, "self", "a")
    await tree.admits({"reach": {"at": probe.ns("agent:a"), "inherit": False}}, "a")
    # A default reach sees only the root, where the check stored nothing; no reach sees everywhere.
    await tree.admits({"reach": {}, "tags_any": [tag]})
    await tree.admits({"tags_any": [tag]}, *tree.ids)
    # The root by either name, with descendants: everywhere.
    await tree.admits({"reach": {"at": "root", "descendants": True}, "tags_any": [tag]}, *tree.ids)
    await tree.admits({"reach": {"at": "", "inherit": False, "descendants": True}, "tags_any": [tag]}, *tree.ids)


# --- fields (contract §4) ----------------------------------------------------------------------------

EXACT_FIELDS = ("workspace", "language", "repo", "commit", "url", "thread_id", "agent_id", "source_id")


def _with_field(field: str, value: str | None) -> dict[str, Any]:
    """Meta holding ``field`` (``source_id`` is ``meta.source.id``); none of it when ``value`` is None."""
    if field == "source_id":
        return {"source": {"kind": "import", "id": value} if value is not None else {"kind": "import"}}
    return {} if value is None else {field: value}


@check("filters")
async def exact_fields_match_only_their_value(probe: Probe) -> None:
    # Per field: the value, a longer value it prefixes, the value in another case, and no value.
    variants = {"same": "v1", "longer": "v1-more", "case": "V1", "none": None}
    items = {
        f"{field}={name}": _item(probe, f"{field} {name}", **_with_field(field, value))
        for field in EXACT_FIELDS
        for name, value in variants.items()
    }
    corpus = await Labelled.store(probe, items)
    for field in EXACT_FIELDS:
        await corpus.admits(probe.scoped(**{field: "v1"}), f"{field}=same")


@check("filters")
async def folder_and_file_path_match_on_a_slash_boundary(probe: Probe) -> None:
    # "_" and "%" are characters of a path, never wildcards: "/x_y" is no prefix of "/xzy/q".
    folders = ["/a/b", "/a/b/c", "/a/bc", "/a", "/x_y/q", "/xzy/q", "/x%/q"]
    files = ["/a/b/c.rs", "/a/bc.rs", "/a/b"]
    items = {f"folder {v}": _item(probe, f"folder {v}", folder=v) for v in folders}
    items |= {f"file {v}": _item(probe, f"file {v}", file_path=v) for v in files}
    items["neither"] = _item(probe, "neither")
    corpus = await Labelled.store(probe, items)
    for prefix in ("/a/b", "/a/b/"):
        await corpus.admits(probe.scoped(folder=prefix), "folder /a/b", "folder /a/b/c")
        await corpus.admits(probe.scoped(file_path=prefix), "file /a/b/c.rs", "file /a/b")
    await corpus.admits(probe.scoped(folder="/a/bc"), "folder /a/bc")
    await corpus.admits(probe.scoped(folder="/a"), "folder /a", "folder /a/b", "folder /a/b/c", "folder /a/bc")
    await corpus.admits(probe.scoped(file_path="/a/b/c"))
    await corpus.admits(probe.scoped(folder="/x_y"), "folder /x_y/q")
    await corpus.admits(probe.scoped(folder="/x%"), "folder /x%/q")


@check("filters")
async def turns_match_the_exact_range(probe: Probe) -> None:
    ranges = {"0-2": (0, 2), "0-3": (0, 3), "1-2": (1, 2)}
    items = {k: _item(probe, k, turns={"first": f, "last": last}) for k, (f, last) in ranges.items()}
    corpus = await Labelled.store(probe, {**items, "none": _item(probe, "none")})
    await corpus.admits(probe.scoped(turns={"first": 0, "last": 2}), "0-2")
    await corpus.admits(probe.scoped(turns={"first": 1, "last": 3}))


@check("filters")
async def a_reversed_turns_range_is_refused(probe: Probe) -> None:
    kept = await probe.store(_item(probe, "kept", turns={"first": 1, "last": 3}))
    reversed_filter = probe.scoped(turns={"first": 3, "last": 1})
    mode = (await fetch_modes(probe) or ["keyword"])[0]
    calls = {
        "/v1/list": {"filter": reversed_filter, "limit": 10},
        "/v1/fetch": {"query": WORD, "mode": mode, "filter": reversed_filter, "limit": 10},
        "/v1/recall": {"question": WORD, "filter": reversed_filter, "limit": 10},
        "/v1/explore": {"facet": "kind", "filter": reversed_filter, "limit": 10},
        "/v1/forget": {"filter": reversed_filter},
    }
    for path, body in calls.items():
        expect(await probe.post(path, body), 400, "invalid_request")
    require(kept in await listed(probe, probe.scoped()), "a forget refused for a reversed turns range removed an item")


@check("filters")
async def tool_call_matches_the_tool_name(probe: Probe) -> None:
    tools = {"grep#1": {"name": "grep", "id": "1"}, "grep": {"name": "grep"}, "grep_all": {"name": "grep_all"}}
    items = {k: _item(probe, k, tool_call=v) for k, v in tools.items()}
    items |= {"Grep": _item(probe, "Grep", tool_call={"name": "Grep"}), "none": _item(probe, "none")}
    corpus = await Labelled.store(probe, items)
    await corpus.admits(probe.scoped(tool_call="grep"), "grep#1", "grep")
    await corpus.admits(probe.scoped(tool_call="1"))


@check("filters")
async def kinds_and_sources_admit_the_listed_kinds(probe: Probe) -> None:
    conversation = {
        "type": "conversation",
        "turns": [{"role": "user", "text": f"conversation {WORD}"}],
        "meta": {"namespace": probe.ns(), "source": {"kind": "conversation"}},
    }
    items = {
        "document": probe.document(f"document {WORD}", source={"kind": "file"}),
        "learning": _item(probe, "learning"),
        "conversation": conversation,
    }
    corpus = await Labelled.store(probe, items)
    await corpus.admits(probe.scoped(kinds=["learning"]), "learning")
    await corpus.admits(probe.scoped(kinds=["document", "conversation"]), "document", "conversation")
    await corpus.admits(probe.scoped(kinds=[]), *items)
    await corpus.admits(probe.scoped(sources=["file"]), "document")
    # An item stored without a source is an agent's.
    await corpus.admits(probe.scoped(sources=["agent", "folder"]), "learning")
    await corpus.admits(probe.scoped(sources=[]), *items)


@check("filters")
async def tags_any_needs_one_shared_tag(probe: Probe) -> None:
    tags = {"x+y": ["x", "y"], "y": ["y"], "z": ["z"]}
    items = {k: _item(probe, k, tags=v) for k, v in tags.items()}
    corpus = await Labelled.store(probe, {**items, "none": _item(probe, "none")})
    await corpus.admits(probe.scoped(tags_any=["x"]), "x+y")
    await corpus.admits(probe.scoped(tags_any=["y", "z"]), "x+y", "y", "z")
    await corpus.admits(probe.scoped(tags_any=["w", "X"]))
    await corpus.admits(probe.scoped(tags_any=[]), "x+y", "y", "z", "none")


@check("filters")
async def observed_after_is_inclusive_and_before_exclusive(probe: Probe) -> None:
    days = {"day1": "2024-01-01T00:00:00Z", "day2": "2024-01-02T00:00:00.5Z", "day3": "2024-01-03T00:00:00Z"}
    items = {k: _item(probe, k, observed_at=v) for k, v in days.items()}
    corpus = await Labelled.store(probe, {**items, "unobserved": _item(probe, "unobserved")})
    await corpus.admits(probe.scoped(observed_after=days["day2"]), "day2", "day3")
    await corpus.admits(probe.scoped(observed_before=days["day2"]), "day1")
    await corpus.admits(probe.scoped(observed_after=days["day1"], observed_before=days["day3"]), "day1", "day2")
    # The same instant in another offset, a microsecond either side of it, and bounds that hold every observed item.
    await corpus.admits(probe.scoped(observed_after="2024-01-02T01:00:00.500000+01:00"), "day2", "day3")
    await corpus.admits(probe.scoped(observed_after="2024-01-02T00:00:00.500001Z"), "day3")
    await corpus.admits(probe.scoped(observed_before="2024-01-02T00:00:00.500001Z"), "day1", "day2")
    await corpus.admits(probe.scoped(observed_before="2999-01-01T00:00:00Z"), "day1", "day2", "day3")
    await corpus.admits(probe.scoped(observed_after="1999-01-01T00:00:00Z"), "day1", "day2", "day3")


@check("filters")
async def forget_by_filter_removes_exactly_what_it_admits(probe: Probe) -> None:
    shapes = {
        "rust+x": {"language": "rust", "tags": ["x"]},
        "rust+y": {"language": "rust", "tags": ["y"]},
        "go+x": {"language": "go", "tags": ["x"]},
        "x": {"tags": ["x"]},
        "rust+x elsewhere": {"language": "rust", "tags": ["x"], "workspace": "w"},
    }
    corpus = await Labelled.store(probe, {k: _item(probe, k, **v) for k, v in shapes.items()})
    doomed = probe.scoped(language="rust", tags_any=["x"])
    await corpus.admits(doomed, "rust+x", "rust+x elsewhere")
    answer = await probe.call("/v1/forget", {"filter": {**doomed, "workspace": "none-such"}})
    require(answer["forgotten"] == 0, f"a forget whose filter admits nothing forgot {answer['forgotten']}")
    answer = await probe.call("/v1/forget", {"filter": doomed})
    require(answer["forgotten"] == 2, f"forget by filter counted {answer['forgotten']}, expected the 2 it admits")
    await corpus.admits(probe.scoped(), "rust+y", "go+x", "x")
