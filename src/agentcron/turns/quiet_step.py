"""A fire in its session's quiet hours (domain/quiet.py): whether a `wait` fire waits before
its turn (and until when), and what a fire's reply does when it is ready in quiet hours
(`hold`: its channel delivery waits until they end; `silent`: it is never delivered).
A person's "run now" is never quiet: they asked for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentcron.domain.notify import Held, delivery_record
from agentcron.domain.quiet import QuietMode, quiet_end, quiet_record
from agentcron.domain.runs import ClaimedFire


def quiet_wait(fire: ClaimedFire, now: datetime) -> datetime | None:
    """When a `quiet = wait` fire may begin: the end of its session's quiet hours around its
    time (a fire claimed ahead: its `fire_at`); None: it goes on now.
    """
    if fire.manual or fire.job.policy.quiet is not QuietMode.WAIT:
        return None
    return quiet_end(fire.session_quiet, fire.session_tz, max(now, fire.fire_at))


@dataclass(frozen=True, slots=True)
class QuietReply:
    """What quiet hours do to a fire's reply ready now."""

    held: Held | None  # the notify hold, or `quiet` for a silent job in its quiet hours
    delivery: dict[str, Any] | None  # the run's delivery record
    hold_until: datetime | None  # its channel delivery waits until then (None: at once)


def quiet_reply(
    fire: ClaimedFire,
    now: datetime,
    held: Held | None,
    delivery: dict[str, Any] | None,
    waited: dict[str, Any] | None,
) -> QuietReply:
    """The reply of `fire`, ready at `now`, with its notify hold `held` and its run's delivery
    record so far (`delivery`); `waited`: a `wait` fire's record of its wait. A reply its
    notify policy holds stays held; in quiet hours a `silent` job's is held as `quiet`, any
    other job's is delivered when they end.
    """
    if waited is not None:
        delivery = (delivery or delivery_record(fire.job.policy.notify, held)) | {"quiet": waited}
    until = None if fire.manual else quiet_end(fire.session_quiet, fire.session_tz, now)
    if until is None or held is not None:
        return QuietReply(held, delivery, None)
    mode = fire.job.policy.quiet
    if mode is QuietMode.SILENT:
        record = delivery_record(fire.job.policy.notify, Held.QUIET)
        return QuietReply(Held.QUIET, record | {"quiet": quiet_record(mode, until)}, None)
    # `hold`, or a `wait` fire whose reply is ready after its quiet hours began again
    record = delivery or delivery_record(fire.job.policy.notify, None)
    return QuietReply(None, record | {"quiet": quiet_record(QuietMode.HOLD, until)}, until)
