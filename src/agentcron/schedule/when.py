"""parse_when: the phrases people type ("in 30m", "every other tuesday at 10am", "9am PST",
"last friday of every month at 5pm", cron, ISO 8601) to specs.

Pure: `now` and the zone come in as arguments. A phrase is normalised (number words, spoken
clock times, "half an hour"), its zone taken off, then read part by part: each recognised part
fills a slot (times, a day part, a relative day, a date, a repeat, a step, a window) and is cut
out. Anything left over, or slots that do not fit together, refuse the phrase: agentcron never
guesses. docs/schedules.md is the reference for what is read and how.
"""

from __future__ import annotations

import itertools
import re
from calendar import monthrange
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from agentcron.schedule.cron import parse_cron
from agentcron.schedule.errors import InvalidCronError, PastInstantError, WhenParseError
from agentcron.schedule.phrases import (
    AMBIGUOUS_ZONES,
    VOCABULARY,
    ZONE_ABBREVIATIONS,
    suggest,
    zone_of,
)
from agentcron.schedule.spec import (
    MAX_AHEAD,
    MAX_DAY_STEP,
    MAX_INTERVAL_S,
    MAX_WEEK_STEP,
    AtSpec,
    CronSpec,
    DaysSpec,
    EverySpec,
)
from agentcron.schedule.zones import get_zone, require_aware, resolve_wall, to_wall, zone_label

ACCEPTED_FORMS = (
    "accepted forms: e.g. 'in 30m', 'tomorrow at 9am', 'every weekday at 9', "
    "'every other tuesday at 10am', '0 9 * * 1-5' (see docs/schedules.md)"
)

# Fixed hours of the day parts (docs/schedules.md).
DAY_PARTS: dict[str, time] = {
    "morning": time(9),
    "afternoon": time(15),
    "evening": time(18),
    "night": time(21),
    "end of day": time(17),
}
# The hours a time with a day part may have: "tonight at 9" is 21:00, "this evening at 4" is
# 16:00, "tonight at 1" is 01:00 the next day; a time outside its part is refused.
DAY_PART_HOURS: dict[str, frozenset[int]] = {
    "morning": frozenset(range(4, 12)),
    "afternoon": frozenset(range(12, 19)),
    "evening": frozenset(range(16, 24)),
    "night": frozenset((*range(18, 24), *range(0, 6))),
}

_UNITS: dict[str, int] = {}
for _names, _secs in (
    (("s", "sec", "secs", "second", "seconds"), 1),
    (("m", "min", "mins", "minute", "minutes"), 60),
    (("h", "hr", "hrs", "hour", "hours"), 3600),
    (("d", "day", "days"), 86400),
    (("w", "wk", "wks", "week", "weeks"), 604800),
):
    for _name in _names:
        _UNITS[_name] = _secs

_UNIT_RE = "|".join(sorted(_UNITS, key=len, reverse=True))
_PART = rf"(?:(\d+(?:\.\d+)?)\s*|\b(an?)\s+)({_UNIT_RE})(?![a-z])"
_DURATION_PART = re.compile(_PART)
_DURATION_TEXT = rf"(?:{_PART}(?:\s*(?:and\s+)?))+"
_DURATION = re.compile(rf"^{_DURATION_TEXT}$")

_DAYS = {
    "monday": 0, "mon": 0, "tuesday": 1, "tue": 1, "tues": 1, "wednesday": 2, "wed": 2,
    "thursday": 3, "thu": 3, "thur": 3, "thurs": 3, "friday": 4, "fri": 4, "saturday": 5,
    "sat": 5, "sunday": 6, "sun": 6,
}  # fmt: skip
_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4,
    "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
    "september": 9, "sept": 9, "sep": 9, "october": 10, "oct": 10, "november": 11, "nov": 11,
    "december": 12, "dec": 12,
}  # fmt: skip
_MONTH_NAMES = [
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
]  # fmt: skip
_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty": 40, "forty-five": 45, "fifty": 50,
}  # fmt: skip
_ORDINAL_WORDS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "last": -1}

_WD = "|".join(sorted(_DAYS, key=len, reverse=True))
_MON = "|".join(sorted(_MONTHS, key=len, reverse=True))
_PLURAL_DAY = (
    r"(?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekdays|weekends)"
)
_DAY_LIST = rf"(?:{_WD}|weekdays?|weekends?|weekend days?)(?:\s(?:and\s)?(?:{_WD})s?\b)*"
_NTH = r"(first|second|third|fourth|fifth|last|1st|2nd|3rd|4th|5th)"
# A clock time: 17:30, 9.30, 9am, 9:15pm, noon, midnight (a bare hour only where `at` says so).
_CLOCK = r"(?:noon|midday|midnight|\d{1,2}[:.]\d{2}(?::\d{2})?(?:am|pm)?|\d{1,2}(?:am|pm))"
_CLOCK_AT = rf"(?:{_CLOCK}|\d{{1,2}})"
_CRON_FIELD = re.compile(
    r"^(?:[0-9*/,\-#?LWH()]|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
    r"|mon|tue|wed|thu|fri|sat|sun)+$",
    re.IGNORECASE,
)
_FILLER = frozenset({"at", "on", "the", "and", "of", "in"})


@dataclass
class _Clock:
    hour: int
    minute: int
    second: int = 0
    explicit: bool = True  # am/pm, a 24-hour value (13-23, 0, a leading zero), noon/midnight
    next_day: bool = False  # "friday night at 1": on the next date

    def wall(self) -> time:
        return time(self.hour, self.minute, self.second)


