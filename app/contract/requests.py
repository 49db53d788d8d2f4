"""Every request and answer of contract §5, and their validation."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

from app.contract.closed import Closed
from app.contract.errors import InvalidRequest, Unsupported, quoted
from app.contract.items import Item, StoredItem
from app.contract.limits import (
    DEFAULT_LIMITS,
    DEFAULT_SCAN_LIMIT,
    MAX_BUCKETS,
    MAX_FORGET_IDS,
    MAX_GET_IDS,
    MAX_PAGE,
    MAX_SCAN_LIMIT,
    MAX_STORE_MANY,
    Limits,
)
from app.contract.meta import Filter, Instant, ItemKind, Meta
from app.contract.namespaces import Reach
from app.contract.nulls import plain_union_nulls
from app.contract.text import check_storable, is_blank
from app.contract.timebuckets import TIME_FACETS, parse_bucket

FetchMode = Literal["keyword", "vector", "hybrid"]
FETCH_MODES: tuple[FetchMode, ...] = ("keyword", "vector", "hybrid")


def documented_range(low: int, high: int) -> object:
    """The range in the schema only: out of range is the contract's 400, not a schema 422."""
    return Field(json_schema_extra={"minimum": low, "maximum": high})


PageLimit = Annotated[int, documented_range(1, MAX_PAGE)]


def _check_limit(limit: int, low: int, high: int, name: str = "limit") -> None:
    if not low <= limit <= high:
        raise InvalidRequest(f"{name} must be in {low}..{high}, got {limit}")


def _check_query(text: str, name: str, limits: Limits) -> None:
    if is_blank(text):
        raise InvalidRequest(f"{name} must not be blank")
    if len(text) > limits.max_query_chars:
        raise InvalidRequest(f"{name} is longer than {limits.max_query_chars} characters")
    check_storable(text, name)


def _check_ids(ids: list[str], high: int, limits: Limits) -> None:
    if not ids:
        raise InvalidRequest("ids must not be empty")
    if len(ids) > high:
        raise InvalidRequest(f"ids holds more than {high} ids")
    for index, item_id in enumerate(ids):
        if is_blank(item_id):
            raise InvalidRequest(f"ids[{index}] must not be blank")
        if len(item_id) > limits.max_id_chars:
            raise InvalidRequest(f"ids[{index}] is longer than {limits.max_id_chars} characters")
    check_storable(ids, "ids")


# A list this many times over its limit is refused before its elements are read: validating them
# only to list their faults held the service (a 3 MB body of a million empty items: 22 s, and an
# answer of 112 MB). Within it, the body's shape is checked first, as contract §8 orders.
FAR_OVER = 10


class _Bounded(Closed):
    """A request with a bounded list: ``_bound`` is its key, its limit and the refusal's words."""

    _bound: ClassVar[tuple[str, int, str]]

    @model_validator(mode="before")
    @classmethod
    def _not_far_over(cls, data: Any) -> Any:
        key, high, message = cls._bound
        values = data.get(key) if isinstance(data, dict) else None
        if isinstance(values, list) and len(values) > FAR_OVER * high:
            raise InvalidRequest(message.format(count=len(values)))
        return data


class StoreManyRequest(_Bounded):
    _bound = ("items", MAX_STORE_MANY, f"items must hold 1..{MAX_STORE_MANY} items, got {{count}}")
    items: list[Item]

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> list[StoredItem]:
        """The whole batch is checked before anything is written; an error names its index."""
        if not 1 <= len(self.items) <= MAX_STORE_MANY:
            raise InvalidRequest(f"items must hold 1..{MAX_STORE_MANY} items, got {len(self.items)}")
        checked = []
        for index, item in enumerate(self.items):
            try:
                checked.append(item.checked(limits))
            except InvalidRequest as error:
                raise InvalidRequest(f"items[{index}]: {error.detail}") from None
        return checked


