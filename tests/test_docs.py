"""The settings table in docs/self-hosting.md#configuration against app/settings.py: every setting
in one row, with its default, and no row for a variable nothing reads."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import AliasChoices

from app.settings import Settings

REPO = Path(__file__).resolve().parents[1]
SELF_HOSTING = REPO / "docs" / "self-hosting.md"
NAMED = re.compile(r"`((?:ENGRAM|OTEL)_[A-Z0-9_]+)`")


@dataclass(frozen=True)
class Row:
    variables: list[str]
    default: str
    meaning: str


def names(field: str) -> list[str]:
    """Every variable a setting is read from: ENGRAM_<NAME>, or OpenTelemetry's names for it."""
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    return [str(alias)] if alias else [f"ENGRAM_{field.upper()}"]


FIELD_OF = {name: field for field in Settings.model_fields for name in names(field)}


def configuration_rows(text: str) -> list[Row]:
    """The rows of the table under ``## Configuration`` (its header and rule left out)."""
    section = text.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        variables, default, meaning = (cell.strip() for cell in line.strip().strip("|").split(" | ", 2))
        rows.append(Row(NAMED.findall(variables), default, meaning))
    return rows


def documented_defaults(row: Row) -> dict[str, str]:
    """Each setting of the row and the default written for it: one per setting when the row
    names several with as many defaults, else the one default for them all."""
    fields = list(dict.fromkeys(FIELD_OF[name] for name in row.variables if name in FIELD_OF))
    given = row.default.split(", ")
    if len(fields) > 1 and len(given) == len(fields):
        return dict(zip(fields, given, strict=True))
    return {field: row.default for field in fields}


def agrees(default: Any, written: str) -> bool:
    """Whether the table's ``written`` default says the setting's ``default``."""
    plain = written.strip("`")
    if default is None:
        return written.startswith(("unset", "—")) or "`" not in written
    if isinstance(default, bool):
        return plain == str(default).lower()
    if isinstance(default, int | float):
        try:
            return float(plain) == float(default)
        except ValueError:
            return False
    if default == "":
        return written.startswith(("empty", "unset"))
    return plain == str(default)


@pytest.fixture(scope="module")
def rows() -> list[Row]:
    return configuration_rows(SELF_HOSTING.read_text())


def rows_per_setting(rows: list[Row]) -> dict[str, int]:
    counted = {field: 0 for field in Settings.model_fields}
    for row in rows:
        for field in {FIELD_OF[name] for name in row.variables if name in FIELD_OF}:
            counted[field] += 1
    return counted


def test_every_setting_has_one_row(rows: list[Row]) -> None:
    counted = rows_per_setting(rows)
    assert {field: n for field, n in counted.items() if n != 1} == {}, "settings in no row, or in several"


def test_every_row_is_of_a_setting_and_says_what_it_does(rows: list[Row]) -> None:
    assert rows, "the configuration table was not found"
    unknown = [name for row in rows for name in row.variables if name not in FIELD_OF]
    assert unknown == [], "variables documented that no setting reads"
    assert [row.variables for row in rows if len(row.meaning) < 10] == []


def test_every_default_is_the_settings(rows: list[Row]) -> None:
    wrong = []
    for row in rows:
        for field, written in documented_defaults(row).items():
            info = Settings.model_fields[field]
            if info.default_factory is not None:
                continue  # the data directory: the platform's, written as Linux's
            if not agrees(info.default, written):
                wrong.append(f"{names(field)[-1]}: written {written!r}, the setting's is {info.default!r}")
    assert wrong == []


@pytest.mark.parametrize(
    ("default", "written", "expected"),
    [
        (250, "`250`", True),
        (600.0, "`600`", True),
        (250, "`200`", False),
        (False, "`false`", True),
        (False, "`true`", False),
        ("english", "`english`", True),
        ("english", "`simple`", False),
        (None, "unset (no replica)", True),
        (None, "`250`", False),
        ("", "empty (none)", True),
    ],
)
def test_a_wrong_default_is_told_apart(default: Any, written: str, expected: bool) -> None:
    assert agrees(default, written) is expected


def test_a_setting_left_out_or_written_twice_is_found() -> None:
    text = SELF_HOSTING.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `ENGRAM_MAX_HEADERS` |"))
    left_out = configuration_rows(text.replace(row, row.replace("ENGRAM_MAX_HEADERS", "ENGRAM_MAX_HEADERS_GONE")))
    assert rows_per_setting(left_out)["max_headers"] == 0
    assert "ENGRAM_MAX_HEADERS_GONE" in [name for row in left_out for name in row.variables]
    twice = configuration_rows(text.replace(row, f"{row}\n{row}"))
    assert rows_per_setting(twice)["max_headers"] == 2
    grouped = Row(["ENGRAM_POOL_SIZE", "ENGRAM_POOL_OVERFLOW"], "10, 10", "pools")
    assert documented_defaults(grouped) == {"pool_size": "10", "pool_overflow": "10"}