@dataclass
class _Parts:
    times: list[_Clock] = field(default_factory=list)
    day_part: str | None = None
    rel_days: int | None = None  # today 0, tomorrow 1, day after tomorrow 2
    weekday: int | None = None  # a one-shot "monday" (Mon = 0)
    next_week: bool = False  # "next friday" said on a friday: a week on, never today
    date: tuple[int, int, int | None] | None = None  # month, day, year
    dom: int | None = None  # "the 3rd"; -1 = the last day
    nth: tuple[int, int] | None = None  # (1..5 or -1 = last, weekday) of a month
    delay: float | None = None  # seconds
    repeat: str | None = None  # "day", "week", "month", "year"
    days: tuple[int, ...] | None = None  # repeat weekdays (Mon = 0)
    interval: float | None = None  # "every 15 minutes": seconds
    step: tuple[int, str] | None = None  # (n, "day" | "week")
    window: tuple[_Clock, _Clock] | None = None
    minute_of_hour: int | None = None
    except_days: tuple[int, ...] = ()  # "every day except sunday"


def _fail(text: str, why: str = "") -> WhenParseError:
    if why:
        return WhenParseError(f"cannot read {text!r} as a time: {why}")
    return WhenParseError(f"cannot read {text!r} as a time; {ACCEPTED_FORMS}")


def _shown(instant: datetime, tz: str) -> str:
    local = instant.astimezone(get_zone(tz))
    return f"{local:%Y-%m-%d %H:%M{':%S' if local.second else ''}} {zone_label(tz)}"


def _future(instant: datetime, now: datetime, tz: str) -> datetime:
    if instant <= now:
        raise PastInstantError(
            f"{_shown(instant, tz)} is in the past: a one-shot time must be in the future"
        )
    if instant - now > MAX_AHEAD:
        raise WhenParseError(f"{_shown(instant, tz)} is more than 100 years ahead")
    return instant


def _duration_seconds(text: str) -> float | None:
    text = re.sub(r"\s*(?:,|&|\band\b)\s*", " ", text).strip()
    if not _DURATION.match(text):
        return None
    total = 0.0
    for number, _article, unit in _DURATION_PART.findall(text):
        total += (float(number) if number else 1.0) * _UNITS[unit]
    return total


def _clock(text: str) -> _Clock | None:
    text = text.strip()
    if text in ("noon", "midday"):
        return _Clock(12, 0)
    if text == "midnight":
        return _Clock(0, 0)
    match = re.match(r"^(\d{1,2})(?:[:.](\d{2}))?(?::(\d{2}))?\s?(am|pm)?$", text)
    if match is None:
        return None
    hour, minute, second = int(match[1]), int(match[2] or 0), int(match[3] or 0)
    if minute > 59 or second > 59:
        return None
    if match[4]:
        if not 1 <= hour <= 12:
            return None
        return _Clock(hour % 12 + (12 if match[4] == "pm" else 0), minute, second)
    if hour > 23:
        return None
    explicit = hour == 0 or hour > 12 or match[1].startswith("0")
    return _Clock(hour, minute, second, explicit)


def _ordinal(text: str) -> int:
    if text in _ORDINAL_WORDS:
        return _ORDINAL_WORDS[text]
    return int(re.sub(r"\D", "", text))


# --- normalising ------------------------------------------------------------------------------


def _spoken_clock(match: re.Match[str]) -> str:
    what, rel, hour_text, ampm = match[1], match[2], match[3], match[4] or ""
    minutes = {"half": 30, "quarter": 15}.get(what) or int(what)
    hour = int(hour_text)
    digits = what not in ("half", "quarter")
    if not 1 <= hour <= 12 or (digits and rel in ("after", "before")):
        return match[0]
    if rel in ("to", "before"):
        hour, minutes = hour - 1, 60 - minutes
        if hour == 0:  # "quarter to one": 00:45; "quarter to one pm": 12:45
            hour = 12 if ampm else 0
    return f"{hour}:{minutes:02d}{ampm}"


def _nth_step(match: re.Match[str]) -> str:
    """'every 2nd day' / 'every third week' -> 'every 2 days' / 'every 3 weeks'."""
    n = int(match[1]) if match[1] else _ORDINAL_WORDS[match[2]]
    return f"every {n} {match[3]}s"


def _normalise(text: str) -> str:
    t = text.lower().replace("a.m.", "am").replace("p.m.", "pm").replace("&", " and ")
    t = re.sub(r"[,;!?]|\.$|\.(?=\s)", " ", t)
    t = re.sub(r"\bo['\u2019]?\s?clock\b", "oclock", t)
    t = " ".join(t.split())
    # "remind me tomorrow at 9": the request around the time (what to say is the message's)
    t = re.sub(r"^(?:please )?(?:remind|ping|tell|notify|message) me\b ?", "", t)
    t = re.sub(r"\beveryday\b", "every day", t)
    t = re.sub(r"\b(tmrw|tmr|tmw)\b", "tomorrow", t)
    t = re.sub(r"\btonite\b", "tonight", t)
    # "weekday mornings", "monday evenings": the plural is on the day
    t = re.sub(r"\b(\w+day) (morning|afternoon|evening|night)s\b", r"\1s \2", t)
    t = re.sub(r"(?<!\w )\b(?:in the )?(morning|afternoon|evening|night)s\b", r"every \1", t)
    t = re.sub(r"\b(?:work|business) ?(days?)\b", r"week\1", t)
    t = re.sub(r"\b(?:mon|monday) ?(?:-|to|through|thru) ?(?:fri|friday)\b", "weekdays", t)
    t = re.sub(
        r"\b(" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")\b",
        lambda m: str(_NUMBER_WORDS[m[1]]),
        t,
    )
    t = re.sub(r"\b(\d{1,2}) ?oclock\b", r"\1:00", t)
    t = re.sub(r"\b(\d{1,2}(?:[:.]\d{2})?)\s(am|pm)\b", r"\1\2", t)
    t = re.sub(r"\b(?:an?|1) (hour|day|week)s? and a half\b", r"1.5 \1s", t)
    t = re.sub(r"\b(\d+) and a half (hour|day|week)s?\b", r"\1.5 \2s", t)
    t = re.sub(r"(?<!the )\b(?:(?:a|1) )?half (?:an |a )?hour\b", "30 minutes", t)
    t = re.sub(r"\b(?:a )?quarter (?:of an |an )?hour\b", "15 minutes", t)
    t = re.sub(r"\b(?:a )?fortnight\b", "2 weeks", t)
    t = re.sub(r"\bevery (?:(\d+)(?:st|nd|rd|th)|(second|third)) (day|week)\b", _nth_step, t)
    t = re.sub(r"\bfortnightly\b", "every 2 weeks", t)
    spoken = re.compile(
        r"(?<!from )(?<!between )(?<!and )\b(half|quarter|5|10|20|25)(?: minutes)? "
        r"(past|after|to|before) (\d{1,2})(am|pm)?\b(?! (?:hours|days))"
    )
    bare = next((m for m in spoken.finditer(t) if not m[4] and _spoken_clock(m) != m[0]), None)
    if bare is not None and not re.search(r"\b(morning|afternoon|evening|night|tonight)\b", t):
        # A spoken time is on the 12-hour clock: "quarter to five" is 04:45 or 16:45 alike.
        raise _fail(text, "a spoken time could be morning or evening: add am or pm")
    t = spoken.sub(_spoken_clock, t)
    t = re.sub(r"\bthe day after tomorrow\b|\bday after tomorrow\b", "overmorrow", t)
    t = re.sub(r"\b(end of (?:the )?(?:business )?day|eod|cob|close of business)\b", "endofday", t)
    return t


