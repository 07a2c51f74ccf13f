"""Runs: the durable record of one fire, its states, and what a claim hands the engine."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from agentcron.domain.jobs import Job
from agentcron.domain.states import RunState


class RunTrigger(enum.StrEnum):
    """What fired a run: its job's schedule, a person's "run now", or an event posted to the
    job's trigger.
    """

    SCHEDULE = "schedule"
    MANUAL = "manual"
    EVENT = "event"


@dataclass(frozen=True, slots=True)
class Run:
    """The durable record of one fire."""

    id: str
    job_id: str
    session_key: str | None
    fire_at: datetime
    state: RunState
    owner: str | None
    lease_expires_at: datetime | None
    claimed_at: datetime | None
    queued_at: datetime | None
    deferred_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    prompt_ref: dict[str, Any] | None = None
    prompt: str | None = None
    prompt_vars: dict[str, Any] | None = None
    output: str | None = None
    error: str | None = None
    error_details: dict[str, Any] | None = None
    message_id: str | None = None
    usage: dict[str, Any] | None = None
    # delivery jobs' runs: evaluation verdict, target; a fire of a job whose notify policy is
    # not `always` (or a silent outcome): {notify, delivered, held} (domain/notify.py)
    delivery: dict[str, Any] | None = None
    # the turn's tool calls, in order: {name, args, result, ok, duration_ms} (truncated)
    tool_calls: list[dict[str, Any]] | None = None
    # a person's "run now" (`Runs.run_now`), not the schedule: its job's schedule is untouched
    manual: bool = False
    # its job's name when it fired (kept after the job is deleted; None: fired before 0023
    # of a job deleted before it)
    job_name: str | None = None
    # the agent's moves of a job's next fire during this run's turn: {job_id, from, to,
    # reason, at, run_id} each (domain/cadence.py `Reschedule.to_data`)
    reschedules: list[dict[str, Any]] | None = None
    # an event posted to the job's trigger fired it: the event's `webhook-id` and its JSON body
    event_id: str | None = None
    event: str | None = None

    @property
    def trigger(self) -> RunTrigger:
        if self.event_id is not None:
            return RunTrigger.EVENT
        return RunTrigger.MANUAL if self.manual else RunTrigger.SCHEDULE


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One turn, or one run without a turn (an isolated run), as the usage per day counts it:
    when, where, of which job (None: a person's turn), its tokens and cost (None: unknown).
    """

    at: datetime
    session_key: str
    job_id: str | None
    job_name: str | None
    turn: bool  # a turn of the session (else an isolated run)
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None


@dataclass(frozen=True, slots=True)
class FirePlan:
    """What the engine decided for one due job inside a claim transaction."""

    run: list[datetime]  # fires to claim and run, oldest first
    missed: list[datetime]  # fires recorded `missed`
    skipped: list[datetime]  # fires recorded `skipped` (overlap policy)
    next_fire_at: datetime | None
    next_run_at: datetime | None
    # after a long downtime: missed fires not listed one by one (noted on the newest missed run)
    unrecorded_missed: int = 0
    uncounted_missed: bool = False  # a stretch of missed fires was skipped without counting
    # fires recorded `skipped` because their estimate would pass the job's budget, and why
    over_budget: tuple[datetime, ...] = ()
    budget_reason: str | None = None
    # the first of a stretch of fires skipped for the budget (the job's last fire was not
    # skipped): its session gets a notice, the rest only their run records
    budget_notice: bool = False
    # the fires were skipped for the caps of the job's session (not of the job): the claim
    # tells the first of the session's stretch (one notice for all its jobs)
    session_budget: bool = False


@dataclass(frozen=True, slots=True)
class ClaimedFire:
    """A fire this process claimed and must carry to a terminal state.

    A session-turn fire (`job.session_turn`) comes with the turn record the claim opened for
    it (`turn_id`), `deferred` when its session already had a turn open, and the session's
    zone and quiet hours. A `manual` one is a person's "run now", one with an `event_id` an
    event posted to the job's trigger (`event`: its JSON body): either is never late, and its
    end leaves the job's schedule, failure count and life as they are (`asked`).
    """

    run_id: str
    job: Job  # the job as of the claim (after its state was advanced)
    fire_at: datetime
    turn_id: str | None = None
    deferred: bool = False
    session_tz: str = "UTC"
    session_quiet: str | None = None  # the session's quiet hours ("HH:MM-HH:MM"), as claimed
    manual: bool = False
    event_id: str | None = None
    event: str | None = None

    @property
    def asked(self) -> bool:
        """Asked for (a person's "run now", an event), not the schedule's fire."""
        return self.manual or self.event_id is not None


class SessionZone(NamedTuple):
    """What a claim reads of a fire's session: its zone and its quiet hours."""

    tz: str = "UTC"
    quiet_hours: str | None = None


class BudgetSkip(NamedTuple):
    """A fire a claim recorded `skipped` because it would pass its job's budget, to be told
    (a notice in its session, an event).
    """

    job: Job
    run_id: str
    fire_at: datetime
    reason: str
    session: bool = False  # the session's budget (not the job's)


class ClaimResult(NamedTuple):
    """What one claim transaction did."""

    fires: list[ClaimedFire]
    examined: int  # due jobs looked at (== limit means: claim again)
    next_due_at: datetime | None  # earliest armed job after this claim
    budget_skips: tuple[BudgetSkip, ...] = ()  # the first of each stretch, to be told
