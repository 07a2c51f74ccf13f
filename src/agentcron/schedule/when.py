"""parse_when: plain-language times ("in 30m", "every weekday at 9", cron, ISO 8601) to specs."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from agentcron.schedule.cron import parse_cron
from agentcron.schedule.errors import InvalidCronError, PastInstantError, WhenParseError
from agentcron.schedule.spec import MAX_AHEAD, MAX_INTERVAL_S, AtSpec, CronSpec, EverySpec
from agentcron.schedule.zones import get_zone, is_zone_name, require_aware, resolve_wall, to_wall

ACCEPTED_FORMS = (
    "accepted forms: "
    "a delay ('30m', '2h 15m', '1.5h', 'in 3 hours', 'in 90 seconds'); "
    "a time ('at 17:30', 'tomorrow at 09:00', 'monday 8am', ISO 8601 '2026-12-01T09:00'); "
    "a repeat ('every 2h', 'every day at 7:30', 'every weekday at 9', 'every monday at 8am'); "
    "a cron expression ('0 9 * * 1-5', '@daily'); "
    "each optionally followed by an IANA time zone ('Europe/Berlin')"
)

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
_PART = rf"(?:(\d+(?:\.\d+)?)\s*|\b(an?)\s+)({_UNIT_RE})\b"
_DURATION_PART = re.compile(_PART)
_DURATION = re.compile(rf"^(?:{_PART}\s*)+$")
_JOINER = re.compile(r"\s*(?:,|&|\band\b)\s*")
_TIME = re.compile(
    r"^(?:(?P<noon>noon|midday)|(?P<midnight>midnight)|"
    r"(?P<h>\d{1,2})(?::(?P<m>\d{2}))?(?::(?P<s>\d{2}))?\s*(?P<ampm>am|pm|a\.m\.|p\.m\.)?)$"
)
_DAYS = {
    "monday": 0,
    "mon": 0,
    "tuesday": 1,
    "tue": 1,
    "tues": 1,
    "wednesday": 2,
    "wed": 2,
    "thursday": 3,
    "thu": 3,
    "thur": 3,
    "thurs": 3,
    "friday": 4,
    "fri": 4,
    "saturday": 5,
    "sat": 5,
    "sunday": 6,
    "sun": 6,
}
_DAY_GROUPS = {
    "day": None,
    "weekday": (0, 1, 2, 3, 4),
    "weekend": (5, 6),
    "weekend day": (5, 6),
}
_CRON_FIELD = re.compile(r"^[0-9*/,\-A-Za-z#?]+$")


def _fail(text: str, why: str = "") -> WhenParseError:
    lead = f"cannot read {text!r} as a time" + (f" ({why})" if why else "")
    return WhenParseError(f"{lead}; {ACCEPTED_FORMS}")


def _duration_seconds(text: str) -> float | None:
    text = _JOINER.sub(" ", text).strip()
    if not _DURATION.match(text):
        return None
    total = 0.0
    for number, _article, unit in _DURATION_PART.findall(text):
        value = float(number) if number else 1.0
        total += value * _UNITS[unit]
    return total


def _parse_time(text: str) -> time | None:
    match = _TIME.match(text.strip())
    if not match:
        return None
    if match["noon"]:
        return time(12, 0)
    if match["midnight"]:
        return time(0, 0)
    hour, minute, second = int(match["h"]), int(match["m"] or 0), int(match["s"] or 0)
    ampm = (match["ampm"] or "").replace(".", "")
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        return None
    return time(hour, minute, second)


def _parse_days(text: str) -> tuple[int, ...] | None:
    """'monday', 'mon, wed and fri', 'weekday' -> weekday numbers (Mon=0); None = every day."""
    text = text.removesuffix("s") if text.rstrip("s") in _DAY_GROUPS else text
    if text in _DAY_GROUPS:
        return _DAY_GROUPS[text]
    names = [part for part in _JOINER.split(text) if part]
    days: list[int] = []
    for name in names:
        key = name.removesuffix("s") if name not in _DAYS else name
        if key not in _DAYS:
            raise KeyError(name)
        days.append(_DAYS[key])
    return tuple(sorted(set(days)))


def _local_instant(day: date, at: time, tz_name: str) -> datetime:
    """The instant a wall-clock date+time occurs (gap -> first valid instant; fold -> first)."""
    return resolve_wall(datetime.combine(day, at), get_zone(tz_name))[0]


def _future(instant: datetime, now: datetime, text: str) -> datetime:
    if instant <= now:
        raise PastInstantError(
            f"{text!r} resolves to {instant.isoformat()}, which is not after now "
            f"({now.isoformat()}); a one-shot time must be in the future"
        )
    return instant


def _split_zone(text: str, tz: str) -> tuple[str, str]:
    parts = text.rsplit(None, 1)
    if len(parts) == 2 and ("/" in parts[1] or parts[1].upper() in ("UTC", "GMT")):
        if is_zone_name(parts[1]):
            return parts[0], parts[1]
        if "/" in parts[1]:
            raise WhenParseError(
                f"unknown time zone {parts[1]!r} in {text!r}: expected an IANA "
                "name like 'Europe/Berlin'"
            )
    return text, tz


def _parse_every(body: str, original: str, now: datetime, tz: str) -> CronSpec | EverySpec:
    seconds = None if body == "day" else _duration_seconds(body)
    if seconds is None and body in _UNITS and body != "day":
        seconds = float(_UNITS[body])
    if seconds is not None:
        if seconds < 1:
            raise _fail(original, "the interval must be at least 1 second")
        if seconds > MAX_INTERVAL_S:
            raise _fail(original, "the interval must be at most 10 years")
        return EverySpec(seconds=round(seconds), anchor=now, tz=tz)
    day_part, sep, time_part = body.partition(" at ")
    if not sep:
        day_part, time_part = body, ""
    try:
        days = _parse_days(day_part.strip())
    except KeyError as exc:
        raise _fail(original, f"unknown day {exc.args[0]!r}") from exc
    if time_part:
        at = _parse_time(time_part)
        if at is None:
            raise _fail(original, f"unknown time of day {time_part!r}")
    else:
        at = to_wall(now, get_zone(tz)).time().replace(second=0, microsecond=0)
    if at.second:
        raise _fail(original, "recurring wall-clock times have minute precision")
    dow = "*" if days is None else ",".join(str(n) for n in sorted((d + 1) % 7 for d in days))
    if days == (0, 1, 2, 3, 4):
        dow = "1-5"
    return CronSpec(expr=f"{at.minute} {at.hour} * * {dow}", tz=tz)


def _parse_once(text: str, original: str, now: datetime, tz: str) -> AtSpec | None:
    body = text.removeprefix("in ").removesuffix(" from now").removesuffix(" later").strip()
    seconds = _duration_seconds(body)
    if seconds is not None:
        if seconds <= 0:
            raise PastInstantError(f"{original!r} is not in the future: a delay must be positive")
        if seconds > MAX_AHEAD.total_seconds():
            raise _fail(original, "a one-time fire must be at most 100 years ahead")
        return AtSpec(at=now + timedelta(seconds=seconds), tz=tz)

    zone = get_zone(tz)
    today = to_wall(now, zone).date()
    clock = _parse_time(text.removeprefix("at ").strip())
    if clock is not None:  # "at 17:30", "17:30", "8am": the next occurrence
        instant = _local_instant(today, clock, tz)
        if instant <= now:
            instant = _local_instant(today + timedelta(days=1), clock, tz)
        return AtSpec(at=instant, tz=tz)
    day_word, time_text = "", ""
    for pattern in (  # "monday at 8am" or "8am on monday"
        r"^(?:(?:on|next|this)\s+)?(?P<day>[a-z]+)\s+(?:at\s+)?(?P<time>.+)$",
        r"^(?:at\s+)?(?P<time>.+?)\s+(?:(?:on|next|this)\s+)?(?P<day>[a-z]+)$",
    ):
        match = re.match(pattern, text)
        if match and (clock := _parse_time(match["time"])) is not None:
            day_word, time_text = match["day"], match["time"]
            break
    if clock is None:
        return None
    if day_word == "tonight" and clock.hour < 12 and not re.search(r"[ap]\.?m", time_text):
        clock = clock.replace(hour=clock.hour + 12)  # "tonight at 9" is 21:00
    if day_word in ("today", "tonight"):
        return AtSpec(at=_future(_local_instant(today, clock, tz), now, original), tz=tz)
    if day_word == "tomorrow":
        return AtSpec(at=_local_instant(today + timedelta(days=1), clock, tz), tz=tz)
    if day_word not in _DAYS:
        return None
    ahead = (_DAYS[day_word] - today.weekday()) % 7
    instant = _local_instant(today + timedelta(days=ahead), clock, tz)
    if instant <= now:
        instant = _local_instant(today + timedelta(days=ahead + 7), clock, tz)
    return AtSpec(at=instant, tz=tz)


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
        raise _fail(original, f"not a valid ISO 8601 date-time: {exc}") from exc
    if instant - now > MAX_AHEAD:
        raise _fail(original, "a one-time fire must be at most 100 years ahead")
    return AtSpec(at=_future(instant, now, original), tz=tz)


def parse_when(text: str, now: datetime, tz: str = "UTC") -> AtSpec | CronSpec | EverySpec:
    """Read a plain-language time phrase as a spec, relative to the aware instant `now`.

    `tz` is the zone for wall-clock phrases unless the phrase ends with a zone name. One-shots
    must land after `now`; an unreadable phrase raises WhenParseError listing the accepted forms.
    """
    now = require_aware(now, "now")
    get_zone(tz)
    original = text
    stripped = " ".join(text.split())
    if not stripped:
        raise _fail(original, "empty")
    stripped, tz = _split_zone(stripped, tz)

    tokens = stripped.split(" ")
    if stripped.startswith("@") or (
        len(tokens) >= 5
        and all(_CRON_FIELD.match(tok) for tok in tokens[:2])
        and re.match(r"^[0-9*/,\-H?]+$", tokens[0])
    ):
        try:
            return CronSpec(expr=parse_cron(stripped).expr, tz=tz)
        except InvalidCronError as exc:
            raise WhenParseError(str(exc)) from exc

    lowered = stripped.lower()
    if iso := _parse_iso(lowered, original, now, tz):
        return iso
    for prefix in ("every ", "each "):
        if lowered.startswith(prefix):
            return _parse_every(lowered.removeprefix(prefix).strip(), original, now, tz)
    if lowered in ("hourly", "daily"):
        return _parse_every(lowered.removesuffix("ly").replace("dai", "day"), original, now, tz)
    if once := _parse_once(lowered, original, now, tz):
        return once
    raise _fail(original)
