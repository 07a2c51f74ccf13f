"""The words of schedule phrases: zones as people write them, number words, typo suggestions.

Pure tables and lookups used by `when.parse_when`; docs/schedules.md lists the same tables.
"""

from __future__ import annotations

import difflib
import re
from functools import lru_cache
from zoneinfo import available_timezones

from agentcron.schedule.errors import WhenParseError

# Abbreviations with one reading, mapped to the IANA zone whose clock people mean: "9am PST"
# in July is 9:00 on the Los Angeles clock (PDT then), as a person writing it means.
ZONE_ABBREVIATIONS: dict[str, str] = {
    "utc": "UTC",
    "gmt": "UTC",
    "pst": "America/Los_Angeles",
    "pdt": "America/Los_Angeles",
    "pt": "America/Los_Angeles",
    "mdt": "America/Denver",
    "mt": "America/Denver",
    "cdt": "America/Chicago",
    "ct": "America/Chicago",
    "est": "America/New_York",
    "edt": "America/New_York",
    "et": "America/New_York",
    "akst": "America/Anchorage",
    "akdt": "America/Anchorage",
    "hst": "Pacific/Honolulu",
    "wet": "Europe/Lisbon",
    "west": "Europe/Lisbon",
    "cet": "Europe/Berlin",
    "cest": "Europe/Berlin",
    "eet": "Europe/Athens",
    "eest": "Europe/Athens",
    "msk": "Europe/Moscow",
    "jst": "Asia/Tokyo",
    "kst": "Asia/Seoul",
    "hkt": "Asia/Hong_Kong",
    "sgt": "Asia/Singapore",
    "awst": "Australia/Perth",
    "acst": "Australia/Adelaide",
    "acdt": "Australia/Adelaide",
    "aest": "Australia/Sydney",
    "aedt": "Australia/Sydney",
    "nzst": "Pacific/Auckland",
    "nzdt": "Pacific/Auckland",
}

# Abbreviations several zones use: refused, with the zones they may mean.
AMBIGUOUS_ZONES: dict[str, str] = {
    "ist": "Asia/Kolkata, Asia/Jerusalem or Europe/Dublin",
    "cst": "America/Chicago, Asia/Shanghai or America/Havana",
    "bst": "Europe/London or Asia/Dhaka",
    "mst": "America/Denver or America/Phoenix (no daylight saving time)",
    "ast": "America/Halifax or Asia/Riyadh",
    "central": "America/Chicago or Europe/Berlin",
}

# Region and city names not spelled as in an IANA name (those are found by their last part:
# "tokyo" -> Asia/Tokyo, "new york" -> America/New_York).
ZONE_NAMES: dict[str, str] = {
    "pacific": "America/Los_Angeles",
    "mountain": "America/Denver",
    "eastern": "America/New_York",
    "central european": "Europe/Berlin",
    "nyc": "America/New_York",
    "la": "America/Los_Angeles",
    "san francisco": "America/Los_Angeles",
    "sf": "America/Los_Angeles",
    "seattle": "America/Los_Angeles",
    "boston": "America/New_York",
    "miami": "America/New_York",
    "dallas": "America/Chicago",
    "houston": "America/Chicago",
    "munich": "Europe/Berlin",
    "frankfurt": "Europe/Berlin",
    "hamburg": "Europe/Berlin",
    "milan": "Europe/Rome",
    "barcelona": "Europe/Madrid",
    "geneva": "Europe/Zurich",
    "edinburgh": "Europe/London",
    "beijing": "Asia/Shanghai",
    "china": "Asia/Shanghai",
    "japan": "Asia/Tokyo",
    "india": "Asia/Kolkata",
    "mumbai": "Asia/Kolkata",
    "delhi": "Asia/Kolkata",
    "new delhi": "Asia/Kolkata",
    "bangalore": "Asia/Kolkata",
    "uk": "Europe/London",
    "germany": "Europe/Berlin",
    "france": "Europe/Paris",
}

_LEGACY = ("Etc/", "SystemV/", "US/", "Canada/", "Brazil/", "Mexico/", "Chile/")
# Last parts of IANA names that are words first (or old aliases): never read as a place.
_NOT_PLACES = frozenset({
    "christmas", "easter", "wake", "south", "north", "west", "act", "nsw", "lhi", "yap", "truk",
    "troll", "oral", "knox", "davis", "casey", "midway", "stanley",
})  # fmt: skip
_OFFSET = re.compile(r"^(?:utc|gmt)\s?([+-])\s?(\d{1,2})(?::?(\d{2}))?$")


