"""Timestamps (contract intro, §1, §8): any RFC 3339 form in, UTC with a ``Z`` out, microseconds at most."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from app.contract.meta import Meta, format_instant
from app.contract.requests import Hit
from app.contract.wire import wire_dict


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime(2024, 5, 1, 10, 0, 0, tzinfo=UTC), "2024-05-01T10:00:00Z"),
        (datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=UTC), "2024-05-01T10:00:00.5Z"),
        (datetime(2024, 5, 1, 10, 0, 0, 123450, tzinfo=UTC), "2024-05-01T10:00:00.12345Z"),
        (datetime(2024, 5, 1, 10, 0, 0, 1, tzinfo=UTC), "2024-05-01T10:00:00.000001Z"),
        (datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone(timedelta(hours=2))), "2024-05-01T10:00:00Z"),
        (datetime(2024, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1))), "2023-12-31T23:30:00Z"),
        (datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC), "0999-01-02T03:04:05Z"),  # four-digit year
        (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00Z"),
        (datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), "9999-12-31T23:59:59.999999Z"),
    ],
)
def test_format_instant(value: datetime, text: str) -> None:
    assert format_instant(value) == text


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("2024-05-01T10:00:00Z", "2024-05-01T10:00:00Z"),
        ("2024-05-01T10:00:00z", "2024-05-01T10:00:00Z"),
        ("2024-05-01T12:00:00+02:00", "2024-05-01T10:00:00Z"),
        ("2024-05-01T10:00:00.000+00:00", "2024-05-01T10:00:00Z"),
        ("2024-05-01T10:00:00.100Z", "2024-05-01T10:00:00.1Z"),
        ("2024-05-01T10:00:00.123456Z", "2024-05-01T10:00:00.123456Z"),
        ("2024-05-01T10:00:00.1234567Z", "2024-05-01T10:00:00.123456Z"),  # extra digits truncated
        ("2024-05-01T10:00:00.9999999Z", "2024-05-01T10:00:00.999999Z"),  # truncated, not rounded
        ("2024-05-01T10:00:00.123456789-01:30", "2024-05-01T11:30:00.123456Z"),
        ("0999-06-01T00:00:00Z", "0999-06-01T00:00:00Z"),
        ("0100-01-01T00:30:00+01:00", "0099-12-31T23:30:00Z"),
    ],
)
def test_meta_reads_any_rfc3339_and_writes_utc_with_z(given: str, written: str) -> None:
    meta = Meta.model_validate_json(f'{{"observed_at": "{given}"}}')
    assert wire_dict(meta) == {"observed_at": written}
    hit = Hit(id="x", kind="document", text="t", meta=meta.checked(), score=0.0)
    assert wire_dict(hit)["meta"]["observed_at"] == written


@pytest.mark.parametrize(
    "given",
    [
        '"2024-05-01T10:00:00"',
        '"2024-05-01"',
        '"yesterday"',
        '"2024-13-01T00:00:00Z"',
        # What pydantic would read but RFC 3339 does not write (the contract takes RFC 3339 only):
        "1700000000",  # a number, read as Unix seconds
        "1700000000.5",
        '"1700000000"',
        '"2024-05-01T10:00Z"',  # no seconds
        '"2024-05-01T10:00:00+0100"',  # offset without its colon
        '"2024-05-01T10:00:00,5Z"',  # decimal comma
        '"2024-05-01T10:00:00.Z"',  # a point without digits
        '"２０２４-05-01T10:00:00Z"',  # digits that are not ASCII
    ],
)
def test_a_timestamp_without_an_offset_or_not_a_timestamp_is_refused(given: str) -> None:
    with pytest.raises(ValidationError):
        Meta.model_validate_json(f'{{"observed_at": {given}}}')
    with pytest.raises(ValidationError):
        Meta.model_validate({"observed_at": json.loads(given)})


@pytest.mark.parametrize("given", ["2024-05-01 10:00:00Z", "2024-05-01t10:00:00z", "2024-05-01T10:00:00-00:00"])
def test_the_forms_rfc3339_allows_are_read(given: str) -> None:
    assert wire_dict(Meta.model_validate({"observed_at": given})) == {"observed_at": "2024-05-01T10:00:00Z"}


def test_the_held_instant_is_utc() -> None:
    meta = Meta.model_validate({"observed_at": "2024-05-01T12:00:00+02:00"})
    assert meta.observed_at == datetime(2024, 5, 1, 10, tzinfo=UTC)
    assert meta.observed_at is not None and meta.observed_at.utcoffset() == timedelta(0)


@pytest.mark.parametrize("given", ["0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00"])
def test_a_timestamp_with_no_utc_instant_in_range_is_refused_by_the_schema(given: str) -> None:
    # a ValidationError (422), never an unhandled OverflowError (500)
    with pytest.raises(ValidationError):
        Meta.model_validate_json(f'{{"observed_at": "{given}"}}')
