"""Explore (contract §6): exact counts per facet value, their order, the cut to ``limit``, and buckets
that narrow back into filters listing as many items as they count.

The check knows what it stored, so it counts each facet itself and compares the whole answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from app.conformance.kit import Probe, check, require
from app.conformance.reading import listed

FACETS = (
    "kind",
    "source",
    "source_id",
    "workspace",
    "folder",
    "file_path",
    "language",
    "repo",
    "url",
    "thread",
    "agent",
    "tool_call",
    "tag",
    "namespace",
)
# The meta field each plain facet reads.
FIELDS = {"thread": "thread_id", "agent": "agent_id"}
# Values that tie, in code-point order: uppercase before "_" before lowercase, "z" before "é", and a
# character of the basic plane before one beyond it (UTF-16 order would put the emoji first).
TIED = ["B", "_", "b", "z", "é", "\uff5e", "\U0001f600"]


def _corpus(probe: Probe) -> list[dict[str, Any]]:
    """Items in two nodes with every facet set on some and missing on others; folders that do not nest."""
    first = {
        "workspace": "w1",
        "folder": "/p",
        "file_path": "/p/main.rs",
        "language": "a",
        "repo": "r1",
        "url": "https://example.com/1",
        "thread_id": "t1",
        "agent_id": "g1",
        "tool_call": {"name": "grep", "id": "c1"},
        "source": {"kind": "file", "id": "s1"},
        "tags": ["x", "y", "z"],
    }
    conversation = {
        "type": "conversation",
        "turns": [{"role": "user", "text": "the conversation"}],
        "meta": {
            "namespace": probe.ns("agent:a"),
            "language": "a",
            "thread_id": "t1",
            "source": {"kind": "conversation"},
        },
    }
    return [
        probe.learning("first", **first),
        probe.learning("second", workspace="w1", folder="/p2", language="B", tags=["x"], agent_id="g1"),
        probe.document(
            "third", below="agent:a", folder="/q", language="b", tags=["y"], source={"kind": "import", "id": "s1"}
        ),
        conversation,
        probe.learning("fifth", below="agent:a", language="_", tags=["Y"], tool_call={"name": "grep"}),
        probe.learning("sixth", language="z", repo="r2", url="https://example.com/2", tags=["x"]),
        probe.learning("seventh", language="é", file_path="/q/lib.rs", thread_id="t2"),
        probe.learning("eighth", tags=["x"], workspace="w2", agent_id="g2"),
        # A repeated tag: the item counts once under it, as narrowing to it lists the item once.
        probe.learning("ninth", tags=["z", "z"], language="a"),
    ]


def facet_values(item: dict[str, Any], facet: str) -> list[str]:
    """The values an item counts under (contract §6), from what was stored."""
    meta = item["meta"]
    source = meta.get("source", {"kind": "agent"})
    if facet == "kind":
        return [item["type"]]
    if facet == "source":
        return [source["kind"]]
    if facet == "source_id":
        return [source["id"]] if "id" in source else []
    if facet == "tool_call":
        return [meta["tool_call"]["name"]] if "tool_call" in meta else []
    if facet == "tag":
        return sorted(set(meta.get("tags", [])))
    value = meta.get(FIELDS.get(facet, facet))
    return [] if value is None else [value]


def _order(counts: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda bucket: (-bucket[1], bucket[0].encode("utf-8")))


def expected_page(items: list[dict[str, Any]], facet: str, limit: int) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    missing = 0
    for item in items:
        values = facet_values(item, facet)
        missing += not values
        counts.update(values)
    ordered = _order(counts)
    return {
        "facet": facet,
        "buckets": [{"value": v, "count": c} for v, c in ordered[:limit]],
        "total": len(items),
        "missing": missing,
        "more_buckets": max(0, len(ordered) - limit),
        "truncated": False,
    }


async def _explore(probe: Probe, facet: str, filter: dict[str, Any], limit: int = 500, **more: Any) -> Any:
    return await probe.call("/v1/explore", {"facet": facet, "filter": filter, "limit": limit, **more})


def _compare(got: dict[str, Any], expected: dict[str, Any], what: str) -> None:
    for key in ("total", "missing", "more_buckets", "truncated"):
        require(got.get(key) == expected[key], f"{what}: {key} {got.get(key)!r}, expected {expected[key]!r}")
    shown = [(b["value"], b["count"]) for b in got["buckets"]]
    wanted = [(b["value"], b["count"]) for b in expected["buckets"]]
    require(shown == wanted, f"{what}: buckets {shown}, expected {wanted}")


@check("explore")
async def every_facet_counts_exactly(probe: Probe) -> None:
    items = _corpus(probe)
    await probe.store_all(items)
    scopes: dict[str, tuple[dict[str, Any], Callable[[dict[str, Any]], bool]]] = {
        "everything": (probe.scoped(), lambda item: True),
        "learnings": (probe.scoped(kinds=["learning"]), lambda item: item["type"] == "learning"),
        "agent:a alone": (
            {"reach": probe.reach("agent:a", descendants=False)},
            lambda item: item["meta"]["namespace"] == probe.ns("agent:a"),
        ),
    }
    for name, (filter, admits) in scopes.items():
        admitted = [item for item in items if admits(item)]
        for facet in FACETS:
            got = await _explore(probe, facet, filter)
            _compare(got, expected_page(admitted, facet, 500), f"explore {facet} over {name}")


@check("explore")
async def buckets_sort_by_count_then_code_point(probe: Probe) -> None:
    values = ["a", "a", *TIED[::-1]]
    await probe.store_all([probe.learning(f"item {n}", language=v) for n, v in enumerate(values)])
    got = await _explore(probe, "language", probe.scoped())
    order = [b["value"] for b in got["buckets"]]
    require(order == ["a", *TIED], f"language buckets came as {order}, expected {['a', *TIED]} (code-point order)")


@check("explore")
async def buckets_are_cut_to_the_limit_and_the_cut_is_counted(probe: Probe) -> None:
    items = _corpus(probe)
    await probe.store_all(items)
    for facet, limit in (("language", 1), ("language", 3), ("tag", 2), ("namespace", 1), ("kind", 3)):
        got = await _explore(probe, facet, probe.scoped(), limit)
        _compare(got, expected_page(items, facet, limit), f"explore {facet} of limit {limit}")


def narrowed(probe: Probe, facet: str, value: str) -> dict[str, Any]:
    """The filter a bucket narrows into (contract §6), inside the check's namespace."""
    if facet == "namespace":
        return {"reach": {"at": value, "inherit": False, "descendants": False}}
    field = {"kind": "kinds", "source": "sources", "tag": "tags_any", "thread": "thread_id", "agent": "agent_id"}
    name = field.get(facet, facet)
    return probe.scoped(**{name: [value] if name in ("kinds", "sources", "tags_any") else value})