@lru_cache(maxsize=1)
def _iana_by_lower() -> dict[str, str]:
    return {name.lower(): name for name in available_timezones()}


@lru_cache(maxsize=1)
def _iana_cities() -> dict[str, str]:
    """'tokyo' -> 'Asia/Tokyo', 'new york' -> 'America/New_York': the last part of each
    canonical-looking IANA name, when only one zone has it."""
    seen: dict[str, list[str]] = {}
    for name in available_timezones():
        if "/" not in name or name.startswith(_LEGACY):
            continue
        city = name.rsplit("/", 1)[1].lower().replace("_", " ")
        seen.setdefault(city, []).append(name)
    return {
        city: names[0]
        for city, names in seen.items()
        if len(names) == 1 and city not in _NOT_PLACES
    }


def offset_zone(text: str) -> str | None:
    """'utc+2' / 'gmt-5' -> the fixed-offset IANA zone ('Etc/GMT-2', 'Etc/GMT+5');
    None when `text` is no offset; WhenParseError for an offset no such zone has."""
    match = _OFFSET.match(text)
    if match is None:
        return None
    sign, hours, minutes = match[1], int(match[2]), int(match[3] or 0)
    if hours == 0 and minutes == 0:
        return "UTC"
    if minutes or hours > (14 if sign == "+" else 12):
        raise WhenParseError(
            f"no fixed zone for {text.upper()!r}: name the place's zone instead, "
            "e.g. 'Asia/Kolkata' for UTC+5:30"
        )
    # POSIX sign: Etc/GMT-2 is two hours *east* of UTC, i.e. UTC+2.
    return f"Etc/GMT{'-' if sign == '+' else '+'}{hours}"


def zone_of(words: str, *, cities: bool = True) -> str | None:
    """The IANA zone a person's zone words name ('pst', 'tokyo', 'europe/berlin', 'utc+2'),
    None when they name none; WhenParseError for an ambiguous abbreviation. `cities=False`
    leaves out the places found by the last part of an IANA name (some are also words:
    'christmas', 'easter', 'wake'), for words not marked as a place by 'in' or 'time'."""
    words = words.strip()
    if words in AMBIGUOUS_ZONES:
        raise WhenParseError(
            f"{words.upper() if len(words) <= 4 else words!r} is ambiguous as a time zone: "
            f"name the zone, e.g. {AMBIGUOUS_ZONES[words]}"
        )
    found = ZONE_ABBREVIATIONS.get(words) or ZONE_NAMES.get(words)
    if found is None and "/" in words:
        found = _iana_by_lower().get(words)
    if found is None and cities and words != "utc":
        found = _iana_cities().get(words)
    return found or offset_zone(words)


# Every word the grammar reads, for "did you mean" suggestions.
_WORDS = """
in at on of the and every each other day days daily week weeks weekly month months
monthly year years yearly annually hour hours hourly minute minutes second seconds half
quarter past to from now later between until till am pm noon midnight midday morning
afternoon evening night tonight today tomorrow after end eod weekday weekdays weekend
weekends monday tuesday wednesday thursday friday saturday sunday mondays tuesdays
wednesdays thursdays fridays saturdays sundays january february march april may june july
august september october november december first second third fourth fifth last next this
time twice fortnight fortnightly
"""
VOCABULARY = frozenset(_WORDS.split())


def suggest(text: str) -> str | None:
    """`text` with each unknown word replaced by the one vocabulary word it is close to;
    None when no word needs (or has) such a replacement."""
    words = text.split(" ")
    changed = False
    for i, word in enumerate(words):
        if word in VOCABULARY or not word.isalpha() or len(word) < 4:
            continue
        close = difflib.get_close_matches(word, VOCABULARY, n=2, cutoff=0.8)
        if len(close) == 1 or (len(close) == 2 and _ratio(word, close[0]) > _ratio(word, close[1])):
            words[i], changed = close[0], True
    return " ".join(words) if changed else None


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a, b).ratio()
