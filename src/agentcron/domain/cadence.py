"""Adaptive cadence: the bounds an operator sets on a job within which the agent may move the
job's next fire itself (`cron(action="reschedule")`), and the record of each move (pure: no
I/O, no clock read; every check takes `now`).

A job without bounds cannot be moved by the agent. With bounds, the new next fire must be in
the future, at least `min` and at most `max` from now (each when set), and inside the
`allowed_hours` window of the job's zone (when set). After the moved fire the schedule goes on
at its normal cadence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from agentcron.errors import InvalidInputError
from agentcron.schedule.zones import get_zone

# The longest bound and the longest move: a year (a job moved further is better paused).
MAX_CADENCE = timedelta(days=366)
MAX_REASON_CHARS = 500  # the agent's why, kept on the job and the run

_DURATION = re.compile(r"(\d+)\s*(d|h|m|s)", re.IGNORECASE)
_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_HOURS = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


class CadenceRefusedError(InvalidInputError):
    """The agent asked to move a job's next fire outside its bounds (or it has none); the
    message says why, for the model to read. HTTP 422.
    """


def parse_duration(text: str | int | float | timedelta, field: str = "duration") -> timedelta:
    """A bound as a duration: seconds (a number), or text such as "90s", "30m", "2h", "1d",
    "1h30m" (InvalidInputError otherwise, or when not between 1 second and a year).
    """
    if isinstance(text, timedelta):
        value = text
    elif isinstance(text, (int, float)) and not isinstance(text, bool):
        value = timedelta(seconds=text)
    elif isinstance(text, str) and text.strip().isdigit():
        value = timedelta(seconds=int(text.strip()))
    elif isinstance(text, str) and len(text) <= 32:
        squeezed = text.strip().replace(" ", "")
        parts = _DURATION.findall(squeezed)
        if not parts or "".join(n + u for n, u in parts).lower() != squeezed.lower():
            raise InvalidInputError(
                f"{field} must be a duration such as 90s, 30m, 2h, 1d or 1h30m (got {text!r})"
            )
        value = timedelta(seconds=sum(int(n) * _UNITS[u.lower()] for n, u in parts))
    else:
        raise InvalidInputError(f"{field} must be a duration such as 30m or 2h")
    if not timedelta(seconds=1) <= value <= MAX_CADENCE:
        raise InvalidInputError(f"{field} must be between 1s and 366d")
    return value


def duration_text(value: timedelta) -> str:
    """A duration as `parse_duration` reads it back: "1h30m", "45s", "2d"."""
    left = int(value.total_seconds())
    parts = []
    for unit, size in _UNITS.items():
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts) or "0s"


@dataclass(frozen=True, slots=True)
class HourWindow:
    """Local hours of the job's zone, `start` included, `end` excluded; a window whose start
    is after its end runs over midnight ("22:00-06:00").
    """

    start: time
    end: time

    @classmethod
    def parse(cls, text: str) -> HourWindow:
        """ "08:00-20:00" (InvalidInputError otherwise, or for an empty window)."""
        match = _HOURS.match(text) if len(text) <= 32 else None
        if match is None:
            raise InvalidInputError(
                f"allowed_hours must look like 08:00-20:00 (local, in the job's zone), "
                f"got {text[:40]!r}"
            )
        sh, sm, eh, em = (int(g) for g in match.groups())
        if sh > 24 or eh > 24 or sm > 59 or em > 59 or (sh == 24 and sm) or (eh == 24 and em):
            raise InvalidInputError(f"allowed_hours has an hour that does not exist: {text!r}")
        start, end = time(sh % 24, sm), time(eh % 24, em)
        if start == end:
            raise InvalidInputError(
                f"allowed_hours {text!r} is empty; leave it out to allow every hour"
            )
        return cls(start, end)

    def contains(self, local: time) -> bool:
        if self.start < self.end:
            return self.start <= local < self.end
        return local >= self.start or local < self.end

    def __str__(self) -> str:
        end = "24:00" if self.end == time(0) and self.start != time(0) else f"{self.end:%H:%M}"
        return f"{self.start:%H:%M}-{end}"


@dataclass(frozen=True, slots=True)
class CadenceBounds:
    """How far the agent may move a job's next fire: at least `min` and at most `max` from the
    time it asks, inside `hours` of the job's zone. A bound left None does not limit.
    """

    min: timedelta | None = None
    max: timedelta | None = None
    hours: HourWindow | None = None

    def __post_init__(self) -> None:
        for name, value in (("cadence_min", self.min), ("cadence_max", self.max)):
            if value is not None:
                parse_duration(value, name)
        if self.min is not None and self.max is not None and self.min > self.max:
            raise InvalidInputError(
                f"cadence_min ({duration_text(self.min)}) is longer than cadence_max "
                f"({duration_text(self.max)})"
            )

    @classmethod
    def of(
        cls,
        min: str | int | float | timedelta | None = None,
        max: str | int | float | timedelta | None = None,
        allowed_hours: str | None = None,
    ) -> CadenceBounds | None:
        """Bounds from their written forms (InvalidInputError); None when none is given."""
        if min is None and max is None and allowed_hours is None:
            return None
        return cls(
            min=None if min is None else parse_duration(min, "cadence_min"),
            max=None if max is None else parse_duration(max, "cadence_max"),
            hours=None if allowed_hours is None else HourWindow.parse(allowed_hours),
        )

    def describe(self) -> str:
        """The bounds in words, for the model and the CLI."""
        parts = []
        if self.min is not None:
            parts.append(f"at least {duration_text(self.min)} from now")
        if self.max is not None:
            parts.append(f"at most {duration_text(self.max)} from now")
        if self.hours is not None:
            parts.append(f"between {self.hours} local time")
        return ", ".join(parts) or "any time in the future"


def check_move(bounds: CadenceBounds | None, now: datetime, to: datetime, tz: str) -> None:
    """Refuse (CadenceRefusedError, its message for the model) moving a job's next fire to
    `to`, asked at `now`, outside `bounds` read in the job's zone `tz`; None: no bounds, the
    agent may not move it.
    """
    if bounds is None:
        raise CadenceRefusedError(
            "this job has no cadence bounds, so its schedule cannot be moved by you; "
            "a person can set them (cadence_min, cadence_max, allowed_hours)"
        )
    if to.tzinfo is None:
        raise CadenceRefusedError("the new time needs a UTC offset")
    ahead = to - now
    zone = get_zone(tz)
    asked = f"{to.astimezone(zone):%Y-%m-%d %H:%M} ({tz})"
    if ahead <= timedelta(0):
        raise CadenceRefusedError(f"{asked} is not in the future")
    allowed = f"allowed: {bounds.describe()}"
    if bounds.min is not None and ahead < bounds.min:
        raise CadenceRefusedError(f"{asked} is sooner than cadence_min allows ({allowed})")
    if ahead > (bounds.max if bounds.max is not None else MAX_CADENCE):
        raise CadenceRefusedError(f"{asked} is later than cadence_max allows ({allowed})")
    if bounds.hours is not None and not bounds.hours.contains(to.astimezone(zone).time()):
        raise CadenceRefusedError(f"{asked} is outside the allowed hours ({allowed})")


@dataclass(frozen=True, slots=True)
class Reschedule:
    """One move of a job's next fire by the agent: from which fire to which, why, when, and
    from which run (None: a turn that was no fire's, e.g. a chat message).
    """

    job_id: str
    from_at: datetime | None
    to_at: datetime
    reason: str
    at: datetime
    run_id: str | None = None

    def to_data(self) -> dict[str, Any]:
        """As stored (JSON) on the job and on the run."""
        return {
            "job_id": self.job_id,
            "from": None if self.from_at is None else self.from_at.isoformat(),
            "to": self.to_at.isoformat(),
            "reason": self.reason,
            "at": self.at.isoformat(),
            "run_id": self.run_id,
        }

    @classmethod
    def of_data(cls, data: dict[str, Any]) -> Reschedule:
        start = data.get("from")
        return cls(
            job_id=str(data["job_id"]),
            from_at=None if start is None else datetime.fromisoformat(start),
            to_at=datetime.fromisoformat(data["to"]),
            reason=str(data.get("reason") or ""),
            at=datetime.fromisoformat(data["at"]),
            run_id=data.get("run_id"),
        )
