"""The words of phrases: the zone table, offsets, ambiguous abbreviations, typo suggestions."""

from __future__ import annotations

import pytest

from agentcron.schedule import WhenParseError
from agentcron.schedule.phrases import (
    AMBIGUOUS_ZONES,
    VOCABULARY,
    ZONE_ABBREVIATIONS,
    ZONE_NAMES,
    offset_zone,
    suggest,
    zone_of,
)
from agentcron.schedule.zones import get_zone


@pytest.mark.parametrize(
    ("words", "zone"),
    [
        ("pst", "America/Los_Angeles"),
        ("pdt", "America/Los_Angeles"),
        ("est", "America/New_York"),
        ("cet", "Europe/Berlin"),
        ("jst", "Asia/Tokyo"),
        ("aest", "Australia/Sydney"),
        ("utc", "UTC"),
        ("gmt", "UTC"),
        ("tokyo", "Asia/Tokyo"),  # a city, found by the last part of its IANA name
        ("new york", "America/New_York"),
        ("sao paulo", "America/Sao_Paulo"),
        ("nyc", "America/New_York"),
        ("eastern", "America/New_York"),
        ("pacific", "America/Los_Angeles"),
        ("india", "Asia/Kolkata"),
        ("europe/berlin", "Europe/Berlin"),  # an IANA name in any case
        ("utc+2", "Etc/GMT-2"),
        ("gmt-5", "Etc/GMT+5"),
        ("utc+0", "UTC"),
        ("utc+14", "Etc/GMT-14"),
        ("monday", None),
        ("morning", None),
        ("9am", None),
        ("mars/base", None),
    ],
)
def test_zone_words(words: str, zone: str | None) -> None:
    assert zone_of(words) == zone


def test_every_table_entry_is_a_real_zone() -> None:
    for zone in (*ZONE_ABBREVIATIONS.values(), *ZONE_NAMES.values()):
        get_zone(zone)
    assert not set(AMBIGUOUS_ZONES) & set(ZONE_ABBREVIATIONS)


@pytest.mark.parametrize("abbreviation", sorted(AMBIGUOUS_ZONES))
def test_ambiguous_abbreviations_are_refused_with_the_zones_they_may_mean(
    abbreviation: str,
) -> None:
    with pytest.raises(WhenParseError, match=r"is ambiguous as a time zone: name the zone, e\.g\."):
        zone_of(abbreviation)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("utc+5:30", "no fixed zone for 'UTC+5:30'"),
        ("utc+15", "no fixed zone for 'UTC+15'"),
        ("gmt-13", "no fixed zone for 'GMT-13'"),
    ],
)
def test_offsets_without_a_fixed_zone_are_refused(text: str, message: str) -> None:
    with pytest.raises(WhenParseError) as info:
        offset_zone(text)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("text", "fixed"),
    [
        ("evry day at 9", "every day at 9"),
        ("tommorow at 9", "tomorrow at 9"),
        ("every mondya", "every monday"),
        ("wekly on friday", "weekly on friday"),
        ("every day at 9", None),  # nothing to fix
        ("blursday", None),  # not close enough to one word
        ("at 9 xyz", None),  # short unknown words are left alone
    ],
)
def test_suggestions_replace_only_words_close_to_one_known_word(
    text: str, fixed: str | None
) -> None:
    assert suggest(text) == fixed


def test_the_vocabulary_holds_the_grammar_words() -> None:
    assert {"tomorrow", "every", "weekday", "fortnightly", "december"} <= VOCABULARY
