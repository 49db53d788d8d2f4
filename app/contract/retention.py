"""Retention: a time to live per namespace, and legal holds (docs/lifecycle.md#retention).

A policy at a namespace gives every item in its subtree a ``ttl`` (an ISO-8601 duration), unless
a deeper policy gives its own subtree another. A legal hold at a namespace suspends every expiry
beneath it, whatever the policies say. An item expires ``ttl`` after it was observed
(``meta.observed_at``), or after it was stored when it carries no observation time: the age of a
memory is the age of what it records, so an old conversation imported today is as old as it was
at its source, and an export and import (or an undo) does not restart its clock. From the moment
it expires, no read returns it; a sweeper then erases it.

Durations are added in UTC, calendar units first: ``P1M`` from 31 January is the last day of
February, as PostgreSQL adds an interval to a timestamp.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from app.contract.closed import Closed
from app.contract.errors import InvalidRequest, quoted
from app.contract.meta import Instant
from app.contract.namespaces import Namespace
from app.contract.requests import Answer

# PnYnMnWnDTnHnMnS, each part optional but at least one present; only seconds take a fraction
# (at most microseconds). A part has at most 9 digits; MAX_TTL_DAYS bounds the whole.
_DURATION = re.compile(
    r"P(?:(?P<years>[0-9]{1,9})Y)?(?:(?P<months>[0-9]{1,9})M)?(?:(?P<weeks>[0-9]{1,9})W)?(?:(?P<days>[0-9]{1,9})D)?"
    r"(?:T(?:(?P<hours>[0-9]{1,9})H)?(?:(?P<minutes>[0-9]{1,9})M)?(?:(?P<seconds>[0-9]{1,9})(?:[.,](?P<fraction>[0-9]{1,6}))?S)?)?"
)
MAX_TTL_DAYS = 1000 * 366
"""A ttl longer than about a thousand years is refused: it is a mistake, and it would run past
the dates either engine can hold."""

TTL_EXAMPLES = "'P30D', 'PT12H' or 'P1Y6M'"


@dataclass(frozen=True)
class Ttl:
    """A time to live: calendar ``months`` (years are twelve), then ``days`` and ``microseconds``
    (weeks are seven days; hours, minutes and seconds are microseconds). ``text`` is how it was
    given, in capitals."""

    text: str
    months: int
    days: int
    microseconds: int

    @classmethod
    def parse(cls, given: str) -> Ttl:
        """An ISO-8601 duration such as ``P30D``; anything else is ``invalid_request``."""
        text = given.strip().upper()
        match = _DURATION.fullmatch(text)
        if match is None or text in ("P", "PT") or text.endswith("T"):
            raise InvalidRequest(f"ttl {quoted(given)} is not an iso-8601 duration such as {TTL_EXAMPLES}")
        part = {name: int(value or 0) for name, value in match.groupdict().items() if name != "fraction"}
        fraction = int((match["fraction"] or "").ljust(6, "0"))
        ttl = cls(
            text=text.replace(",", "."),
            months=12 * part["years"] + part["months"],
            days=7 * part["weeks"] + part["days"],
            microseconds=((part["hours"] * 60 + part["minutes"]) * 60 + part["seconds"]) * 1_000_000 + fraction,
        )
        if ttl.months == ttl.days == ttl.microseconds == 0:
            raise InvalidRequest(f"ttl {quoted(given)} is zero: an item must live for some time")
        if ttl.months * 61 // 2 + ttl.days + ttl.microseconds // 86_400_000_000 > MAX_TTL_DAYS:
            raise InvalidRequest(f"ttl {quoted(given)} is longer than a thousand years")
        return ttl

    @property
    def time(self) -> timedelta:
        """The part after the calendar months."""
        return timedelta(days=self.days, microseconds=self.microseconds)

    def after(self, start: datetime) -> datetime | None:
        """When something of ``start`` expires; None past the dates Python holds (year 9999), which
        no item outlives."""
        start = start.astimezone(UTC)
        year, month = divmod(start.month - 1 + self.months, 12)
        year += start.year
        if year > 9999:
            return None
        day = min(start.day, calendar.monthrange(year, month + 1)[1])
        try:
            return start.replace(year=year, month=month + 1, day=day) + self.time
        except OverflowError:
            return None


def _namespace(text: str) -> str:
    """A namespace as answers print it (``root`` for the root); a bad one is ``invalid_request``."""
    return str(Namespace.parse(text))


class RetentionRequest(Closed):
    """Set the time to live of the items at ``namespace`` and below (a deeper policy keeps its own)."""

    namespace: str
    ttl: str
    dry_run: bool = False
    """Change nothing: answer how many items the policy would expire at once (``would_expire``)."""

    def checked(self) -> RetentionRequest:
        return self.model_copy(update={"namespace": _namespace(self.namespace), "ttl": Ttl.parse(self.ttl).text})


class RetentionTarget(Closed):
    """The namespace whose ttl is cleared, or whose legal hold is placed or released."""

    namespace: str
    dry_run: bool = False
    """Change nothing: answer how many items the change would expire at once (``would_expire``)."""

    def checked(self) -> RetentionTarget:
        return self.model_copy(update={"namespace": _namespace(self.namespace)})


class RetentionPolicy(Answer):
    """What is set at one namespace: a time to live, a legal hold, or both."""

    namespace: str
    ttl: str | None = None
    hold: bool = False
    updated_at: Instant


class RetentionList(Answer):
    policies: list[RetentionPolicy]


class RetentionReport(Answer):
    """A change and what it did: ``expired`` items it made expire at once (no read returns them,
    the sweeper erases them); a dry run changes nothing and says ``would_expire`` instead.
    ``policy`` is what the namespace holds afterwards (absent when nothing is left there)."""

    policy: RetentionPolicy | None = None
    expired: int
    would_expire: int | None = None


@dataclass(frozen=True)
class Governing:
    """What rules one namespace's items: the deepest ``ttl`` at or above it, and whether a hold is."""

    ttl: Ttl | None
    held: bool

    def expiry(self, observed: datetime) -> datetime | None:
        """When an item observed (or stored) at ``observed`` expires; None: never."""
        if self.held or self.ttl is None:
            return None
        return self.ttl.after(observed)


def governing(namespace: Namespace, policies: Iterable[RetentionPolicy]) -> Governing:
    """The policy and hold that apply to items at ``namespace``, from every policy held."""
    above = {str(n) for n in [*namespace.ancestors(), namespace]}
    applying = [p for p in policies if p.namespace in above]
    timed = [p for p in applying if p.ttl is not None]
    deepest = max(timed, key=lambda p: Namespace.parse(p.namespace).depth, default=None)
    return Governing(
        ttl=Ttl.parse(deepest.ttl) if deepest is not None and deepest.ttl is not None else None,
        held=any(p.hold for p in applying),
    )