class FetchRequest(Closed):
    query: str
    mode: FetchMode
    filter: Filter = Field(default_factory=Filter)
    limit: PageLimit
    cursor: str | None = None

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> FetchRequest:
        _check_query(self.query, "query", limits)
        _check_limit(self.limit, 1, MAX_PAGE)
        return self.model_copy(update={"filter": self.filter.checked(limits)})


class RecallRequest(Closed):
    question: str
    filter: Filter = Field(default_factory=Filter)
    limit: PageLimit
    instructions: str | None = None

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> RecallRequest:
        _check_query(self.question, "question", limits)
        _check_limit(self.limit, 1, MAX_PAGE)
        if self.instructions is not None:
            check_storable(self.instructions, "instructions")
        return self.model_copy(update={"filter": self.filter.checked(limits)})


class ListRequest(Closed):
    filter: Filter = Field(default_factory=Filter)
    limit: PageLimit
    cursor: str | None = None

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> ListRequest:
        _check_limit(self.limit, 1, MAX_PAGE)
        return self.model_copy(update={"filter": self.filter.checked(limits)})


class GetRequest(_Bounded):
    _bound = ("ids", MAX_GET_IDS, f"ids holds more than {MAX_GET_IDS} ids")
    ids: list[str]
    reach: Reach | None = None

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> GetRequest:
        _check_ids(self.ids, MAX_GET_IDS, limits)
        return self.model_copy(update={"reach": self.reach.checked() if self.reach else None})


class ForgetByIds(_Bounded):
    _bound = ("ids", MAX_FORGET_IDS, f"ids holds more than {MAX_FORGET_IDS} ids")
    ids: list[str]
    dry_run: bool = False
    """Answer what would be forgotten (``would_forget``, ``first_ids``) and remove nothing."""
    purge: bool = False
    """Erase: keep nothing for the undo window, and drop these ids' copies already held in it."""

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> ForgetByIds:
        _check_ids(self.ids, MAX_FORGET_IDS, limits)
        return self


class ForgetByFilter(Closed):
    filter: Filter
    all: bool = False
    """Say so to forget with a filter that admits every item (a reach at the root with descendants...)."""
    dry_run: bool = False
    purge: bool = False

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> ForgetByFilter:
        checked = self.filter.checked(limits)
        if checked.is_empty():
            raise InvalidRequest("an empty filter would forget everything: name at least one constraint")
        if checked.admits_everything() and not self.all:
            raise InvalidRequest('this filter admits every item: send "all": true to forget everything')
        return self.model_copy(update={"filter": checked})


ForgetTarget = ForgetByIds | ForgetByFilter


# {"ids": [...], "filter": null}, as a client that writes every optional field sends it, names one target.
class ForgetRequest(RootModel[Annotated[ForgetTarget, plain_union_nulls(ForgetByIds, ForgetByFilter)]]):
    """Exactly one of ``ids`` or ``filter``; neither or both does not fit the schema."""

    model_config = ConfigDict(strict=True)


class ForgetWithinRequest(_Bounded):
    _bound = ("ids", MAX_FORGET_IDS, f"ids holds more than {MAX_FORGET_IDS} ids")
    ids: list[str]
    reach: Reach
    dry_run: bool = False
    purge: bool = False

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> ForgetWithinRequest:
        _check_ids(self.ids, MAX_FORGET_IDS, limits)
        return self.model_copy(update={"reach": self.reach.checked()})


Facet = Literal[
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
    # Beyond the seed contract: observed_at by UTC year, month, day or hour (app/contract/timebuckets.py).
    "observed_year",
    "observed_month",
    "observed_day",
    "observed_hour",
]
FACETS: tuple[str, ...] = Facet.__args__  # type: ignore[attr-defined]