# --- reading the parts ------------------------------------------------------------------------


class _Reader:
    def __init__(self, text: str, original: str) -> None:
        self.text = f" {text} "
        self.original = original
        self.parts = _Parts()
        self.seen = False

    def take(self, pattern: str, handle: Callable[[re.Match[str]], object]) -> None:
        """Cut every match of `pattern` out of the text, after `handle(match)` records it."""

        def cut(match: re.Match[str]) -> str:
            handle(match)
            self.seen = True
            return " "

        self.text = re.sub(rf"(?<= )(?:{pattern})(?= )", cut, self.text)

    def fail(self, why: str = "") -> WhenParseError:
        return _fail(self.original, why)

    def rest(self) -> list[str]:
        return [word for word in self.text.split() if word not in _FILLER]


def _day_list(text: str) -> tuple[int, ...]:
    """'monday', 'mon wed and fri', 'weekdays', 'weekend days' -> weekdays (Mon = 0)."""
    days: set[int] = set()
    for word in re.sub(r"\bweekend days?\b", "weekend", text).split():
        if word == "and":
            continue
        if word in ("weekday", "weekdays"):
            days.update(range(5))
        elif word in ("weekend", "weekends"):
            days.update((5, 6))
        elif (key := word if word in _DAYS else word.removesuffix("s")) in _DAYS:
            days.add(_DAYS[key])
        else:
            raise WhenParseError(f"unknown day {word!r}")
    return tuple(sorted(days))


