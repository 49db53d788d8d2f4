"""Facet values of an item and the bucket page built from counts (contract §6)."""

from __future__ import annotations

from collections import Counter

from app.contract.meta import Meta
from app.contract.requests import ExplorePage, FacetBucket
from app.contract.timebuckets import TIME_FACETS, bucket_value


def facet_values(facet: str, kind: str, meta: Meta) -> list[str]:
    """The values an item counts under for ``facet``; empty when it lacks the facet."""
    source = meta.source
    values: dict[str, object] = {
        "kind": kind,
        "source": source.kind if source else "agent",
        "source_id": source.id if source else None,
        "workspace": meta.workspace,
        "folder": meta.folder,
        "file_path": meta.file_path,
        "language": meta.language,
        "repo": meta.repo,
        "url": meta.url,
        "thread": meta.thread_id,
        "agent": meta.agent_id,
        "tool_call": meta.tool_call.name if meta.tool_call else None,
        "namespace": str(meta.namespace_node),
    }
    if facet == "tag":
        # An item counts once per distinct tag.
        return sorted(set(meta.tags or ()))
    if facet in TIME_FACETS:
        return [] if meta.observed_at is None else [bucket_value(TIME_FACETS[facet], meta.observed_at)]
    value = values[facet]
    return [] if value is None else [str(value)]


def bucket_key(bucket: tuple[str, int]) -> tuple[int, bytes]:
    """Count descending, then value in code-point order (``COLLATE "C"``)."""
    value, count = bucket
    return (-count, value.encode("utf-8", "surrogatepass"))


def explore_page(facet: str, counts: Counter[str], total: int, missing: int, limit: int) -> ExplorePage:
    ordered = sorted(counts.items(), key=bucket_key)
    return ExplorePage(
        facet=facet,  # type: ignore[arg-type]
        buckets=[FacetBucket(value=v, count=c) for v, c in ordered[:limit]],
        total=total,
        missing=missing,
        more_buckets=max(0, len(ordered) - limit),
        truncated=False,
    )
