"""Time-zone lookup and wall-clock -> instant resolution under a DST policy (`DstGap`,
`DstFold`)."""

from __future__ import annotations

import enum
import re
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentcron.schedule.errors import InvalidZoneError

# Largest wall-clock shift we account for around a transition (Antarctica/Troll shifts 2h).
MAX_SHIFT = timedelta(hours=3)


class DstGap(enum.StrEnum):
    """What a scheduled wall-clock time does on a day the clocks skip it (spring forward)."""

    SHIFT = "shift"  # the default: it fires at the first valid instant after it
    SKIP = "skip"  # it does not fire that day


class DstFold(enum.StrEnum):
    """What a scheduled wall-clock time does on a day the clocks repeat it (fall back)."""

    FIRST = "first"  # the default: at its first occurrence only
    LAST = "last"  # at its second occurrence only
    BOTH = "both"  # at both


@lru_cache(maxsize=512)
def get_zone(name: str) -> ZoneInfo:
    """Return the IANA zone `name`, or raise InvalidZoneError naming it."""
    try:
        if not name or name != name.strip():
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidZoneError(
            f"unknown time zone {name!r}: expected an IANA name like 'Europe/Berlin' or 'UTC'"
        ) from exc


def zone_label(name: str) -> str:
    """How a zone is shown: its IANA name, but a fixed offset `Etc/GMT-2` as `UTC+2`.

    (The `Etc/GMT` names invert the sign, POSIX style: `Etc/GMT-2` is two hours east of UTC.)
    """
    match = re.match(r"^Etc/GMT([+-])(\d{1,2})$", name)
    if match is None:
        return name
    return f"UTC{'-' if match[1] == '+' else '+'}{match[2]}"


def to_wall(instant: datetime, tz: ZoneInfo) -> datetime:
    """The naive local wall-clock time of an aware instant in `tz`."""
    return instant.astimezone(tz).replace(tzinfo=None)


def wall_instants(wall: datetime, tz: ZoneInfo) -> tuple[datetime, ...]:
    """The UTC instants at which naive wall-clock time `wall` occurs in `tz`.

    One instant normally; two (earlier first) inside a fall-back fold; none inside a
    spring-forward gap.
    """
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if first == second:
        return (first,)
    if to_wall(first, tz) == wall:
        return (first, second)
    return ()


def gap_end(wall: datetime, tz: ZoneInfo) -> datetime:
    """The first valid instant after a wall-clock time that falls in a spring-forward gap."""
    # PEP 495: in a gap, fold=1 applies the post-transition offset (earlier UTC) and fold=0
    # the pre-transition one (later UTC); the transition lies between them.
    lo = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    hi = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    lo_s, hi_s = 0, int((hi - lo).total_seconds())
    while lo_s < hi_s:
        mid = (lo_s + hi_s) // 2
        if to_wall(lo + timedelta(seconds=mid), tz) > wall:
            hi_s = mid
        else:
            lo_s = mid + 1
    return lo + timedelta(seconds=lo_s)


def resolve_wall(
    wall: datetime,
    tz: ZoneInfo,
    *,
    gap: DstGap = DstGap.SHIFT,
    fold: DstFold = DstFold.FIRST,
) -> tuple[datetime, ...]:
    """Instants (earlier first) at which a scheduled wall-clock time fires under a DST policy.

    - a time that occurs once: that instant, whatever the policy;
    - in a gap: `shift`: the first valid instant after it; `skip`: none;
    - in a fold: `first`: the first occurrence; `last`: the second; `both`: both.
    """
    found = wall_instants(wall, tz)
    if not found:
        return (gap_end(wall, tz),) if gap is DstGap.SHIFT else ()
    if len(found) == 2 and fold is not DstFold.BOTH:
        return found[:1] if fold is DstFold.FIRST else found[1:]
    return found


def near_transition(instant: datetime, tz: ZoneInfo) -> bool:
    """True when `tz` changes its UTC offset within MAX_SHIFT of `instant`."""
    offset = instant.astimezone(tz).utcoffset()
    return (instant - MAX_SHIFT).astimezone(tz).utcoffset() != offset or (
        instant + MAX_SHIFT
    ).astimezone(tz).utcoffset() != offset


def require_aware(value: datetime, what: str) -> datetime:
    """Return `value` converted to UTC, or raise if it is naive."""
    from agentcron.schedule.errors import InvalidSpecError

    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidSpecError(f"{what} must be a timezone-aware datetime, got naive {value!r}")
    return value.astimezone(UTC)
