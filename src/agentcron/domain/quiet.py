"""What a job's fire does in its session's quiet hours (pure, no I/O): the choice, whether an
instant is in a session's quiet hours, and what its run keeps of it. The window itself is
schedule math (`schedule/quiet.py`).
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from agentcron.schedule.quiet import parse_quiet_hours, quiet_until

# The meta key of a reply its session's quiet hours hold: when its channels may send it (ISO).
QUIET_UNTIL = "quiet_until"


class QuietMode(enum.StrEnum):
    """A job's choice for a fire due in its session's quiet hours."""

    HOLD = "hold"  # the turn runs; its channel delivery waits until the quiet hours end
    SILENT = "silent"  # the turn runs; its reply is never delivered
    WAIT = "wait"  # the fire waits until the quiet hours end, then runs


def quiet_end(hours: str | None, tz: str, at: datetime) -> datetime | None:
    """When the quiet hours `hours` ("HH:MM-HH:MM" in zone `tz`) around `at` end; None when
    there are none or `at` is not in them.
    """
    if not hours:
        return None
    return quiet_until(parse_quiet_hours(hours), at, tz)


def held_until(meta: dict[str, Any]) -> datetime | None:
    """When a reply (its entry's `meta`) may go out, when its quiet hours hold it."""
    value = meta.get(QUIET_UNTIL)
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def quiet_record(mode: QuietMode, until: datetime) -> dict[str, Any]:
    """What the run's `delivery` record keeps about quiet hours (its `quiet` part): what the
    job's choice did (`hold`: its delivery waits until `until`; `silent`: never delivered;
    `wait`: the fire waited until `until`).
    """
    return {"mode": mode.value, "until": until.isoformat()}
