"""Metadata (contract §2) and filters (contract §4)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, PlainSerializer, Strict
from pydantic_core import PydanticCustomError

from app.contract.closed import Closed
from app.contract.errors import InvalidRequest
from app.contract.limits import DEFAULT_LIMITS, Limits
from app.contract.namespaces import Namespace, Reach, normalise_namespace
from app.contract.text import check_storable

SourceKind = Literal["folder", "file", "conversation", "agent", "import"]
ItemKind = Literal["document", "conversation", "learning"]
SOURCE_KINDS: tuple[str, ...] = ("folder", "file", "conversation", "agent", "import")
ITEM_KINDS: tuple[str, ...] = ("document", "conversation", "learning")


def _to_utc(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("timestamp must carry a time zone offset (RFC 3339)")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        # 0001-01-01T00:30:00+01:00 has no UTC instant in Python's range: a bad
        # value (422), not an unhandled exception (500).
        raise ValueError("timestamp is out of range once converted to utc") from None


def format_instant(value: datetime) -> str:
    """UTC with a ``Z``; a fraction only when non-zero, without trailing zeros."""
    value = value.astimezone(UTC)
    # isoformat, not strftime("%Y"): the year keeps its four digits (0999, not 999).
    text = value.replace(tzinfo=None, microsecond=0).isoformat(timespec="seconds")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text + "Z"


# RFC 3339's date-time (section 5.6; "T" and "Z" in either case, or a space between date and time,
# as its note allows), ASCII digits only. Pydantic's own parsing also takes numbers as Unix times
# and looser strings (no seconds, "+0100"), which the contract does not.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def _rfc3339(value: Any) -> Any:
    if isinstance(value, datetime) or (isinstance(value, str) and _RFC3339.fullmatch(value)):
        return value
    raise PydanticCustomError(
        "datetime_type", "a timestamp is an rfc 3339 date-time string, such as '2024-05-01T10:00:00Z'"
    )


# Any RFC 3339 form in, UTC with a Z out. Microseconds at most (pydantic truncates).
Instant = Annotated[
    datetime,
    BeforeValidator(_rfc3339),
    Strict(False),
    AfterValidator(_to_utc),
    PlainSerializer(format_instant, return_type=str, when_used="json"),
]


class Source(Closed):
    kind: SourceKind
    id: str | None = None


class ToolCall(Closed):
    name: str
    id: str | None = None


MAX_JSON_INT = 2**53 - 1


class TurnRange(Closed):
    """Zero-based, inclusive turn numbers."""

    first: Annotated[int, Field(ge=0)]
    last: Annotated[int, Field(ge=0)]

    def checked(self, where: str) -> TurnRange:
        """``where`` names the range in a message: ``meta.turns`` is not a conversation's ``turns``."""
        if self.first > self.last:
            raise InvalidRequest(f"{where}.first must not be greater than {where}.last")
        # Fingerprints are RFC 8785 JSON, which has no integers beyond 2^53 - 1.
        if self.last > MAX_JSON_INT:
            raise InvalidRequest(f"{where}.last must be at most {MAX_JSON_INT}")
        return self


_EXACT_META_FIELDS = ("workspace", "language", "repo", "commit", "url", "thread_id", "agent_id")


class Meta(Closed):
    """Where an item comes from and what it is about; every field optional."""

    namespace: str | None = None
    workspace: str | None = None
    folder: str | None = None
    file_path: str | None = None
    language: str | None = None
    repo: str | None = None
    commit: str | None = None
    url: str | None = None
    thread_id: str | None = None
    turns: TurnRange | None = None
    agent_id: str | None = None
    tool_call: ToolCall | None = None
    source: Source | None = None
    tags: list[str] | None = None
    observed_at: Instant | None = None

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> Meta:
        """Refuse what the contract refuses; return the canonical meta.

        Canonical: namespace trimmed (None for the root), source defaulted to
        ``agent``, an empty tag list dropped.
        """
        check_storable(self.model_dump(exclude_none=True), "meta")
        fields = {name: getattr(self, name) for name in (*_EXACT_META_FIELDS, "folder", "file_path")}
        if self.source is not None:
            fields["source.id"] = self.source.id
        if self.tool_call is not None:
            fields |= {"tool_call.name": self.tool_call.name, "tool_call.id": self.tool_call.id}
        for name, value in fields.items():
            if value is not None and len(value) > limits.max_field_chars:
                raise InvalidRequest(f"meta.{name} is longer than {limits.max_field_chars} characters")
        tags = self.tags or None
        if tags is not None:
            if len(tags) > limits.max_tags:
                raise InvalidRequest(f"meta.tags holds more than {limits.max_tags} tags")
            for tag in tags:
                if len(tag) > limits.max_tag_chars:
                    raise InvalidRequest(f"a tag is longer than {limits.max_tag_chars} characters")
        if self.turns is not None:
            self.turns.checked("meta.turns")
        return self.model_copy(
            update={
                "namespace": normalise_namespace(self.namespace),
                "source": self.source or Source(kind="agent"),
                "tags": tags,
            }
        )

    @property
    def namespace_node(self) -> Namespace:
        return Namespace.parse(self.namespace)


