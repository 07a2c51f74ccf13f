"""Quiet hours: a daily wall-clock window in a session's zone ("22:00-07:00", possibly across
midnight) and whether an instant falls in it (pure: every function takes `now`).

DST: a window's start or end that falls in a spring-forward gap begins at the first instant
after the gap; one that falls in a fall-back fold is its first occurrence (`resolve_wall`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta

from agentcron.schedule.errors import InvalidSpecError
from agentcron.schedule.zones import get_zone, require_aware, resolve_wall, to_wall

_WINDOW = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


@dataclass(frozen=True, slots=True)
class QuietHours:
    """A daily window from `start` to `end` (wall-clock); `end` <= `start` spans midnight."""

    start: time
    end: time

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{self.end:%H:%M}"


def parse_quiet_hours(text: str) -> QuietHours:
    """ "HH:MM-HH:MM" (24-hour); `InvalidSpecError` for anything else or an empty window."""
    match = _WINDOW.match(text or "")
    if match is None:
        raise InvalidSpecError(f"quiet hours {text!r}: expected HH:MM-HH:MM, e.g. 22:00-07:00")
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59:
        raise InvalidSpecError(f"quiet hours {text!r}: hours 00-23, minutes 00-59")
    window = QuietHours(time(h1, m1), time(h2, m2))
    if window.start == window.end:
        raise InvalidSpecError(f"quiet hours {text!r}: the start and the end are the same")
    return window


def quiet_until(window: QuietHours, now: datetime, tz: str) -> datetime | None:
    """When the quiet hours around `now` end (a UTC instant), or None when `now` is not in
    them. A window spanning midnight is the one that began the day before.
    """
    now = require_aware(now, "now")
    zone = get_zone(tz)
    today = to_wall(now, zone).date()
    for day in (today - timedelta(days=1), today):
        start_wall = datetime.combine(day, window.start)
        end_day = day + timedelta(days=1) if window.end <= window.start else day
        end_wall = datetime.combine(end_day, window.end)
        start = resolve_wall(start_wall, zone)[0]
        end = resolve_wall(end_wall, zone)[0]
        if start <= now < end:
            return end
    return None
