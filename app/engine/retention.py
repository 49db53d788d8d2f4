"""Where retention policies live, beside the items (``engine.retention``), and the reference engine's.

Every change answers how many items it made expire at once (docs/lifecycle.md#retention); with
``dry_run`` it changes nothing and says how many it would. Clearing a ttl or releasing a hold that
is not there is ``not_found``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from app.contract.errors import NotFound, quoted
from app.contract.namespaces import Namespace
from app.contract.retention import RetentionPolicy, RetentionReport, RetentionRequest, RetentionTarget


class RetentionStore(Protocol):
    async def list(self) -> list[RetentionPolicy]:
        """Every namespace with a ttl or a hold, the root first, then in path order."""
        ...

    async def set(self, request: RetentionRequest) -> RetentionReport:
        """The ttl of the items at ``namespace`` and below (a deeper policy keeps its own)."""
        ...

    async def clear(self, request: RetentionTarget) -> RetentionReport: ...

    async def hold(self, request: RetentionTarget) -> RetentionReport:
        """A legal hold: no item at ``namespace`` or below expires while it stands."""
        ...

    async def release(self, request: RetentionTarget) -> RetentionReport: ...


def no_ttl(namespace: str) -> NotFound:
    return NotFound(f"no ttl is set at namespace {quoted(namespace)}")


def no_hold(namespace: str) -> NotFound:
    return NotFound(f"no legal hold stands at namespace {quoted(namespace)}")


def report(policy: RetentionPolicy | None, expiring: int, dry_run: bool) -> RetentionReport:
    if dry_run:
        return RetentionReport(policy=policy, expired=0, would_expire=expiring)
    return RetentionReport(policy=policy, expired=expiring)


# How many live items a change of the policies (before, after) expires at once.
CountExpiring = Callable[[list[RetentionPolicy], list[RetentionPolicy]], int]


class MemoryRetention:
    """Policies in a dict: the reference engine's, which applies them as it reads."""

    def __init__(self, expiring: CountExpiring) -> None:
        self._expiring = expiring
        self._held: dict[str, RetentionPolicy] = {}

    @property
    def policies(self) -> list[RetentionPolicy]:
        return list(self._held.values())

    async def list(self) -> list[RetentionPolicy]:
        return sorted(self._held.values(), key=lambda p: Namespace.parse(p.namespace).path)

    async def set(self, request: RetentionRequest) -> RetentionReport:
        request = request.checked()
        before = self._held.get(request.namespace)
        return self._change(request.namespace, ttl=request.ttl, hold=bool(before and before.hold), dry=request.dry_run)

    async def clear(self, request: RetentionTarget) -> RetentionReport:
        request = request.checked()
        before = self._held.get(request.namespace)
        if before is None or before.ttl is None:
            raise no_ttl(request.namespace)
        return self._change(request.namespace, ttl=None, hold=before.hold, dry=request.dry_run)

    async def hold(self, request: RetentionTarget) -> RetentionReport:
        request = request.checked()
        before = self._held.get(request.namespace)
        return self._change(request.namespace, ttl=before.ttl if before else None, hold=True, dry=request.dry_run)

    async def release(self, request: RetentionTarget) -> RetentionReport:
        request = request.checked()
        before = self._held.get(request.namespace)
        if before is None or not before.hold:
            raise no_hold(request.namespace)
        return self._change(request.namespace, ttl=before.ttl, hold=False, dry=request.dry_run)

    def _change(self, namespace: str, *, ttl: str | None, hold: bool, dry: bool) -> RetentionReport:
        after = dict(self._held)
        policy = None
        if ttl is None and not hold:
            after.pop(namespace, None)
        else:
            policy = RetentionPolicy(namespace=namespace, ttl=ttl, hold=hold, updated_at=datetime.now(UTC))
            after[namespace] = policy
        expiring = self._expiring(list(self._held.values()), list(after.values()))
        if not dry:
            self._held = after
        return report(policy, expiring, dry)
