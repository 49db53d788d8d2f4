"""Errors (contract §7, §8): one class per code, a stable catalogue, sanitised messages."""

from __future__ import annotations

import signal

import pytest

from app.contract.errors import (
    CATALOGUE,
    ConfigError,
    Conflict,
    EngineFailure,
    EngramError,
    Forbidden,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
    Unavailable,
    Unsupported,
    catalogue,
    sanitise,
)

# code, class, usual HTTP status, retryable, message prefix
TABLE = [
    ("invalid_request", InvalidRequest, 400, False, "invalid request"),
    ("unauthorized", Unauthorized, 401, False, "unauthorized"),
    ("forbidden", Forbidden, 403, False, "forbidden"),
    ("not_found", NotFound, 404, False, "not found"),
    ("method_not_allowed", MethodNotAllowed, 405, False, "method not allowed"),
    ("conflict", Conflict, 409, False, "conflict"),
    ("payload_too_large", PayloadTooLarge, 413, False, "payload too large"),
    ("unavailable", Unavailable, 503, True, "unavailable"),
    ("unsupported", Unsupported, 501, False, "unsupported"),
    ("engine", EngineFailure, 500, False, "engine error"),
    ("config", ConfigError, 500, False, "configuration error"),
]


@pytest.mark.parametrize(("code", "cls", "status", "retryable", "prefix"), TABLE)
def test_one_class_per_code(code: str, cls: type[EngramError], status: int, retryable: bool, prefix: str) -> None:
    error = cls("something went wrong")
    assert isinstance(error, EngramError)
    assert (error.code, error.http_status, error.retryable) == (code, status, retryable)
    assert error.message == f"{prefix}: something went wrong"
    assert str(error) == error.message


def test_the_catalogue_lists_exactly_the_eleven_codes() -> None:
    entries = catalogue()
    assert [e.code for e in entries] == [row[0] for row in TABLE]
    assert len({e.code for e in entries}) == 11
    assert [(e.code, e.http_status, e.retryable) for e in entries] == [(r[0], r[2], r[3]) for r in TABLE]
    assert len({cls for cls in CATALOGUE}) == 11


@pytest.mark.parametrize("entry", catalogue(), ids=lambda e: e.code)
def test_each_catalogue_entry_has_one_sentence(entry: object) -> None:
    description = entry.description  # type: ignore[attr-defined]
    assert description.endswith(".")
    assert description.count(". ") == 0
    assert description[0].isupper()


def test_only_unavailable_is_retryable() -> None:
    assert [e.code for e in catalogue() if e.retryable] == ["unavailable"]


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://user:secret@host/db",
        "postgresql+asyncpg://user:secret@db.internal:5432/engram?sslmode=require",
        "postgres://user:secret@host",
        "postgresql://user:secret@/db?host=/tmp/socket",
    ],
)
def test_sanitise_strips_a_connection_string(dsn: str) -> None:
    for text in (sanitise(f"could not connect to {dsn} after 3 tries"), EngineFailure(f"cannot reach {dsn}").message):
        assert "secret" not in text
        assert "user:" not in text
        assert "://" not in text


@pytest.mark.parametrize(
    "detail",
    ["auth failed password=hunter2", "auth failed PASSWORD: hunter2", "with pwd=hunter2 and more", "token = hunter2"],
)
def test_sanitise_strips_a_password_pair(detail: str) -> None:
    assert "hunter2" not in sanitise(detail)
    assert "hunter2" not in ConfigError(detail).message


def test_sanitise_drops_trailing_punctuation_and_newlines() -> None:
    assert sanitise("Connection Refused.\n  Retry later!") == "connection refused. retry later"
    assert sanitise("Keep Case.", keep_case=True) == "Keep Case"
    assert InvalidRequest("query must not be blank.").message == "invalid request: query must not be blank"


def test_a_value_quoted_from_the_request_keeps_its_case() -> None:
    assert InvalidRequest("unknown facet 'Colour'").message == "invalid request: unknown facet 'Colour'"


def test_errors_compare_by_class_and_detail() -> None:
    assert InvalidRequest("x") == InvalidRequest("x")
    assert InvalidRequest("x") != InvalidRequest("y")
    assert InvalidRequest("x") != NotFound("x")


def test_sanitising_a_long_text_takes_one_pass() -> None:
    """The connection-string pattern was tried from every letter of a run, each try scanning the
    rest of it: a 90,000-character namespace held the event loop 39 s, 2,000,000 would take days."""

    def too_long(signum: int, frame: object) -> None:
        raise TimeoutError("sanitise did not finish in 20 s")

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(20)
    try:
        assert sanitise("a" * 2_000_000) == "a" * 2_000_000
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert sanitise("reached postgresql://engram:pw@db/engram, then gave up") == "reached <redacted> then gave up"
