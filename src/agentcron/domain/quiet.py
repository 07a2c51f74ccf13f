"""What a job's fire does in its session's quiet hours (pure, no I/O): the choice, and what
its run keeps of it. The window itself is schedule math (`schedule/quiet.py`).
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any


class QuietMode(enum.StrEnum):
    """A job's choice for a fire due in its session's quiet hours."""

    HOLD = "hold"  # the turn runs; its channel delivery waits until the quiet hours end
    SILENT = "silent"  # the turn runs; its reply is never delivered
    WAIT = "wait"  # the fire waits until the quiet hours end, then runs


def quiet_record(mode: QuietMode, until: datetime) -> dict[str, Any]:
    """What the run's `delivery` record keeps about quiet hours (its `quiet` part)."""
    return {"mode": mode.value, "until": until.isoformat()}
