"""Relative times resolved against fixed instants: each expression, and the sentences that carry a time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.engine.times import carries_time, day_text, resolve, week_text

# A Monday, and a Sunday (the end of its week), both in UTC.
MONDAY = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
SUNDAY = datetime(2023, 5, 14, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("sentence", "said", "phrase", "meaning"),
    [
        ("I went to the woodworking class yesterday", MONDAY, "yesterday", "May 7, 2023"),
        ("We baked bread today.", MONDAY, "today", "May 8, 2023"),
        ("Tonight I am reading", MONDAY, "Tonight", "May 8, 2023"),
        ("The lease is signed tomorrow", MONDAY, "tomorrow", "May 9, 2023"),
        ("Last night the band played", MONDAY, "Last night", "May 7, 2023"),
        ("I started a course last week", MONDAY, "last week", "the week before May 8, 2023"),
        ("this week is busy", SUNDAY, "this week", "the week of May 8, 2023"),
        ("next week we fly", MONDAY, "next week", "the week of May 15, 2023"),
        ("I ran a race last Tuesday", MONDAY, "last Tuesday", "May 2, 2023"),
        ("I ran a race last Monday", MONDAY, "last Monday", "May 1, 2023"),
        ("We sail next Friday", MONDAY, "next Friday", "May 12, 2023"),
        ("We paddled across on Sunday.", MONDAY, "on Sunday", "May 7, 2023"),
        ("We will paddle across on Sunday.", MONDAY, "on Sunday", "May 14, 2023"),
        ("I quit smoking two years ago", MONDAY, "two years ago", "2021"),
        ("I adopted her 3 days ago", MONDAY, "3 days ago", "May 5, 2023"),
        ("a couple of weeks ago we met", MONDAY, "a couple of weeks ago", "the week of April 24, 2023"),
        ("a month ago it snowed", datetime(2023, 1, 20, tzinfo=UTC), "a month ago", "December 2022"),
        ("The move is next month", MONDAY, "next month", "June 2023"),
        ("it rained all last month", datetime(2024, 1, 3, tzinfo=UTC), "last month", "December 2023"),
        ("I got married last year", MONDAY, "last year", "2022"),
        ("this year has been kind", MONDAY, "this year", "2023"),
        ("We are camping this weekend", MONDAY, "this weekend", "the weekend of May 13, 2023"),
        ("We are camping this weekend", SUNDAY, "this weekend", "the weekend of May 13, 2023"),
        ("We camped last weekend", MONDAY, "last weekend", "the weekend before May 8, 2023"),
        ("The exam is in two months", MONDAY, "in two months", "July 2023"),
        ("We met a few days ago", MONDAY, "a few days ago", "a few days before May 8, 2023"),
        ("few weeks ago it rained", MONDAY, "few weeks ago", "a few weeks before May 8, 2023"),
        ("We camped this past weekend", MONDAY, "this past weekend", "the weekend before May 8, 2023"),
        ("I bought it the day before yesterday", MONDAY, "the day before yesterday", "May 6, 2023"),
        ("We fly the day after tomorrow", MONDAY, "the day after tomorrow", "May 10, 2023"),
        ("I quit smoking two years back", MONDAY, "two years back", "2021"),
        ("We met a few weeks back", MONDAY, "a few weeks back", "a few weeks before May 8, 2023"),
        # Seasons as the northern calendar has them; winter runs from December into the next year.
        ("We sailed last summer", MONDAY, "last summer", "summer 2022"),
        ("We sail this summer", MONDAY, "this summer", "summer 2023"),
        ("The roof leaked last winter", MONDAY, "last winter", "winter 2022\u201323"),
        ("We ski next winter", MONDAY, "next winter", "winter 2023\u201324"),
        ("It snowed a lot this winter", datetime(2023, 1, 20, tzinfo=UTC), "this winter", "winter 2022\u201323"),
        ("We sailed last summer", datetime(2023, 9, 12, tzinfo=UTC), "last summer", "summer 2023"),
        ("We sail next summer", datetime(2023, 7, 1, tzinfo=UTC), "next summer", "summer 2024"),
        ("The leaves turn next fall", MONDAY, "next fall", "fall 2023"),
    ],
)
def test_each_expression_resolves_against_the_day_it_was_said(
    sentence: str, said: datetime, phrase: str, meaning: str
) -> None:
    (found,) = resolve(sentence, said)
    assert (found.phrase, found.meaning) == (phrase, meaning)


def test_several_times_come_back_in_sentence_order_and_a_longer_phrase_wins() -> None:
    found = resolve("Last weekend was calm, but yesterday a storm came", MONDAY)
    assert [(f.phrase, f.meaning) for f in found] == [
        ("Last weekend", "the weekend before May 8, 2023"),
        ("yesterday", "May 7, 2023"),
    ]


def test_nothing_is_resolved_without_an_observed_instant_or_a_relative_time() -> None:
    assert resolve("I went yesterday", None) == []
    assert resolve("I moved to Lisbon in March 2024", MONDAY) == []
    assert resolve("a weekly habit and a yearly one", MONDAY) == []


def test_an_instant_with_an_offset_is_read_in_utc_as_stored() -> None:
    assert resolve("yesterday", datetime(2023, 5, 8, 0, 30, tzinfo=UTC))[0].meaning == "May 7, 2023"


def test_calendar_texts() -> None:
    assert day_text(MONDAY.date()) == "May 8, 2023"
    assert week_text(SUNDAY.date()) == "the week of May 8, 2023"


def test_a_sentence_carries_a_time_when_it_names_one() -> None:
    assert carries_time("I moved to Lisbon in March 2024")
    assert carries_time("we met on Friday")
    assert carries_time("it was two years ago")
    assert carries_time("back in 1999")
    assert not carries_time("you may like the lake")  # "may" the verb is no month
    assert not carries_time("I moved to Lisbon")