def _read(r: _Reader) -> None:
    """The grammar: one flat list of parts, most specific first."""
    p = r.parts

    def part(name: str) -> None:
        if p.day_part not in (None, name):
            raise r.fail("two parts of the day")
        p.day_part = name

    def refuse(why: str) -> Callable[[re.Match[str]], None]:
        def handle(_m: re.Match[str]) -> None:
            raise r.fail(why)

        return handle

    r.take(
        r"(?:twice|thrice|\d+ times) (?:a|per|every|each) (?:day|week|month|hour)|twice daily",
        refuse("how often, but not when: name the times, e.g. 'every day at 9am and 5pm'"),
    )
    r.take(
        r"bi-?weekly|bi-?monthly",
        refuse(
            "it means twice a period or every other one: say 'every 2 weeks on monday at 9' "
            "or 'every monday and thursday at 9'"
        ),
    )
    r.take(
        r"every other weekdays?",
        refuse("say 'every weekday', 'every other day' or 'every 2 weeks on weekdays'"),
    )
    r.take(
        rf"every (?:2nd|second|3rd|third) ({_WD})(?! of)",
        refuse("say 'every other tuesday' (every 2 weeks) or 'the second tuesday of every month'"),
    )

    # delays
    def delay(m: re.Match[str]) -> None:
        seconds = _duration_seconds(m[1])
        if seconds is None:
            raise r.fail()
        if p.delay is not None:
            raise r.fail("two delays")
        p.delay = seconds

    r.take(rf"in ({_DURATION_TEXT})(?:from now|later)?", delay)
    r.take(rf"({_DURATION_TEXT}) (?:from now|later)", delay)

    # a window: "between 9 and 17", "from 9am to 5pm"
    def window(m: re.Match[str]) -> None:
        a, b = _clock(m[1]), _clock(m[2])
        if a is None or b is None:
            raise r.fail(f"unknown time in {m[0]!r}")
        if a.hour < 12 and not b.explicit and b.hour < a.hour:  # "between 9 and 5"
            b = _Clock(b.hour + 12, b.minute)
        if p.window is not None:
            raise r.fail("two windows")
        p.window = (a, b)

    r.take(rf"(?:between|from) ({_CLOCK_AT}) (?:and|to|till|until|-) ({_CLOCK_AT})", window)

    # minute of the hour: "on the half hour", "at :15", "at 20 past the hour"
    def minute(value: int) -> None:
        if p.minute_of_hour is not None or value > 59:
            raise r.fail("one minute of the hour, 0 to 59")
        p.minute_of_hour = value

    r.take(r"on the hour", lambda m: minute(0))
    r.take(r"on the half hour", lambda m: minute(30))
    r.take(r"at :(\d{2})", lambda m: minute(int(m[1])))
    r.take(r"at (\d{1,2}) (?:minutes )?past (?:the|each|every) hour", lambda m: minute(int(m[1])))

    # a calendar step: "every other tuesday", "every 2 weeks on monday", "every 3 days"
    def step(n: int, unit: str, days: str | None = None) -> None:
        if p.step is not None:
            raise r.fail("two repeats")
        p.step = (n, unit)
        if days:
            p.days = _day_list(days)

    r.take(rf"every other ({_DAY_LIST})", lambda m: step(2, "week", m[1]))
    r.take(r"every other (day|week)", lambda m: step(2, m[1]))
    r.take(
        rf"every (\d+) weeks? on ({_DAY_LIST})",
        lambda m: step(int(m[1]), "week", m[2]),
    )
    r.take(
        rf"(?:on )?({_DAY_LIST}) every (\d+|other) weeks?",
        lambda m: step(2 if m[2] == "other" else int(m[2]), "week", m[1]),
    )
    r.take(r"every (\d+) (day|week)s?", lambda m: step(int(m[1]), m[2]))

    # a date: "dec 25", "december 25th 2027", "25 dec", "the 25th of december"
    def on_date(month: str, day: str, year: str | None) -> None:
        if p.date is not None:
            raise r.fail("two dates: make one job per date")
        p.date = (_MONTHS[month], int(day), int(year) if year else None)

    r.take(
        rf"(?:on )?({_MON}) (\d{{1,2}})(?:st|nd|rd|th)?(?: (\d{{4}}))?",
        lambda m: on_date(m[1], m[2], m[3]),
    )
    r.take(
        rf"(?:on )?(?:the )?(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?({_MON})(?: (\d{{4}}))?",
        lambda m: on_date(m[2], m[1], m[3]),
    )

    # the n-th weekday of a month
    def monthly(lead: str | None, of: str | None) -> None:
        if of in ("every", "each", "a") or (of == "the" and lead in ("every", "each")):
            p.repeat = "month"
        elif of == "the":  # "the 1st of the month": this month's, or every month's?
            raise r.fail("say 'of every month' for a repeat, or a date like 'dec 1 at 9' for once")

    def nth(m: re.Match[str]) -> None:
        if m[1] in ("every", "each") and m[4] is None:  # "every first monday"
            p.repeat = "month"
        if p.nth is not None:
            raise r.fail("two days of the month: make one job per day")
        p.nth = (_ordinal(m[2]), _DAYS[m[3]])
        monthly(m[1], m[4])

    r.take(
        rf"(?:(every|each|on) )?(?:the )?{_NTH} ({_WD})(?: (?:of|in) (every|each|the|a) month)?",
        nth,
    )

    # a day of the month
    def dom(m: re.Match[str]) -> None:
        if m[1] in ("every", "each") and m[3] is None:  # "every 15th"
            p.repeat = "month"
        word = m[2].removesuffix(" day")
        if p.dom is not None:
            raise r.fail("two days of the month: make one job per day")
        p.dom = _ordinal(word) if word in _ORDINAL_WORDS else int(re.sub(r"\D", "", word))
        monthly(m[1], m[3])

    r.take(
        r"(?:(every|each|on) )?(?:the (?=\d|first|second|third|fourth|fifth|last)|(?=\d)"
        r"|(?=(?:first|last)(?: day)? of (?:every|each) month))"
        r"(\d{1,2}(?:st|nd|rd|th)|first|second|third|fourth|fifth|last)"
        r"(?: day)?(?: (?:of|in) (every|each|the|a) month)?",
        dom,
    )

    def except_days(m: re.Match[str]) -> None:
        if p.except_days:
            raise r.fail("two lists of days left out")
        p.except_days = _day_list(m[1])

    r.take(rf"(?:except|but not|excluding) (?:on )?({_DAY_LIST}|{_PLURAL_DAY})", except_days)

    # repeat words
    def repeat(kind: str, days: tuple[int, ...] | None = None) -> None:
        if p.repeat not in (None, kind):
            raise r.fail("two repeats")
        if p.repeat is not None and p.days != days:
            if p.days is None or days is None:  # "every day" and "every monday"
                raise r.fail("two repeats")
            days = tuple(sorted({*p.days, *days}))  # "every tuesday and every thursday"
        p.repeat, p.days = kind, days

    r.take(r"daily|every day|each day|a day|per day|every single day", lambda m: repeat("day"))
    r.take(r"weekly|every week|each week|a week|per week", lambda m: repeat("week"))
    r.take(r"monthly|every month|each month|a month|per month", lambda m: repeat("month"))
    r.take(r"yearly|annually|every year|each year|a year|per year", lambda m: repeat("year"))

    def daily_part(m: re.Match[str]) -> None:
        repeat("day")
        part(m[1])

    r.take(r"(?:every|each) (morning|afternoon|evening|night)", daily_part)
    r.take(
        rf"(?:every|each) ({_DAY_LIST})",
        lambda m: repeat("day", _day_list(m[1])),
    )
    r.take(
        rf"(?:on )?({_PLURAL_DAY}(?: (?:and )?{_PLURAL_DAY})*)",
        lambda m: repeat("day", _day_list(m[1])),
    )

    def interval(m: re.Match[str]) -> None:
        seconds = _UNITS.get(m[1]) or _duration_seconds(m[1])
        if seconds is None:
            raise r.fail()
        if p.interval is not None:
            raise r.fail("two repeats")
        p.interval = seconds

    r.take(rf"(?:every|each) ({_DURATION_TEXT}|{_UNIT_RE})", interval)
    r.take(r"hourly", lambda m: setattr(p, "interval", 3600.0))

    # relative days and day parts
    def rel(days: int, part: str | None = None) -> None:
        if p.rel_days is not None:
            raise r.fail("two days")
        p.rel_days = days
        if part:
            p.day_part = part

    r.take(r"overmorrow", lambda m: rel(2))
    r.take(r"tomorrow", lambda m: rel(1))
    r.take(r"today", lambda m: rel(0))
    r.take(r"tonight", lambda m: rel(0, "night"))
    r.take(r"this (morning|afternoon|evening)", lambda m: rel(0, m[1]))

    r.take(r"(?:in the |at )?(morning|afternoon|evening|night)", lambda m: part(m[1]))
    r.take(r"(?:at |by )?(?:the )?endofday", lambda m: part("end of day"))

    # a one-shot weekday: "monday", "on friday", "next friday", "this sunday"
    def weekday(m: re.Match[str]) -> None:
        if p.weekday is not None:
            raise r.fail("two days")
        p.weekday = _DAYS[m[2]]
        p.next_week = m[1] == "next "

    r.take(rf"(on |next |this |coming |this coming )?({_WD})", weekday)

    # clock times: "at 9", "at 9am and 5pm", "9:30", "noon"
    def times(m: re.Match[str]) -> None:
        for piece in re.split(r"\sand\s|\s", m[1].strip()):
            clock = _clock(piece)
            if clock is None:
                raise r.fail(f"unknown time of day {piece!r}")
            p.times.append(clock)

    r.take(rf"(?:at|@) ({_CLOCK_AT}(?: (?:and )?{_CLOCK_AT})*)", times)
    r.take(rf"({_CLOCK}(?: (?:and )?{_CLOCK})*)", times)


