"""What a caller may do: a key's role and the part of the namespace tree it reaches.

A key reaches the namespaces its reach admits (contract §3: ``at``, its subtree with
``descendants``, its ancestors with ``inherit``) and writes only at ``at`` or below it, never in
an ancestor it merely reads. Every read is narrowed to that reach (:class:`ScopedFilter`): what it
cannot see it never counts, cites or forgets, and a request that names a namespace outside it is
``forbidden``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.contract.errors import Forbidden, quoted
from app.contract.meta import Filter, Meta
from app.contract.namespaces import Namespace, Reach

KeyRole = Literal["read", "write", "admin"]
ROLES: tuple[KeyRole, ...] = ("read", "write", "admin")
_RANK = {role: rank for rank, role in enumerate(ROLES)}


class ScopedFilter(Filter):
    """A filter whose items must also lie within ``within``, the caller's reach.

    A field of its own, not a second value of ``reach``: the request's reach and the key's are
    both kept and both must admit an item, so neither widens the other. It is never read from a
    request (requests validate as ``Filter``); engines honour it wherever they read a filter.
    """

    within: Reach
    key_id: str | None = None
    """Whom it was narrowed for: part of what a cursor is bound to, so another key cannot resume it."""

    def matches(self, kind: str, meta: Meta) -> bool:
        return self.within.admits(meta.namespace_node) and super().matches(kind, meta)

    def is_empty(self) -> bool:
        return False


@dataclass(frozen=True)
class Access:
    """An authenticated caller: its key (None for a bootstrap key), its role, its reach (None: all)."""

    role: KeyRole
    reach: Reach | None = None
    key_id: str | None = None

    @classmethod
    def everything(cls, key_id: str | None = None) -> Access:
        """What a bootstrap key (ENGRAM_API_KEYS) or an open service grants."""
        return cls(role="admin", key_id=key_id)

    @property
    def is_scoped(self) -> bool:
        return self.reach is not None

    def allows(self, role: KeyRole) -> bool:
        return _RANK[self.role] >= _RANK[role]

    def require(self, role: KeyRole, action: str) -> None:
        if not self.allows(role):
            raise Forbidden(f"a {self.role} key may not {action}")

    def sees(self, namespace: Namespace) -> bool:
        return self.reach is None or self.reach.admits(namespace)

    def check_writable(self, namespace: Namespace) -> None:
        """A write lands at the key's ``at`` or below it (only with ``descendants``), else ``forbidden``."""
        if self.writable is None or self.writable.admits(namespace):
            return
        raise Forbidden(f"namespace {quoted(str(namespace))} is outside this key's reach")

    def check_named(self, reach: Reach | None) -> None:
        """A request's reach must start inside the key's: naming another namespace is ``forbidden``."""
        if reach is not None and not self.sees(reach.node):
            raise Forbidden(f"namespace {quoted(str(reach.node))} is outside this key's reach")

    @property
    def writable(self) -> Reach | None:
        """The namespaces this key may write and forget in: its reach without the ancestors it reads."""
        if self.reach is None:
            return None
        return self.reach.model_copy(update={"inherit": False})

    def manages(self, reach: Reach, role: KeyRole) -> bool:
        """Whether this key may make (or list, or revoke) a key of ``reach`` and ``role``: an admin
        grants no more than it holds, so the key reads within its reach and writes within its writes."""
        if not self.allows("admin"):
            return False
        if self.reach is None:
            return True
        writes = reach.model_copy(update={"inherit": False})
        return self.reach.covers(reach) and (role == "read" or self.writable is None or self.writable.covers(writes))

    def governs(self, namespace: Namespace) -> bool:
        """Whether this key may set retention at ``namespace``: an admin that writes everywhere a
        policy or hold there rules (the namespace and its whole subtree)."""
        if not self.allows("admin"):
            return False
        subtree = Reach(at=str(namespace), inherit=False, descendants=True)
        return self.writable is None or self.writable.covers(subtree)

    def narrowed(self, request_filter: Filter, within: Reach | None = None) -> Filter:
        """The filter as this caller may read it: the key's reach (or ``within``, narrower) beside the request's."""
        if self.reach is None:
            return request_filter
        self.check_named(request_filter.reach)
        # Built from fields already validated: nothing to check twice.
        return ScopedFilter.model_construct(**dict(request_filter), within=within or self.reach, key_id=self.key_id)
