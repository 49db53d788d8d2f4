"""Namespaces and reach (contract §3): the tree's paths and which nodes a read sees."""

from __future__ import annotations

from typing import Any

import pytest

from app.contract.meta import Filter, Meta
from app.contract.namespaces import Namespace, Reach, normalise_namespace
from app.contract.text import is_blank
from tests.contract.support import refused

ROOT = "root"
ACME = "team:acme"
WRITER = "team:acme/agent:writer"
PROJECT = "team:acme/agent:writer/project:x"
REVIEWER = "team:acme/agent:reviewer"
OTHER = "team:other"
TREE = (ROOT, ACME, WRITER, PROJECT, REVIEWER, OTHER)


# --- parse and print -------------------------------------------------------


@pytest.mark.parametrize("text", ["", "root", "  root  ", " \t\n", None])
def test_empty_and_root_are_the_root_and_print_root(text: str | None) -> None:
    node = Namespace.parse(text)
    assert node.is_root
    assert node == Namespace()
    assert str(node) == "root"
    assert normalise_namespace(text) is None  # the root is omitted from meta


def test_a_path_prints_as_written() -> None:
    node = Namespace.parse(PROJECT)
    assert node.segments == (("team", "acme"), ("agent", "writer"), ("project", "x"))
    assert str(node) == PROJECT
    assert node.depth == 3


@pytest.mark.parametrize("kind", ["agent", "team", "user", "ws", "project", "source"])
def test_every_segment_kind_is_accepted(kind: str) -> None:
    assert str(Namespace.parse(f"{kind}:a")) == f"{kind}:a"


def test_the_whole_string_is_trimmed() -> None:
    assert str(Namespace.parse(f"  {WRITER}\n")) == WRITER
    assert normalise_namespace(f"\t{WRITER} ") == WRITER
    assert normalise_namespace(f"\u3000\xa0{WRITER}\u2028") == WRITER  # Unicode White_Space, as Rust's trim


@pytest.mark.parametrize("separator", ["\x1c", "\x1d", "\x1e", "\x1f"])
def test_information_separators_are_not_space(separator: str) -> None:
    """Python's str.strip() takes them for space; Unicode's White_Space (the Rust seed's trim) does not."""
    refused(Namespace.parse, f"{separator}{WRITER}")
    assert not is_blank(separator)


@pytest.mark.parametrize(
    "text",
    [
        "team: acme",  # a space inside is not trimmed
        "team:acme /agent:writer",
        "team:acme/ agent:writer",
        "team :acme",
    ],
)
def test_nothing_inside_is_trimmed(text: str) -> None:
    refused(Namespace.parse, text)


@pytest.mark.parametrize("text", ["Team:acme", "TEAM:acme", "team:acme/Agent:writer", "ROOT", "Root"])
def test_kinds_are_lowercase_and_case_sensitive(text: str) -> None:
    message = refused(Namespace.parse, text)
    assert "namespace" in message


@pytest.mark.parametrize("text", ["org:acme", "workspace:a", "acme", "team", "/", "team:acme/", "/team:acme", "a//b"])
def test_unknown_kinds_and_malformed_paths_are_refused(text: str) -> None:
    refused(Namespace.parse, text)


@pytest.mark.parametrize("ident", ["A", "z", "0", "_", "-", "Aa0_-", "x" * 128])
def test_id_charset_and_length_accepted(ident: str) -> None:
    assert str(Namespace.parse(f"user:{ident}")) == f"user:{ident}"


@pytest.mark.parametrize("ident", ["", "x" * 129, "a.b", "a b", "a:b", "é", "a+b", "a@b", "١"])
def test_id_charset_and_length_refused(ident: str) -> None:
    refused(Namespace.parse, f"user:{ident}")


def test_at_most_eight_segments() -> None:
    eight = "/".join(f"ws:n{i}" for i in range(8))
    assert Namespace.parse(eight).depth == 8
    message = refused(Namespace.parse, eight + "/ws:n8")
    assert "8" in message


def test_meta_and_reach_refuse_a_bad_namespace_as_invalid_request() -> None:
    refused(Meta(namespace="Team:acme").checked)
    refused(Reach(at="team:acme/").checked)
    refused(Filter(reach=Reach(at="nope")).checked)


def test_a_valid_reach_prints_at_in_its_printed_form() -> None:
    assert Reach(at="").checked().at == "root"
    assert Reach(at=f" {WRITER} ").checked().at == WRITER


def test_reach_defaults() -> None:
    reach = Reach()
    assert (reach.at, reach.inherit, reach.descendants) == ("root", True, False)