# --- building the spec ------------------------------------------------------------------------


def _with_part(r: _Reader) -> list[_Clock]:
    """The phrase's clock times, read with its day part ("tomorrow evening at 7" -> 19:00)."""
    p = r.parts
    if not p.times:
        if p.day_part is None:
            return []
        base = DAY_PARTS[p.day_part]
        return [_Clock(base.hour, base.minute)]
    if p.day_part is None:
        for before, clock in itertools.pairwise(p.times):
            if not clock.explicit and clock.hour < before.hour:  # "at 9 and 5"
                raise r.fail(
                    f"is {clock.hour} in the morning meant? write {clock.hour}am or "
                    f"{clock.hour + 12}:00"
                )
        return p.times
    if p.day_part == "end of day":
        raise r.fail("end of day is 17:00: give the time or the words, not both")
    hours = DAY_PART_HOURS[p.day_part]
    out = []
    for clock in p.times:
        options = [clock.hour] if clock.explicit else [clock.hour % 12, clock.hour % 12 + 12]
        fits = [hour for hour in options if hour in hours]
        if len(fits) != 1:
            raise r.fail(f"{clock.hour:02d}:{clock.minute:02d} is not in the {p.day_part}")
        hour = fits[0]
        out.append(
            _Clock(hour, clock.minute, clock.second, True, p.day_part == "night" and hour < 6)
        )
    return out


def _one_time(r: _Reader) -> _Clock:
    clocks = _with_part(r)
    if not clocks:
        raise r.fail(f"add a time of day, e.g. '{' '.join(r.original.split())} at 9am'")
    if len(clocks) > 1:
        raise r.fail("several times of day need a repeat, e.g. 'every day at 9am and 5pm'")
    return clocks[0]


def _hours_minutes(r: _Reader, clocks: list[_Clock]) -> tuple[str, str]:
    """Cron minute and hour fields for several times: they must form a grid (each hour with
    the same minutes), else two jobs are needed."""
    if any(c.second for c in clocks):
        raise r.fail("recurring wall-clock times have minute precision")
    hours = sorted({c.hour for c in clocks})
    minutes = sorted({c.minute for c in clocks})
    if len(hours) * len(minutes) != len({(c.hour, c.minute) for c in clocks}):
        raise r.fail("these times do not share their minutes: make one job per time")
    return ",".join(map(str, minutes)), ",".join(map(str, hours))


def _dow(days: tuple[int, ...] | None) -> str:
    """Cron's day-of-week field for weekdays (Mon = 0): runs of three or more as ranges."""
    if days is None or len(days) == 7:
        return "*"
    numbers = sorted((d + 1) % 7 for d in days)
    parts: list[str] = []
    for run in _runs(numbers):
        parts.extend([f"{run[0]}-{run[-1]}"] if len(run) >= 3 else map(str, run))
    return ",".join(parts)


def _runs(numbers: list[int]) -> list[list[int]]:
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return runs


