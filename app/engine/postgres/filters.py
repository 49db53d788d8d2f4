"""A contract filter as a SQL predicate over ``engram_items AS i``.

Every field is translated here so that filtering happens inside the query,
before any LIMIT; nothing is filtered in Python afterwards.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.contract.access import ScopedFilter
from app.contract.meta import Filter
from app.contract.namespaces import Namespace, Reach


def live(alias: str = "i") -> str:
    """The items of ``engram_items AS alias`` that have not expired (migration 0015): no read returns
    another, from the moment its expiry passes, whether or not the sweeper has erased it yet."""
    return f"({alias}.expires_at IS NULL OR {alias}.expires_at > now())"


# The items whose expiry has passed and the sweeper has not erased yet: a few, or none while no
# retention policy is set (the partial index of migration 0015 holds only items that expire).
EXPIRED_IDS = "SELECT x.id FROM engram_items x WHERE x.expires_at <= now()"


def escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class Predicate:
    """Collects SQL clauses and their bound parameters under unique names.

    ``live``: the items that have expired are left out too (``live()``). It is not a clause of the
    filter: a predicate that admits every live item still ``admits_all``, so the statements made for
    no filter (generic plans, kept facet counts, complete sketch postings) keep their shape, each
    leaving out the expired in its own way.
    """

    def __init__(self, prefix: str = "f", *, live: bool = False) -> None:
        self.live = live
        self.clauses: list[str] = []
        self.params: dict[str, Any] = {}
        self._prefix = prefix
        # Clauses (by position) written another way beside the words: see sql().
        self._beside_words: dict[int, str] = {}

    def bind(self, value: Any) -> str:
        name = f"{self._prefix}{len(self.params)}"
        self.params[name] = value
        return f":{name}"

    def sql(self, *, beside_words: bool = False) -> str:
        """The clauses ANDed. ``beside_words``: as a keyword ranking wants them, where the terms
        index (migration 0006: words, tags, lineage) tests the filter in the words' own scan; a
        subtree is then ``lineage @>``, not the namespace tests, which are cheaper row by row
        (docs/tuning.md#filters-beside-the-words)."""
        clauses = [self._beside_words.get(n, c) if beside_words else c for n, c in enumerate(self.clauses)]
        if self.live:
            clauses.append(live())
        return " AND ".join(clauses) if clauses else "TRUE"

    @property
    def admits_all(self) -> bool:
        """No clause: every (live) item is admitted (a search needs no wider breadth to fill its page)."""
        return not self.clauses

    def add_reach(self, reach: Reach) -> None:
        at = Namespace.parse(reach.at)
        path = self.bind(at.path)
        admits = [f"i.namespace = {path}"]
        if reach.inherit and not at.is_root:
            ancestors = [a.path for a in at.ancestors()]
            admits.append(f"i.namespace = ANY(CAST({self.bind(ancestors)} AS text[]))")
        if reach.descendants:
            if at.is_root:
                admits.append("i.namespace <> ''")
            else:
                # ``at`` and below is one key of the terms index, ``at`` in the item's lineage.
                self._beside_words[len(self.clauses)] = (
                    "(" + " OR ".join([f"i.lineage @> ARRAY[CAST({path} AS text)]", *admits[1:]]) + ")"
                )
                admits.append(f"i.namespace LIKE {self.bind(escape_like(at.path) + '/%')}")
        self.clauses.append("(" + " OR ".join(admits) + ")")

    def add_path_prefix(self, field: str, prefix: str) -> None:
        prefix = prefix.rstrip("/")
        column = f"(i.meta->>'{field}')"
        self.clauses.append(
            f"({column} = {self.bind(prefix)} OR {column} LIKE {self.bind(escape_like(prefix) + '/%')})"
        )


def filter_predicate(request_filter: Filter, prefix: str = "f", *, live: bool = True) -> Predicate:
    """What ``request_filter`` admits; only the live items unless ``live`` is False (an erasure
    reaches the expired too)."""
    pred = Predicate(prefix, live=live)
    if request_filter.reach is not None:
        pred.add_reach(request_filter.reach)
    if isinstance(request_filter, ScopedFilter):
        pred.add_reach(request_filter.within)
    # Exact fields become one jsonb containment test, served by the GIN index on meta.
    contained: dict[str, Any] = dict(request_filter.exact_fields())
    if request_filter.source_id is not None:
        contained["source"] = {"id": request_filter.source_id}
    if request_filter.turns is not None:
        contained["turns"] = request_filter.turns.model_dump()
    if request_filter.tool_call is not None:
        contained["tool_call"] = {"name": request_filter.tool_call}
    if contained:
        pred.clauses.append(f"i.meta @> CAST({pred.bind(json.dumps(contained))} AS jsonb)")
    if request_filter.folder is not None:
        pred.add_path_prefix("folder", request_filter.folder)
    if request_filter.file_path is not None:
        pred.add_path_prefix("file_path", request_filter.file_path)
    if request_filter.kinds:
        pred.clauses.append(f"i.kind = ANY(CAST({pred.bind(list(request_filter.kinds))} AS text[]))")
    if request_filter.sources:
        pred.clauses.append(f"i.source_kind = ANY(CAST({pred.bind(list(request_filter.sources))} AS text[]))")
    if request_filter.tags_any:
        pred.clauses.append(f"i.tags && CAST({pred.bind(list(request_filter.tags_any))} AS text[])")
    if request_filter.observed_after is not None:
        pred.clauses.append(f"i.observed_at >= {pred.bind(request_filter.observed_after)}")
    if request_filter.observed_before is not None:
        pred.clauses.append(f"i.observed_at < {pred.bind(request_filter.observed_before)}")
    return pred


@dataclass(frozen=True)
class SketchKeys:
    """The part of a filter the sketch postings (``engram_sketch_postings AS p``, migration 0010) test by themselves.

    The keys a filter's sketches are filed under (its tags, else a namespace's lineage key; a
    lineage key beside tags is tested against its own postings): the clauses the statistics
    bound (app/engine/postgres/selectivity.py), so a filter ranked by sketches always has some.
    ``complete``: they are the whole filter, and no item need be read to apply it. ``several``:
    the filter names several tags, and an item may be filed under more than one of them. ``keys``:
    the keys themselves; ``narrowed``: beside tags, a lineage key narrows them (the predicate's
    second clause), so not every posting of the keys is admitted.
    """

    predicate: Predicate
    complete: bool
    several: bool
    keys: tuple[str, ...] = ()
    narrowed: bool = False


def tag_posting_key(tag: str) -> str:
    """The key the sketches of a tag's items are filed under (queries.backlog.POSTING_KEYS)."""
    return f"t:{tag}"


def lineage_posting_key(key: str) -> str:
    """The key the sketches of the items under a lineage key are filed under (queries.backlog.POSTING_KEYS)."""
    return f"n:{key}"


def lineage_key(reach: Reach | None) -> str | None:
    """The ``lineage`` key every item a reach admits holds: ``at``, unless the reach inherits
    (its ancestors hold no such key) or is at the root (no item's lineage lists it)."""
    if reach is None or reach.inherit:
        return None
    at = Namespace.parse(reach.at)
    return None if at.is_root else at.path


def sketch_keys(request_filter: Filter) -> SketchKeys:
    reach, lineage = request_filter.reach, lineage_key(request_filter.reach)
    tags = list(dict.fromkeys(request_filter.tags_any or []))
    if tags:
        keys = [tag_posting_key(tag) for tag in tags]
    elif lineage is not None:
        keys = [lineage_posting_key(lineage)]
    else:
        raise ValueError("a filter without tags or a lineage key has no sketches to rank by")
    pred = Predicate("k")
    pred.clauses.append(f"p.key = ANY(CAST({pred.bind(keys)} AS text[]))")
    if tags and lineage is not None:
        # ``at`` and below; ``at`` alone (without descendants) is narrowed by ``where``.
        pred.clauses.append(
            f"EXISTS (SELECT 1 FROM engram_sketch_postings l WHERE l.key = {pred.bind(lineage_posting_key(lineage))}"
            " AND l.seq = p.seq)"
        )
    rest = request_filter.model_dump(exclude_none=True, exclude_defaults=True).keys() - {"tags_any", "reach"}
    whole_reach = reach is None or (lineage is not None and reach.descendants)
    return SketchKeys(
        predicate=pred,
        complete=not rest and whole_reach,
        several=len(keys) > 1,
        keys=tuple(keys),
        narrowed=bool(tags) and lineage is not None,
    )
