"""describe(spec): short human text, e.g. "every weekday at 09:00 (Europe/Berlin)", or with a DST
policy "every day at 02:30 (Europe/Berlin); not on a day the clocks skip its time"."""

from __future__ import annotations

from datetime import datetime

from cronsim import CronSim

from agentcron.schedule.spec import AtSpec, CronSpec, DaysSpec, EverySpec
from agentcron.schedule.zones import DstFold, DstGap, get_zone, zone_label

_DAY_NAMES = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_DOW_PHRASES = {"*": "every day", "1-5": "every weekday", "0,6": "every weekend day"}


def _duration(seconds: int) -> str:
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return " ".join(parts)


def _every(seconds: int) -> str:
    for word, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds == size:
            return f"every {word}"
        if seconds % size == 0 and size > 1:
            return f"every {seconds // size} {word}s"
    return f"every {_duration(seconds)}"


def _cron_phrase(expr: str) -> str:
    minute, hour, dom, month, dow = expr.split(" ")
    if minute.isdigit() and hour.isdigit() and dom == "*" and month == "*":
        clock = f"{int(hour):02d}:{int(minute):02d}"
        if dow in _DOW_PHRASES:
            return f"{_DOW_PHRASES[dow]} at {clock}"
        if all(part.isdigit() and int(part) <= 7 for part in dow.split(",")):
            names = [_DAY_NAMES[int(part) % 7] for part in dow.split(",")]
            return f"every {_listed(names)} at {clock}"
    if expr == "0 * * * *":
        return "every hour"
    if expr == "* * * * *":
        return "every minute"
    explained = CronSim(expr, datetime(2000, 1, 1)).explain()
    return explained[:1].lower() + explained[1:] + f" (cron '{expr}')"


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _days_phrase(spec: DaysSpec) -> str:
    unit = "other " + spec.unit if spec.step == 2 else f"{spec.step} {spec.unit}s"
    if spec.step == 1:
        unit = spec.unit
    if spec.unit == "week":
        days = _listed([_DAY_NAMES[day % 7] for day in spec.on])
        return f"every {unit} on {days} at {spec.time}, from the week of {spec.start:%Y-%m-%d}"
    return f"every {unit} at {spec.time}, from {spec.start:%Y-%m-%d}"


_FOLD_TEXT = {DstFold.LAST: "the second time", DstFold.BOTH: "both times"}


def _dst_phrase(spec: CronSpec | DaysSpec) -> str:
    """A non-default DST policy in words ("" for the default)."""
    parts: list[str] = []
    if spec.dst_gap is DstGap.SKIP:
        parts.append("not on a day the clocks skip its time")
    if spec.dst_fold in _FOLD_TEXT:
        parts.append(f"{_FOLD_TEXT[spec.dst_fold]} when the clocks repeat it")
    return "; " + ", ".join(parts) if parts else ""


def describe(spec: CronSpec | EverySpec | AtSpec | DaysSpec) -> str:
    """A short plain-English description of `spec`, naming its time zone and a DST policy
    other than the default.
    """
    zone = zone_label(spec.tz)
    if isinstance(spec, CronSpec):
        return f"{_cron_phrase(spec.expr)} ({zone}){_dst_phrase(spec)}"
    if isinstance(spec, EverySpec):
        return _every(spec.seconds)
    if isinstance(spec, DaysSpec):
        return f"{_days_phrase(spec)} ({zone}){_dst_phrase(spec)}"
    local = spec.at.astimezone(get_zone(spec.tz))
    return f"once at {local:%Y-%m-%d %H:%M} ({zone})"