def test_ancestors_and_below() -> None:
    node = Namespace.parse(PROJECT)
    assert [str(a) for a in node.ancestors()] == [ROOT, ACME, WRITER]
    assert node.is_below(Namespace.parse(ACME))
    assert not node.is_below(node)
    assert not Namespace.parse(REVIEWER).is_below(Namespace.parse(WRITER))


# --- reach: the worked example ---------------------------------------------------
#
# The tree:                    root
#                             /    \
#                     team:acme    team:other
#                      /      \
#           agent:writer     agent:reviewer
#                 |
#           project:x

REACH_TABLE = [
    # (reach, the nodes it admits)
    pytest.param(Reach(), {ROOT}, id="default reach sees only the root"),
    pytest.param(Reach(at="", descendants=True), set(TREE), id="root with descendants sees the whole tree"),
    pytest.param(Reach(at=WRITER), {ROOT, ACME, WRITER}, id="own node and ancestors with inherit"),
    pytest.param(Reach(at=WRITER, inherit=False), {WRITER}, id="own node only without inherit"),
    pytest.param(
        Reach(at=WRITER, inherit=False, descendants=True), {WRITER, PROJECT}, id="own subtree without ancestors"
    ),
    pytest.param(
        Reach(at=WRITER, inherit=True, descendants=True),
        {ROOT, ACME, WRITER, PROJECT},
        id="ancestors and subtree, never the sibling",
    ),
    pytest.param(
        Reach(at=ACME, inherit=False, descendants=True),
        {ACME, WRITER, PROJECT, REVIEWER},
        id="a team's subtree holds both agents and the project",
    ),
    pytest.param(Reach(at=PROJECT), {ROOT, ACME, WRITER, PROJECT}, id="a deep node inherits every ancestor"),
    pytest.param(
        Reach(at=REVIEWER, descendants=True), {ROOT, ACME, REVIEWER}, id="the sibling's subtree is never admitted"
    ),
    pytest.param(Reach(at=OTHER, inherit=False, descendants=True), {OTHER}, id="another team sees only itself"),
]


def _meta(path: str) -> Meta:
    return Meta(namespace=path).checked()


@pytest.mark.parametrize(("reach", "admitted"), REACH_TABLE)
def test_reach_admits(reach: Reach, admitted: set[str]) -> None:
    seen = {path for path in TREE if reach.admits(Namespace.parse(path))}
    assert seen == admitted


@pytest.mark.parametrize(("reach", "admitted"), REACH_TABLE)
def test_filter_with_reach_matches(reach: Reach, admitted: set[str]) -> None:
    raw = Filter(reach=reach)
    checked = raw.checked()
    for candidate in (raw, checked):
        seen = {path for path in TREE if candidate.matches("learning", _meta(path))}
        assert seen == admitted


def test_a_filter_without_reach_sees_every_namespace() -> None:
    assert all(Filter().matches("document", _meta(path)) for path in TREE)


def test_reach_at_is_trimmed_before_comparing() -> None:
    assert Reach(at=f"  {WRITER}  ", inherit=False).admits(Namespace.parse(WRITER))


@pytest.mark.parametrize(
    ("outer", "inner", "covered"),
    [
        ({"at": "team:a", "descendants": True, "inherit": False}, {"at": "team:a/user:b", "inherit": False}, True),
        ({"at": "team:a", "descendants": True, "inherit": False}, {"at": "team:a/user:b", "inherit": True}, False),
        ({"at": "team:a", "descendants": True, "inherit": True}, {"at": "team:a/user:b", "inherit": True}, True),
        ({"at": "team:a", "descendants": False, "inherit": False}, {"at": "team:a", "inherit": False}, True),
        ({"at": "team:a", "descendants": False}, {"at": "team:a", "descendants": True, "inherit": False}, False),
        ({"at": "team:a/user:b", "inherit": True}, {"at": "team:a", "inherit": False}, True),
        ({"at": "team:a/user:b", "inherit": True}, {"at": "team:a", "inherit": False, "descendants": True}, False),
        ({"at": "root", "descendants": True}, {"at": "team:z/user:q", "descendants": True}, True),
        ({"at": "team:a", "descendants": True, "inherit": False}, {"at": "team:b", "inherit": False}, False),
    ],
)
def test_a_reach_covers_another_when_it_admits_all_it_admits(
    outer: dict[str, Any], inner: dict[str, Any], covered: bool
) -> None:
    assert Reach(**outer).covers(Reach(**inner)) is covered
