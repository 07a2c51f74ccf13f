"""Alerts on a job that should not be left alone: pure rules (no I/O, no clock read).

A job is **overdue** when a fire it should have run did not reach a terminal run within its
grace: its next fire is due longer ago than the grace and nothing claimed it (an engine down,
a managed wake that never came), or a fire it claimed is still open longer than the turn
timeout plus the grace (a turn or run that never ends). It is **failing** when its last N
runs failed (`consecutive_failures` >= N), and **ending** when its `end_at` falls within the
warning window or it has few runs left (`remaining_runs`). Each is one episode: raised once,
kept on the job row, cleared (overdue, failing) when the job is no longer so.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

from agentcron.domain.jobs import AnySpec, Job
from agentcron.schedule import AtSpec, EverySpec, next_fire


class AlertKind(enum.StrEnum):
    OVERDUE = "overdue"
    FAILING = "failing"
    ENDING = "ending"


class OverdueReason(enum.StrEnum):
    NOT_FIRED = "not_fired"  # its due fire was not claimed within the grace
    RUN_OPEN = "run_open"  # a claimed fire is still open past the turn timeout + the grace


@dataclass(frozen=True, slots=True)
class OverdueCandidate:
    """A job the store found late (`AlertLedger.overdue_candidates`): its due time when no fire
    of it was claimed, and its oldest open run, when one is older than the store was asked.
    """

    job: Job
    open_run_id: str | None = None
    open_since: datetime | None = None  # that run's fire_at


def grace_of(spec: AnySpec, at: datetime | None, minimum: timedelta, ratio: float) -> timedelta:
    """How late a fire may be before its job is overdue: `max(minimum, ratio x interval)`, the
    interval being the schedule's gap after `at` (its next fire): an `every` job's period, a
    cron or days job's distance to the following fire; a one-shot has the minimum.
    """
    if isinstance(spec, EverySpec):
        return max(minimum, spec.interval * ratio)
    if isinstance(spec, AtSpec) or at is None:
        return minimum
    following = next_fire(spec, at)
    if following is None:
        return minimum
    return max(minimum, (following - at) * ratio)


def overdue_reason(
    found: OverdueCandidate,
    now: datetime,
    *,
    minimum: timedelta,
    ratio: float,
    open_limit: timedelta | None,
) -> OverdueReason | None:
    """Whether `found` is overdue at `now`, and why; None when it is within its grace.
    `open_limit` is how long a claimed fire may stay open before the grace starts (the turn
    timeout; None: no limit, so an open run never makes its job overdue).
    """
    job = found.job
    grace = grace_of(job.spec, job.next_fire_at, minimum, ratio)
    if (
        open_limit is not None
        and found.open_since is not None
        and now - found.open_since > open_limit + grace
    ):
        return OverdueReason.RUN_OPEN
    if job.enabled and job.next_run_at is not None and now - job.next_run_at > grace:
        return OverdueReason.NOT_FIRED
    return None


def is_ending(job: Job, now: datetime, *, window: timedelta, runs_left: int) -> bool:
    """Its end is near: `end_at` within `window` of `now`, or at most `runs_left` runs left."""
    end_at = job.policy.end_at
    if end_at is not None and end_at <= now + window:
        return True
    return job.remaining_runs is not None and job.remaining_runs <= runs_left


def alert_text(kind: AlertKind | str, job: Job, detail: str = "") -> str:
    """The plain text a channel sends for an alert of `job`."""
    name = job.name
    match kind:
        case AlertKind.OVERDUE:
            return f"Automation “{name}” is overdue: {detail}" if detail else f"“{name}” is overdue"
        case AlertKind.FAILING:
            return f"Automation “{name}” is failing: {detail}"
        case AlertKind.ENDING:
            return f"Automation “{name}” {detail}; renew it to keep it running"
        case _:
            return f"Automation “{name}” is back to normal ({detail})"