@check("explore")
async def a_narrowed_bucket_lists_its_count(probe: Probe) -> None:
    await probe.store_all(_corpus(probe))
    for facet in FACETS:
        got = await _explore(probe, facet, probe.scoped())
        for bucket in got["buckets"]:
            count = len(await listed(probe, narrowed(probe, facet, bucket["value"])))
            require(
                count == bucket["count"],
                f"the {facet} bucket {bucket['value']!r} counts {bucket['count']}, its filter lists {count}",
            )


@check("explore")
async def a_complete_count_is_not_truncated(probe: Probe) -> None:
    items = _corpus(probe)
    await probe.store_all(items)
    for scan_limit in (len(items), 5000, 50000):
        got = await _explore(probe, "tag", probe.scoped(), scan_limit=scan_limit)
        _compare(got, expected_page(items, "tag", 500), f"explore with scan_limit {scan_limit} over {len(items)} items")
    # Scanning fewer items than the filter admits may sample; a sample must say so, and an exact answer is exact.
    got = await _explore(probe, "tag", probe.scoped(), scan_limit=2)
    if got["truncated"] is False:
        _compare(got, expected_page(items, "tag", 500), "explore with scan_limit 2 answering truncated false")
    else:
        require(got["truncated"] is True, f"truncated is {got['truncated']!r}")
        require(got["total"] <= len(items), f"a truncated explore counted {got['total']} of {len(items)} items")
