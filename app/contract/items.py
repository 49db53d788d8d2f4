"""The three item kinds, their rendered text and their fingerprint (contract §1)."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, RootModel, TypeAdapter

from app.contract.canonical import canonical_json
from app.contract.closed import Closed
from app.contract.errors import InvalidRequest
from app.contract.limits import DEFAULT_LIMITS, Limits
from app.contract.meta import Instant, Meta, ToolCall
from app.contract.nulls import plain_union_nulls, tagged_union_nulls
from app.contract.text import check_storable, is_blank

Role = Literal["user", "assistant", "system", "tool"]
LearningKind = Literal["preference", "fact", "procedure", "correction", "other"]


class TextBody(Closed):
    text: str


class UriBody(Closed):
    """Accepted by the schema so it can be refused by the contract with a clear message."""

    uri: str


DocumentBody = Annotated[TextBody | UriBody, plain_union_nulls(TextBody, UriBody)]


class Turn(Closed):
    role: Role
    text: str
    at: Instant | None = None
    tool_calls: list[ToolCall] | None = None

    def render(self) -> str:
        line = f"{self.role}: {self.text}"
        if self.tool_calls:
            calls = ", ".join(f"{c.name} ({c.id})" if c.id is not None else c.name for c in self.tool_calls)
            line += f" [tools: {calls}]"
        return line


class _ItemBase(Closed):
    meta: Meta = Field(default_factory=Meta)

    def render_text(self) -> str:
        raise NotImplementedError

    def _check_common(self, limits: Limits) -> None:
        check_storable(self.model_dump(exclude_none=True, exclude={"meta"}), self.type)  # type: ignore[attr-defined]
        if len(self.render_text()) > limits.max_text_chars:
            raise InvalidRequest(f"{self.type} text is longer than {limits.max_text_chars} characters")  # type: ignore[attr-defined]

    def fingerprint(self) -> str:
        """The item's id: 40 hex characters of SHA-256 over its canonical JSON."""
        return fingerprint_of(self.as_json())

    def canonical(self) -> dict[str, Any]:
        """The item as the service understands it, minus ``observed_at``, unset fields and the root namespace."""
        return canonical_form(self.as_json())

    def as_json(self) -> dict[str, Any]:
        """The item as JSON values, unset fields left out: what is stored, and what its id is taken over."""
        return self.model_dump(mode="json", exclude_none=True)


class Document(_ItemBase):
    type: Literal["document"] = "document"
    title: str | None = None
    body: DocumentBody
    mime: str | None = None

    def render_text(self) -> str:
        body = self.body.text if isinstance(self.body, TextBody) else ""
        if not is_blank(self.title):
            return f"# {self.title}\n\n{body}"
        return body

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> Document:
        if isinstance(self.body, UriBody):
            raise InvalidRequest("a document body must be text: uri bodies are not resolved by this service")
        if is_blank(self.body.text):
            raise InvalidRequest("document body text must not be blank")
        if self.mime is not None and len(self.mime) > limits.max_field_chars:
            raise InvalidRequest(f"mime is longer than {limits.max_field_chars} characters")
        self._check_common(limits)
        return self.model_copy(update={"meta": self.meta.checked(limits)})


class Conversation(_ItemBase):
    type: Literal["conversation"] = "conversation"
    turns: list[Turn]

    def render_text(self) -> str:
        return "\n".join(turn.render() for turn in self.turns)

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> Conversation:
        if not self.turns:
            raise InvalidRequest("a conversation needs at least one turn")
        if len(self.turns) > limits.max_turns:
            raise InvalidRequest(f"a conversation holds at most {limits.max_turns} turns")
        for index, turn in enumerate(self.turns):
            if is_blank(turn.text):
                raise InvalidRequest(f"turns[{index}].text must not be blank")
        self._check_common(limits)
        turns = [t.model_copy(update={"tool_calls": t.tool_calls or None}) for t in self.turns]
        return self.model_copy(update={"turns": turns, "meta": self.meta.checked(limits)})


class Learning(_ItemBase):
    type: Literal["learning"] = "learning"
    text: str
    kind: LearningKind
    confidence: float
    evidence: str | None = None

    def render_text(self) -> str:
        return self.text

    def checked(self, limits: Limits = DEFAULT_LIMITS) -> Learning:
        if is_blank(self.text):
            raise InvalidRequest("learning text must not be blank")
        if not 0.0 <= self.confidence <= 1.0:  # NaN fails both comparisons
            raise InvalidRequest("confidence must be a number in 0..1")
        if self.evidence is not None and len(self.evidence) > limits.max_text_chars:
            raise InvalidRequest(f"evidence is longer than {limits.max_text_chars} characters")
        self._check_common(limits)
        return self.model_copy(update={"meta": self.meta.checked(limits)})


Item = Annotated[Document | Conversation | Learning, Field(discriminator="type"), tagged_union_nulls("type")]
ITEM_ADAPTER: TypeAdapter[Document | Conversation | Learning] = TypeAdapter(Item)

StoredItem = Document | Conversation | Learning


class StoreItem(RootModel[Item]):
    """One item of any kind, told apart by ``type`` (the body of ``POST /v1/store``)."""

    model_config = ConfigDict(strict=True)


def canonical_form(data: dict[str, Any]) -> dict[str, Any]:
    """An item's ``as_json`` made canonical (``canonical``), in place: no copy of a fresh dump is needed."""
    meta = data.get("meta", {})
    meta.pop("observed_at", None)
    meta.setdefault("source", {"kind": "agent"})
    if not meta.get("tags"):
        meta.pop("tags", None)
    if meta.get("namespace") in ("", "root"):
        meta.pop("namespace")
    data["meta"] = meta
    for turn in data.get("turns", ()):
        if not turn.get("tool_calls"):
            turn.pop("tool_calls", None)
    return data


def fingerprint_of(data: dict[str, Any]) -> str:
    """The id of the item whose ``as_json`` is ``data``, which it changes (``canonical_form``)."""
    return hashlib.sha256(canonical_json(canonical_form(data))).hexdigest()[:40]


def render_text(item: StoredItem) -> str:
    return item.render_text()


def fingerprint(item: StoredItem) -> str:
    return item.fingerprint()
