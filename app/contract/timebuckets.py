"""The time facets of explore (contract §6, beyond the seed contract): ``observed_at`` counted by
the UTC year, month, day or hour it falls in, each bucket named by the instant it starts at."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Literal

from app.contract.errors import InvalidRequest, quoted
from app.contract.meta import format_instant

Unit = Literal["year", "month", "day", "hour"]
# Facet name -> the unit it counts by (PostgreSQL's date_trunc names them the same).
TIME_FACETS: dict[str, Unit] = {
    "observed_year": "year",
    "observed_month": "month",
    "observed_day": "day",
    "observed_hour": "hour",
}


def bucket_start(unit: Unit, instant: datetime) -> datetime:
    """The start of the UTC ``unit`` that ``instant`` falls in."""
    t = instant.astimezone(UTC)
    if unit == "year":
        return datetime(t.year, 1, 1, tzinfo=UTC)
    if unit == "month":
        return datetime(t.year, t.month, 1, tzinfo=UTC)
    if unit == "day":
        return datetime(t.year, t.month, t.day, tzinfo=UTC)
    return datetime(t.year, t.month, t.day, t.hour, tzinfo=UTC)


def bucket_end(unit: Unit, start: datetime) -> datetime | None:
    """Where the bucket starting at ``start`` ends; None past the last instant a timestamp holds
    (the year 9999), where no item can lie."""
    try:
        if unit == "year":
            return start.replace(year=start.year + 1)
        if unit == "month":
            return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
        return start + (timedelta(days=1) if unit == "day" else timedelta(hours=1))
    except (ValueError, OverflowError):
        return None


def bucket_value(unit: Unit, instant: datetime) -> str:
    """The bucket ``instant`` counts in, as its value: ``2024-05-01T00:00:00Z`` for its month."""
    return format_instant(bucket_start(unit, instant))


def parse_bucket(facet: str, value: str) -> tuple[datetime, datetime | None]:
    """A time facet's bucket value back to the interval it counts: [start, end)."""
    unit = TIME_FACETS[facet]
    try:
        start = datetime.fromisoformat(value)
    except ValueError:
        start = None
    if start is None or start.tzinfo is None or bucket_start(unit, start) != start:
        raise InvalidRequest(f"{quoted(value)} is not the start of a {unit} in utc, as {facet} names its buckets")
    return start.astimezone(UTC), bucket_end(unit, start)