def _window_cron(r: _Reader, tz: str) -> CronSpec:
    p = r.parts
    if p.window is None or p.interval is None:
        raise r.fail("a window needs an interval, e.g. 'every 15 minutes between 9 and 17'")
    start, end = p.window
    if start.minute or end.minute or start.second or end.second:
        raise r.fail("a window runs between whole hours, e.g. 'between 9 and 17'")
    if end.hour <= start.hour:
        raise r.fail("a window must end after it starts, within one day")
    seconds = round(p.interval)
    if seconds < 60:
        raise r.fail("in a window the interval is at least a minute")
    dow = _dow(p.days)
    hours = f"{start.hour}-{end.hour - 1}" if end.hour - 1 > start.hour else str(start.hour)
    if seconds % 60 == 0 and 60 % (seconds // 60) == 0 and seconds < 3600:
        step = seconds // 60
        return CronSpec(expr=f"{'*' if step == 1 else f'*/{step}'} {hours} * * {dow}", tz=tz)
    if seconds % 3600 == 0 and 24 % (seconds // 3600) == 0:
        step = seconds // 3600
        if step == 1 or end.hour - start.hour <= step:  # one fire an hour, or one in all
            hours = hours if step == 1 else str(start.hour)
            return CronSpec(expr=f"0 {hours} * * {dow}", tz=tz)
        # a real range: cronsim reads "9-9/2" (and "9/2") as 9 to 23
        return CronSpec(expr=f"0 {start.hour}-{end.hour - 1}/{step} * * {dow}", tz=tz)
    raise r.fail("in a window the interval must divide an hour (or a day): e.g. 15 minutes")


def _first_fire_date(
    today: date, at: time, now: datetime, tz: str, ok: Callable[[date], bool]
) -> date:
    """The first date from `today` that `ok` accepts and whose `at` is still ahead."""
    day = today
    while not (ok(day) and resolve_wall(datetime.combine(day, at), get_zone(tz))[0] > now):
        day += timedelta(days=1)
    return day


def _step_spec(r: _Reader, now: datetime, tz: str) -> DaysSpec | EverySpec:
    p = r.parts
    if p.step is None:
        raise r.fail()
    n, unit = p.step
    if p.repeat not in (None, "day") or p.rel_days is not None or p.date or p.dom or p.nth:
        raise r.fail("a step ('every 2 weeks') goes with weekdays and one time of day only")
    if p.repeat == "day" and p.days is None:
        raise r.fail("two repeats")
    if unit == "week" and p.days is None and p.weekday is not None:
        p.days = (p.weekday,)
    elif p.weekday is not None:
        raise r.fail("two days")
    clocks = _with_part(r)
    if not clocks and p.days is None:  # "every 3 days": an interval from now, as "every 3d"
        return EverySpec(seconds=n * 86400 * (7 if unit == "week" else 1), anchor=now, tz=tz)
    if len(clocks) != 1:
        raise r.fail(
            "a step ('every 2 weeks') takes one time of day, e.g. 'every other monday at 9'"
        )
    if clocks[0].second:
        raise r.fail("recurring wall-clock times have minute precision")
    if clocks[0].next_day:
        raise r.fail(
            f"name the day the time falls on, e.g. 'every other saturday at {clocks[0].hour}am'"
        )
    if n > (MAX_WEEK_STEP if unit == "week" else MAX_DAY_STEP):
        raise r.fail(f"at most every {MAX_WEEK_STEP} weeks or {MAX_DAY_STEP} days")
    at = clocks[0].wall()
    today = to_wall(now, get_zone(tz)).date()
    days = p.days
    if unit == "day" and days is not None:
        raise r.fail("'every N days' cannot also name weekdays: say 'every N weeks on ...'")
    if unit == "week" and days is None:  # "every other week at 9": on today's weekday
        days = (today.weekday(),)
    start = _first_fire_date(today, at, now, tz, (lambda d: days is None or d.weekday() in days))
    return DaysSpec(
        step=n,
        unit="week" if unit == "week" else "day",
        on=tuple(d + 1 for d in days) if unit == "week" and days else (),
        time=f"{at.hour:02d}:{at.minute:02d}",
        start=start,
        tz=tz,
    )


def _check_date(r: _Reader, month: int, day: int, year: int | None = None) -> None:
    last = monthrange(year or 2024, month)[1]  # 2024: a leap year, so feb 29 is possible
    if not 1 <= day <= last:
        raise r.fail(f"{_MONTH_NAMES[month - 1]} {day} does not exist")


def _recurring(r: _Reader, now: datetime, tz: str) -> CronSpec | EverySpec | DaysSpec:
    p = r.parts
    if p.step is not None:
        return _step_spec(r, now, tz)
    if p.window is not None:
        if p.repeat not in (None, "day") or p.times or p.day_part:
            raise r.fail("a window goes with an interval and weekdays only")
        return _window_cron(r, tz)
    if (
        p.rel_days is not None
        or p.delay is not None
        or (p.weekday is not None and p.repeat != "week")
    ):
        raise r.fail("a one-time day and a repeat at once")
    if p.interval is not None:
        if p.repeat or p.times or p.day_part or p.date or p.dom or p.nth:
            if p.interval == 3600 and p.minute_of_hour is not None and not (p.times or p.date):
                return CronSpec(expr=f"{p.minute_of_hour} * * * {_dow(p.days)}", tz=tz)
            raise r.fail("an interval goes with a window, e.g. 'every 15 minutes between 9 and 17'")
        if p.minute_of_hour is not None:
            if p.interval != 3600:
                raise r.fail("'on the hour' goes with 'every hour'")
            return CronSpec(expr=f"{p.minute_of_hour} * * * *", tz=tz)
        seconds = p.interval
        if seconds < 1:
            raise r.fail("the interval must be at least 1 second")
        if seconds > MAX_INTERVAL_S:
            raise r.fail("the interval must be at most 10 years")
        return EverySpec(seconds=round(seconds), anchor=now, tz=tz)
    if p.minute_of_hour is not None:
        raise r.fail("'on the hour' goes with 'every hour'")
    clocks = _with_part(r)
    if not clocks:
        if p.repeat in ("month", "year") or p.nth or p.dom:
            raise r.fail("add a time of day, e.g. 'monthly on the 1st at 9am'")
        local = to_wall(now, get_zone(tz))  # "every day", "weekly": at the current minute
        clocks = [_Clock(local.hour, local.minute)]
    if any(c.next_day for c in clocks) and (p.days is not None or p.repeat != "day"):
        raise r.fail("name the day the time falls on, e.g. 'every saturday at 1am'")
    minutes, hours = _hours_minutes(r, clocks)
    if p.repeat == "week":
        if p.days is None:
            p.days = (
                (p.weekday,) if p.weekday is not None else (to_wall(now, get_zone(tz)).weekday(),)
            )
        return CronSpec(expr=f"{minutes} {hours} * * {_dow(p.days)}", tz=tz)
    if p.nth is not None:
        if p.repeat not in (None, "month") or p.days is not None or p.dom or p.date:
            raise r.fail("the n-th weekday goes with 'of every month' only")
        n, weekday = p.nth
        cron_day = (weekday + 1) % 7
        field = f"{cron_day}L" if n == -1 else f"{cron_day}#{n}"
        return CronSpec(expr=f"{minutes} {hours} * * {field}", tz=tz)
    if p.repeat == "month" or p.dom is not None:
        if p.dom is None or p.days is not None or p.date:
            raise r.fail("monthly needs a day of the month, e.g. 'monthly on the 1st at 9am'")
        if not 1 <= p.dom <= 31 and p.dom != -1:
            raise r.fail(f"there is no day {p.dom} in a month")
        if p.dom > 28:
            raise r.fail(
                f"not every month has a day {p.dom}: say 'on the last day of every month' "
                "or pick a day up to 28"
            )
        return CronSpec(expr=f"{minutes} {hours} {'L' if p.dom == -1 else p.dom} * *", tz=tz)
    if p.repeat == "year" or p.date is not None:
        if p.date is None or p.days is not None:
            raise r.fail("yearly needs a date, e.g. 'every year on dec 25 at 9am'")
        month, day, year = p.date
        if year is not None:
            raise r.fail("a yearly date takes no year")
        _check_date(r, month, day)
        if (month, day) == (2, 29):
            raise r.fail("february 29 comes only in leap years: pick feb 28 or mar 1")
        return CronSpec(expr=f"{minutes} {hours} {day} {month} *", tz=tz)
    return CronSpec(expr=f"{minutes} {hours} * * {_dow(p.days)}", tz=tz)


def _next_date(r: _Reader, today: date, at: time, shift: int, now: datetime, tz: str) -> date:
    """The day of a one-shot phrase's date parts (or the next day `at` is still ahead); a named
    day's night ("friday night at 1") fires `shift` days after it."""
    p = r.parts
    zone = get_zone(tz)

    def ahead(day: date) -> bool:
        return resolve_wall(datetime.combine(day + timedelta(days=shift), at), zone)[0] > now

    if p.date is not None:
        month, day, year = p.date
        _check_date(r, month, day, year)
        if year is not None:
            return date(year, month, day)
        for candidate_year in range(today.year, today.year + 9):
            if day <= monthrange(candidate_year, month)[1]:
                candidate = date(candidate_year, month, day)
                if candidate >= today and ahead(candidate):
                    return candidate
        raise r.fail()
    if p.dom is not None:
        if not 1 <= p.dom <= 31:
            raise r.fail(f"there is no day {p.dom} in a month")
        y, m = today.year, today.month
        for _ in range(14):
            if p.dom <= monthrange(y, m)[1] and ahead(candidate := date(y, m, p.dom)):
                return candidate
            y, m = (y + 1, 1) if m == 12 else (y, m + 1)
        raise r.fail()
    if p.weekday is not None:
        candidate = today + timedelta(days=(p.weekday - today.weekday()) % 7)
        if p.next_week and candidate == today:
            return candidate + timedelta(days=7)
        return candidate if ahead(candidate) else candidate + timedelta(days=7)
    if p.rel_days is not None:
        return today + timedelta(days=p.rel_days)
    if resolve_wall(datetime.combine(today, at), zone)[0] > now:  # no day named: the next `at`
        return today - timedelta(days=shift)
    return today + timedelta(days=1 - shift)


def _once(r: _Reader, now: datetime, tz: str) -> AtSpec:
    p = r.parts
    if p.nth is not None:
        raise r.fail("the n-th weekday needs 'of every month'")
    dated = [x for x in (p.date, p.dom, p.weekday, p.rel_days) if x is not None]
    if len(dated) > 1:
        raise r.fail("two days")
    if p.date is not None:
        _check_date(r, *p.date)
    zone = get_zone(tz)
    today = to_wall(now, zone).date()
    if p.delay is not None:
        if p.delay <= 0:
            raise PastInstantError(f"{r.original!r} is not in the future: a delay must be positive")
        if p.delay > MAX_AHEAD.total_seconds():
            raise r.fail("a one-time fire must be at most 100 years ahead")
        if not p.times and p.day_part is None:
            if dated:
                raise r.fail("a delay and a day at once")
            return AtSpec(at=now + timedelta(seconds=p.delay), tz=tz)
        if dated or p.delay % 86400:  # "in 2 days at 10am": whole days, then the time
            raise r.fail("a delay with a time of day must be whole days, e.g. 'in 2 days at 10am'")
        clock = _one_time(r)
        day = today + timedelta(days=int(p.delay // 86400) + clock.next_day)
        instant = resolve_wall(datetime.combine(day, clock.wall()), zone)[0]
        return AtSpec(at=_future(instant, now, tz), tz=tz)
    clock = _one_time(r)
    shift = int(clock.next_day)
    day = _next_date(r, today, clock.wall(), shift, now, tz) + timedelta(days=shift)
    instant = resolve_wall(datetime.combine(day, clock.wall()), zone)[0]
    return AtSpec(at=_future(instant, now, tz), tz=tz)


def _build(r: _Reader, now: datetime, tz: str) -> AtSpec | CronSpec | EverySpec | DaysSpec:
    p = r.parts
    if p.except_days:
        if p.repeat != "day" or p.step or p.interval is not None:
            raise r.fail("'except' goes with days that repeat, e.g. 'every day except sunday'")
        p.days = tuple(d for d in (p.days or range(7)) if d not in p.except_days)
        if not p.days:
            raise r.fail("no day is left")
    if (
        p.repeat
        or p.days is not None
        or p.interval is not None
        or p.step
        or p.window
        or p.minute_of_hour is not None
    ):
        return _recurring(r, now, tz)
    if p.times or p.day_part or p.delay is not None or p.rel_days is not None:
        return _once(r, now, tz)
    if p.date or p.dom or p.weekday is not None or p.nth:
        return _once(r, now, tz)
    raise r.fail()


# --- the entry point --------------------------------------------------------------------------


def _split_zone(text: str, tz: str) -> tuple[str, str]:
    """Take the zone words off `text` (lowercased, normalised): an offset ('utc+2'), an
    abbreviation anywhere ('pst'), '<place> time' or a place at the end ('in tokyo')."""
    found: list[str] = []

    def offset(m: re.Match[str]) -> str:
        found.append(zone_of(f"{m[1]}{m[2]}{m[3]}") or "UTC")
        return " "

    text = re.sub(r"(?<!\S)(utc|gmt) ?([+-]) ?(\d{1,2}(?::?\d{2})?)(?!\S)", offset, text)
    words = text.split()
    for i, word in enumerate(words):
        if word in ZONE_ABBREVIATIONS or (word in AMBIGUOUS_ZONES and len(word) <= 4):
            found.append(zone_of(word) or tz)
            words[i] = ""
    words = [w for w in words if w]
    if words and words[-1] == "time":
        for count in (3, 2, 1):
            name = " ".join(words[-1 - count : -1])
            if len(words) > count + 1 and (zone := zone_of(name)):
                found.append(zone)
                words = words[: -1 - count]
                break
        else:
            raise WhenParseError(
                f"unknown time zone in {text.strip()!r}: use an IANA name like 'Europe/Berlin'"
            )
    else:
        for count in (3, 2, 1):
            name = " ".join(words[-count:])
            placed = len(words) > count + 1 and words[-count - 1] == "in"  # "noon in sydney"
            if len(words) <= count or name.startswith("in "):
                continue
            if zone := zone_of(name, cities=placed):
                found.append(zone)
                words = words[:-count]
                break
    if words and words[-1] == "in" and found:
        words = words[:-1]
    if len(found) > 1:
        raise WhenParseError(f"two time zones in {text.strip()!r}")
    return " ".join(words), (found[0] if found else tz)


def _cron(stripped: str) -> bool:
    tokens = stripped.split(" ")
    return stripped.startswith("@") or (
        len(tokens) >= 5
        and all(_CRON_FIELD.match(tok) for tok in tokens[:5])
        and re.match(r"^[0-9*/,\-H?]+$", tokens[0]) is not None
        and not re.search(r"(?:am|pm)$", tokens[1].lower())
    )


def _parse_iso(text: str, original: str, now: datetime, tz: str) -> AtSpec | None:
    if not re.match(r"^\d{4}-\d{2}-\d{2}", text):
        return None
    if not re.match(r"^\d{4}-\d{2}-\d{2}[t ]\d", text):
        raise _fail(original, "a date alone is ambiguous: add a time, e.g. 2026-12-01T09:00")
    try:
        value = datetime.fromisoformat(text.upper())
        if value.tzinfo is None:
            instant = resolve_wall(value, get_zone(tz))[0]
        else:
            instant = value.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise _fail(original, f"not a valid ISO 8601 date-time ({exc})") from exc
    return AtSpec(at=_future(instant, now, tz), tz=tz)


def _read_phrase(
    text: str, original: str, now: datetime, tz: str
) -> AtSpec | CronSpec | EverySpec | DaysSpec:
    if re.search(r"\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b", text):
        raise _fail(
            original, "a numeric date can be day/month or month/day: write 'dec 25' or 2026-12-25"
        )
    r = _Reader(text, original)
    seconds = _duration_seconds(text)
    if seconds is not None:  # "30m", "2h 15m", "an hour"
        r.parts.delay = seconds
        return _once(r, now, tz)
    _read(r)
    if rest := r.rest():
        if not r.seen:
            raise _fail(original)
        rest = [word for word in rest if word not in VOCABULARY] or rest
        raise r.fail(f"unknown word{'s' if len(rest) > 1 else ''} {' '.join(rest)!r}")
    return _build(r, now, tz)


def parse_when(
    text: str, now: datetime, tz: str = "UTC"
) -> AtSpec | CronSpec | EverySpec | DaysSpec:
    """Read a plain-language time phrase as a spec, relative to the aware instant `now`.

    `tz` is the zone for wall-clock phrases unless the phrase names one ("9am PST", "at 9
    Tokyo time", "Europe/Berlin"). One-shots must land after `now`. A phrase that cannot be
    read with one certain meaning raises WhenParseError with one line: why, and the nearest
    phrase that would work when there is one.
    """
    now = require_aware(now, "now")
    get_zone(tz)
    original = text
    stripped = " ".join(text.split())
    if not stripped:
        raise _fail(original, "empty")
    last = stripped.rsplit(" ", 1)
    if len(last) == 2 and "/" in last[1] and not re.search(r"\d", last[1]):
        zone = zone_of(last[1].lower())
        if zone is None:
            raise WhenParseError(
                f"unknown time zone {last[1]!r} in {original!r}: expected an IANA name "
                "like 'Europe/Berlin'"
            )
        stripped, tz = last[0], zone
    elif len(last) == 2 and last[1].upper() in ("UTC", "GMT"):
        stripped, tz = last[0], "UTC"
    if _cron(stripped):
        try:
            return CronSpec(expr=parse_cron(stripped).expr, tz=tz)
        except InvalidCronError as exc:
            raise WhenParseError(str(exc)) from exc
    lowered = stripped.lower()
    if iso := _parse_iso(lowered, original, now, tz):
        return iso
    try:
        normal, zone = _split_zone(_normalise(lowered), tz)
        return _read_phrase(normal, original, now, zone)
    except PastInstantError:
        raise
    except WhenParseError as exc:
        unknown = "unknown word" in str(exc) or ACCEPTED_FORMS in str(exc)
        fixed = suggest(lowered) if unknown else None
        if fixed is None:
            raise
        try:
            parse_when(fixed, now, tz)
        except WhenParseError as again:
            if "unknown word" in str(again) or ACCEPTED_FORMS in str(again):
                raise exc from None
        raise _fail(original, f"did you mean {fixed!r}?") from None