class ExploreRequest(Closed):
    facet: Facet
    filter: Filter = Field(default_factory=Filter)
    limit: Annotated[int, documented_range(1, MAX_BUCKETS)]
    scan_limit: Annotated[int, documented_range(1, MAX_SCAN_LIMIT)] = DEFAULT_SCAN_LIMIT

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> ExploreRequest:
        _check_limit(self.limit, 1, MAX_BUCKETS)
        _check_limit(self.scan_limit, 1, MAX_SCAN_LIMIT, "scan_limit")
        return self.model_copy(update={"filter": self.filter.checked(limits)})


# Answers. Optional fields are omitted when unset (the HTTP layer drops None).


class Answer(BaseModel):
    """Optional fields are omitted when unset: answers are written with ``exclude_none``."""

    model_config = ConfigDict(extra="forbid")


class StoreReceipt(Answer):
    id: str
    replayed: bool


class StoreManyResult(Answer):
    receipts: list[StoreReceipt]


class Hit(Answer):
    id: str
    kind: ItemKind
    text: str
    meta: Meta
    score: float
    confidence: float | None = None
    stored_at: Instant | None = None
    """When this service stored the item (a replay and a restore keep it; an import stores the item
    anew): ``get`` answers it, beyond the seed contract; rankings and listings leave it out."""


class FetchPage(Answer):
    hits: list[Hit]
    next_cursor: str | None = None


class ListPage(Answer):
    items: list[Hit]
    next_cursor: str | None = None


class GetResult(Answer):
    hits: list[Hit]


class Citation(Answer):
    id: str
    kind: ItemKind
    snippet: str
    meta: Meta
    score: float | None = None


class RecallAnswer(Answer):
    answer: str
    citations: list[Citation]
    model: str | None = None


PREVIEW_IDS = 20
"""How many ids a dry run names, the first stored first."""


class ForgetReport(Answer):
    """``forgotten``: items removed. A dry run removes none and says ``would_forget`` and the
    ``first_ids`` (at most PREVIEW_IDS, in the order stored) instead."""

    forgotten: int
    would_forget: int | None = None
    first_ids: list[str] | None = None
    receipt: str | None = None
    """Pass it to ``POST /v1/restore`` within the undo window to bring the items back."""


class RestoreRequest(Closed):
    receipt: Annotated[str, Field(max_length=64)]

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> RestoreRequest:
        if is_blank(self.receipt):
            raise InvalidRequest("receipt must not be blank")
        return self


class RestoreReport(Answer):
    restored: int


class FacetBucket(Answer):
    value: str
    count: int

    def narrow(self, facet: str) -> Filter:
        return narrow(facet, self.value)


class ExplorePage(Answer):
    facet: Facet
    buckets: list[FacetBucket]
    total: int
    missing: int
    more_buckets: int
    truncated: bool


def narrow(facet: str, value: str) -> Filter:
    """Turn a bucket back into the filter that selects it (contract §6)."""
    if facet == "kind":
        return Filter(kinds=[value])  # type: ignore[list-item]
    if facet == "source":
        return Filter(sources=[value])  # type: ignore[list-item]
    if facet == "tag":
        return Filter(tags_any=[value])
    if facet == "thread":
        return Filter(thread_id=value)
    if facet == "agent":
        return Filter(agent_id=value)
    if facet == "namespace":
        return Filter(reach=Reach(at=value, inherit=False, descendants=False))
    if facet in TIME_FACETS:
        start, end = parse_bucket(facet, value)
        return Filter(observed_after=start, observed_before=end)
    if facet in FACETS:
        return Filter(**{facet: value})
    raise InvalidRequest(f"unknown facet {quoted(facet)}")


class EngineDescriptor(Answer):
    id: str
    label: str
    description: str
    hosted: bool
    needs_endpoint: bool
    needs_key: bool
    default_endpoint: str | None = None
    fetch_modes: list[FetchMode]

    def ensure_mode(self, mode: str) -> None:
        if mode not in self.fetch_modes:
            raise Unsupported(f"engine does not offer {mode} fetch")


class Health(Answer):
    state: Literal["ok", "degraded", "down"]
    reason: str | None = None

    @property
    def is_serving(self) -> bool:
        return self.state != "down"
