"""Relative times in a remembered sentence, resolved against when it was said.

"I went yesterday", stored on 8 May 2023, means 7 May 2023; read back a year later, "yesterday"
alone would be wrong. Pure: a sentence and an instant in, the phrases and their calendar
meaning out, so the rules are tested with fixed instants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_WEEKDAY_NUMBER = {name.lower(): number for number, name in enumerate(WEEKDAYS)}
_COUNTS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "a couple of": 2,
    "couple of": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_COUNT = r"(?P<count>\d{1,2}|a couple of|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_DAY = r"(?P<day>monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
# The seasons as the northern hemisphere's calendar has them: the month each starts (winter runs into the
# next year: December to February).
_SEASON_START = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_SEASON = r"(?P<season>spring|summer|fall|autumn|winter)"

# Longest first where two could match at one place ("last weekend" before "last week").
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(rf"\b{pattern}\b", re.IGNORECASE))
    for kind, pattern in (
        # "A few days ago" names no one day: it is kept as said, placed before the day it was said.
        ("few", rf"(?:a\s+)?few\s+{_UNIT}\s+(?:ago|back)"),
        ("ago", rf"{_COUNT}\s+{_UNIT}\s+(?:ago|back)"),
        ("in", rf"in\s+{_COUNT}\s+{_UNIT}(?!\s+(?:ago|back))"),
        ("weekday", rf"(?P<which>last|this|next|this past|this coming|on)\s+{_DAY}"),
        ("weekend", r"(?P<which>last|this|next|this past|this coming)\s+weekend"),
        ("period", r"(?P<which>last|this|next|this past|this coming)\s+(?P<unit>week|month|year)"),
        ("season", rf"(?P<which>last|this|next|this past|this coming)\s+{_SEASON}"),
        (
            "day",
            r"(?P<word>the day before yesterday|the day after tomorrow|yesterday|today|tonight|tomorrow|last night|"
            r"this morning|this afternoon|this evening)",
        ),
    )
)

# Capitalised names only: "may" the verb is no month.
_ABSOLUTE = re.compile(r"\b(?:(?:19|20)\d\d|" + "|".join(MONTHS) + "|" + "|".join(WEEKDAYS) + r")\b")
# "On Tuesday" is the coming one in a sentence about the future, else the one just past.
_FUTURE = re.compile(r"\b(?:will|won't|going to|gonna|plan(?:s|ning)? to|\w+'ll|tomorrow|next)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Resolved:
    """A phrase of a sentence (as written there) and the calendar time it names, written out."""

    phrase: str
    meaning: str
    start: int


def day_text(day: date) -> str:
    """``May 7, 2023``: the month a word, so no locale misreads it, and named first, as most dated answers
    people wrote for the long-conversation dev split are (docs/answers.md#the-time-rule)."""
    return f"{MONTHS[day.month - 1]} {day.day}, {day.year}"


def week_text(day: date) -> str:
    """The week (Monday to Sunday) holding ``day``, named by its Monday."""
    return f"the week of {day_text(day - timedelta(days=day.weekday()))}"


def month_text(year: int, month: int) -> str:
    return f"{MONTHS[month - 1]} {year}"


def _shift_months(day: date, months: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 + months
    return index // 12, index % 12 + 1


def _weekend_text(saturday: date) -> str:
    return f"the weekend of {day_text(saturday)}"


def _meaning(kind: str, match: re.Match[str], today: date) -> str | None:
    """The calendar meaning of one matched phrase said on ``today``; None when it names no one time."""
    groups = {k: (v or "").lower() for k, v in match.groupdict().items()}
    if kind == "day":
        offsets = {"the day before yesterday": -2, "yesterday": -1, "last night": -1, "tomorrow": 1}
        offset = offsets.get(groups["word"], 2 if groups["word"] == "the day after tomorrow" else 0)
        return day_text(today + timedelta(days=offset))
    if kind == "few":
        return f"a few {groups['unit']}s before {day_text(today)}"
    if kind in ("ago", "in"):
        count = _COUNTS.get(groups["count"]) or int(groups["count"])
        return _offset_text(groups["unit"], -count if kind == "ago" else count, today)
    which = groups["which"]
    step = -1 if which in ("last", "this past") else 1 if which in ("next", "this coming") else 0
    if kind == "season":
        return _season_text(groups["season"], step, today)
    if kind == "weekday":
        wanted = _WEEKDAY_NUMBER[groups["day"]]
        if which == "on":
            step = 1 if _FUTURE.search(match.string) else -1
        if step < 0:
            # The most recent such day before the day it was said.
            return day_text(today - timedelta(days=(today.weekday() - wanted) % 7 or 7))
        ahead = (wanted - today.weekday()) % 7
        return day_text(today + timedelta(days=ahead or (7 if step > 0 else 0)))
    if step < 0 and (kind == "weekend" or groups.get("unit") == "week"):
        # "Last week" said on a day is the week before it: named so, as people date it.
        return f"the {'weekend' if kind == 'weekend' else 'week'} before {day_text(today)}"
    if kind == "weekend":
        # Saturday of the week said in (Monday first): this weekend is the coming one, or the one under way.
        saturday = today - timedelta(days=today.weekday()) + timedelta(days=5)
        return _weekend_text(saturday + timedelta(weeks=step))
    return _offset_text(groups["unit"], step, today)


def _season_text(season: str, step: int, today: date) -> str:
    """``summer 2022``, ``winter 2022–23``. This season is the one under way, or else the one of this year
    (for winter, the one ending this year until it starts again in December); last season the latest that
    has ended, next season the first yet to start."""
    start = _SEASON_START[season]
    index = today.year * 12 + today.month - 1  # months since year 0

    def begins(year: int) -> int:
        return year * 12 + start - 1

    if step < 0:
        year = max(y for y in range(today.year - 2, today.year + 1) if begins(y) + 3 <= index)
    elif step > 0:
        year = min(y for y in range(today.year - 1, today.year + 2) if begins(y) > index)
    else:
        year = today.year - 1 if season == "winter" and today.month <= 2 else today.year
    if season == "winter":
        return f"winter {year}\u2013{str(year + 1)[-2:]}"
    return f"{season} {year}"


def _offset_text(unit: str, count: int, today: date) -> str:
    if unit == "day":
        return day_text(today + timedelta(days=count))
    if unit == "week":
        return week_text(today + timedelta(weeks=count))
    if unit == "month":
        return month_text(*_shift_months(today, count))
    return str(today.year + count)


def resolve(sentence: str, said: datetime | None) -> list[Resolved]:
    """Every relative time in ``sentence`` with its meaning on the day ``said`` (in its own zone, UTC
    as stored), in the order they appear; nothing when the sentence has no date to be read against."""
    if said is None:
        return []
    today = said.date()
    found: list[Resolved] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(sentence):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            meaning = _meaning(kind, match, today)
            if meaning is None:
                continue
            taken.append(match.span())
            found.append(Resolved(phrase=match.group(0), meaning=meaning, start=match.start()))
    return sorted(found, key=lambda r: r.start)


def carries_time(sentence: str) -> bool:
    """A sentence that says when: a relative time this module reads, a year, a month or a weekday."""
    return bool(_ABSOLUTE.search(sentence)) or any(pattern.search(sentence) for _, pattern in _PATTERNS)