def _trim_path_prefix(value: str) -> str:
    """A trailing ``/`` on a filter path is ignored."""
    return value.rstrip("/") if value != "" else value


def path_has_prefix(path: str | None, prefix: str) -> bool:
    """``/a/b`` is a prefix of ``/a/b`` and ``/a/b/c.rs`` but not of ``/a/bc``."""
    if path is None:
        return False
    prefix = _trim_path_prefix(prefix)
    return path == prefix or path.startswith(prefix + "/")


class Filter(Closed):
    """All set fields must match; ``{}`` matches everything (contract §4)."""

    reach: Reach | None = None
    workspace: str | None = None
    folder: str | None = None
    file_path: str | None = None
    language: str | None = None
    repo: str | None = None
    commit: str | None = None
    url: str | None = None
    thread_id: str | None = None
    turns: TurnRange | None = None
    agent_id: str | None = None
    tool_call: str | None = None
    source_id: str | None = None
    kinds: list[ItemKind] = Field(default_factory=list)
    sources: list[SourceKind] = Field(default_factory=list)
    tags_any: list[str] = Field(default_factory=list)
    observed_after: Instant | None = None
    observed_before: Instant | None = None

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> Filter:
        """Refuse a bad reach or turns range; return the filter with the reach normalised."""
        check_storable(self.model_dump(exclude_none=True), "filter")
        if self.turns is not None:
            self.turns.checked("filter.turns")
        if len(self.tags_any) > limits.max_tags:
            raise InvalidRequest(f"filter.tags_any holds more than {limits.max_tags} tags")
        reach = self.reach.checked() if self.reach is not None else None
        return self.model_copy(update={"reach": reach})

    def is_empty(self) -> bool:
        """True when the filter constrains nothing (only unset fields and empty lists)."""
        return not self.model_dump(exclude_none=True, exclude_defaults=True)

    def admits_everything(self) -> bool:
        """True when no item can fail it: a reach at the root with descendants (or none), every kind
        or source listed, and nothing else set."""
        reach = self.reach is None or (self.reach.node.is_root and self.reach.descendants)
        rest = self.model_dump(exclude_none=True, exclude_defaults=True, exclude={"reach", "kinds", "sources"})
        kinds = not self.kinds or set(ITEM_KINDS) <= set(self.kinds)
        sources = not self.sources or set(SOURCE_KINDS) <= set(self.sources)
        return reach and not rest and kinds and sources

    def exact_fields(self) -> dict[str, str]:
        """The set fields compared by equality with the same-named meta field."""
        return {name: getattr(self, name) for name in _EXACT_META_FIELDS if getattr(self, name) is not None}

    def matches(self, kind: str, meta: Meta) -> bool:
        """Whether an item of ``kind`` with canonical ``meta`` passes this filter."""
        if self.reach is not None and not self.reach.admits(meta.namespace_node):
            return False
        for name, value in self.exact_fields().items():
            if getattr(meta, name) != value:
                return False
        source = meta.source or Source(kind="agent")
        if self.source_id is not None and source.id != self.source_id:
            return False
        if self.folder is not None and not path_has_prefix(meta.folder, self.folder):
            return False
        if self.file_path is not None and not path_has_prefix(meta.file_path, self.file_path):
            return False
        if self.turns is not None and meta.turns != self.turns:
            return False
        if self.tool_call is not None and (meta.tool_call is None or meta.tool_call.name != self.tool_call):
            return False
        if self.kinds and kind not in self.kinds:
            return False
        if self.sources and source.kind not in self.sources:
            return False
        if self.tags_any and not set(self.tags_any) & set(meta.tags or ()):
            return False
        if self.observed_after is not None and (meta.observed_at is None or meta.observed_at < self.observed_after):
            return False
        return self.observed_before is None or (
            meta.observed_at is not None and meta.observed_at < self.observed_before
        )
