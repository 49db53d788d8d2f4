"""Retention's pure rules: ttls as ISO-8601 durations, expiry in UTC, which policy governs a namespace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.contract.errors import InvalidRequest
from app.contract.namespaces import Namespace
from app.contract.retention import RetentionPolicy, RetentionRequest, RetentionTarget, Ttl, governing

NOW = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "months", "days", "microseconds"),
    [
        ("P30D", 0, 30, 0),
        ("PT12H", 0, 0, 12 * 3600 * 10**6),
        ("P1Y6M", 18, 0, 0),
        ("P2W", 0, 14, 0),
        ("P1DT1M", 0, 1, 60 * 10**6),
        ("PT1.5S", 0, 0, 1_500_000),
        ("PT0,25S", 0, 0, 250_000),
        (" p1d ", 0, 1, 0),
        ("P1Y2M3W4DT5H6M7S", 14, 25, (5 * 3600 + 6 * 60 + 7) * 10**6),
    ],
)
def test_a_ttl_is_an_iso_8601_duration(text: str, months: int, days: int, microseconds: int) -> None:
    ttl = Ttl.parse(text)
    assert (ttl.months, ttl.days, ttl.microseconds) == (months, days, microseconds)


@pytest.mark.parametrize(
    "text",
    ["", "P", "PT", "P1DT", "30 days", "30", "P1.5D", "-P1D", "P1D2Y", "PT1H2H", "P١D", "P1S", "1D", "P1DT1.1234567S"],
)
def test_anything_else_is_refused_in_words(text: str) -> None:
    with pytest.raises(InvalidRequest, match="is not an iso-8601 duration such as 'P30D'"):
        Ttl.parse(text)


def test_a_ttl_of_nothing_or_of_ages_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="is zero"):
        Ttl.parse("P0DT0S")
    with pytest.raises(InvalidRequest, match="longer than a thousand years"):
        Ttl.parse("P1001Y")
    assert Ttl.parse("P999Y").months == 999 * 12


def test_expiry_adds_calendar_months_first_in_utc() -> None:
    assert Ttl.parse("P1M").after(NOW) == datetime(2026, 2, 28, 12, 0, tzinfo=UTC)
    assert Ttl.parse("P1MT1H").after(NOW) == datetime(2026, 2, 28, 13, 0, tzinfo=UTC)
    assert Ttl.parse("P1D").after(NOW.astimezone(UTC)) == NOW + timedelta(days=1)
    assert Ttl.parse("P999Y").after(datetime(9001, 1, 1, tzinfo=UTC)) is None  # past year 9999: never


def test_requests_print_their_namespace_and_ttl_canonically() -> None:
    assert RetentionRequest(namespace=" team:acme ", ttl="p30d").checked().model_dump() == {
        "namespace": "team:acme",
        "ttl": "P30D",
        "dry_run": False,
    }
    assert RetentionTarget(namespace="").checked().namespace == "root"
    with pytest.raises(InvalidRequest, match="namespace segment"):
        RetentionRequest(namespace="nope", ttl="P1D").checked()


def policy(namespace: str, ttl: str | None = None, hold: bool = False) -> RetentionPolicy:
    return RetentionPolicy(namespace=namespace, ttl=ttl, hold=hold, updated_at=NOW)


def test_the_deepest_ttl_governs_and_any_hold_above_suspends() -> None:
    policies = [policy("root", "P1Y"), policy("team:acme", "P30D"), policy("team:acme/agent:w", "P7D")]
    assert governing(Namespace.parse("user:bob"), policies).ttl == Ttl.parse("P1Y")
    assert governing(Namespace.parse("team:acme/agent:x"), policies).ttl == Ttl.parse("P30D")
    assert governing(Namespace.parse("team:acme/agent:w/user:u"), policies).ttl == Ttl.parse("P7D")
    held = [*policies, policy("team:acme", "P30D", hold=True)]
    rule = governing(Namespace.parse("team:acme/agent:w"), held)
    assert rule.held and rule.expiry(NOW) is None
    assert governing(Namespace.parse("team:acmex"), held).ttl == Ttl.parse("P1Y"), "a sibling is not below"
    assert governing(Namespace.parse("team:a"), []).expiry(NOW) is None
