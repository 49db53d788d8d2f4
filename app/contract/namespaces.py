"""Namespaces (a path in the memory tree) and reaches (which nodes a read sees), contract §3."""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.contract.closed import Closed
from app.contract.errors import InvalidRequest, quoted
from app.contract.text import trim

SEGMENT_KINDS = ("agent", "team", "user", "ws", "project", "source")
MAX_DEPTH = 8
_SEGMENT_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


@dataclass(frozen=True, order=True)
class Namespace:
    """A node of the memory tree; the root has no segments and prints as ``root``."""

    segments: tuple[tuple[str, str], ...] = ()

    ROOT_NAME = "root"

    @classmethod
    def parse(cls, text: str | None) -> Namespace:
        """Read a path such as ``team:acme/agent:writer``; ``""``, ``root`` and None are the root."""
        if text is None:
            return cls()
        path = trim(text)
        if path in ("", cls.ROOT_NAME):
            return cls()
        parts = path.split("/")
        if len(parts) > MAX_DEPTH:
            raise InvalidRequest(f"namespace has more than {MAX_DEPTH} segments")
        segments = []
        for part in parts:
            kind, sep, ident = part.partition(":")
            if not sep or kind not in SEGMENT_KINDS:
                raise InvalidRequest(
                    f"namespace segment {quoted(part)} must be kind:id with kind one of {', '.join(SEGMENT_KINDS)}"
                )
            if not _SEGMENT_ID.fullmatch(ident):
                # Lowercase words, not "A-Z": messages are lowercase apart from quoted values.
                raise InvalidRequest(
                    f"namespace segment id {quoted(ident)} must be 1-128 ascii letters, digits, '_' or '-'"
                )
            segments.append((kind, ident))
        return cls(tuple(segments))

    @property
    def is_root(self) -> bool:
        return not self.segments

    @property
    def depth(self) -> int:
        return len(self.segments)

    @property
    def path(self) -> str:
        """The path without the root's name: ``""`` for the root (how storage keeps it)."""
        return "/".join(f"{k}:{i}" for k, i in self.segments)

    def ancestors(self) -> list[Namespace]:
        """Every proper ancestor, the root first."""
        return [Namespace(self.segments[:n]) for n in range(len(self.segments))]

    def is_below(self, other: Namespace) -> bool:
        """True when ``other`` is a proper ancestor of this node."""
        return len(self.segments) > len(other.segments) and self.segments[: len(other.segments)] == other.segments

    def __str__(self) -> str:
        return self.path or self.ROOT_NAME


def normalise_namespace(text: str | None) -> str | None:
    """The stored form of a meta namespace: trimmed path, None for the root."""
    ns = Namespace.parse(text)
    return None if ns.is_root else ns.path


class Reach(Closed):
    """Which namespaces a read sees: ``at`` itself, its ancestors (inherit), its subtree (descendants)."""

    at: str = Namespace.ROOT_NAME
    inherit: bool = True
    descendants: bool = False

    @property
    def node(self) -> Namespace:
        return Namespace.parse(self.at)

    def checked(self) -> Reach:
        """Refuse a bad ``at``; return the reach with ``at`` in printed form."""
        return self.model_copy(update={"at": str(self.node)})

    def covers(self, other: Reach) -> bool:
        """Whether every namespace ``other`` admits, this reach admits too."""
        node = other.node
        if not self.admits(node):
            return False
        if other.inherit and not all(self.admits(ancestor) for ancestor in node.ancestors()):
            return False
        return not other.descendants or (self.descendants and (node == self.node or node.is_below(self.node)))

    def admits(self, namespace: Namespace) -> bool:
        at = self.node
        if namespace == at:
            return True
        if self.inherit and at.is_below(namespace):
            return True
        return self.descendants and namespace.is_below(at)
