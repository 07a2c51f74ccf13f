"""Jobs: kinds, policies, the job record and a recall's view of it."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agentcron.domain.budgets import Budget, ContextMode, Spend
from agentcron.domain.cadence import CadenceBounds, Reschedule
from agentcron.domain.gates import Gate
from agentcron.domain.notify import Notify
from agentcron.domain.quiet import QuietMode
from agentcron.domain.states import RunState
from agentcron.schedule import AtSpec, CronSpec, DaysSpec, EverySpec

AnySpec = CronSpec | EverySpec | AtSpec | DaysSpec


class JobKind(enum.StrEnum):
    AGENT_TURN = "agent_turn"
    RECALL = "recall"
    SYSTEM_EVENT = "system_event"


class CreatedBy(enum.StrEnum):
    USER = "user"
    AGENT = "agent"
    API = "api"
    SYSTEM = "system"


class RecallCallType(enum.StrEnum):
    """How the agent asked for a recall (seed 003): kept with it, shown by `list` and the API."""

    ONCE = "once"
    RECURRING = "recurring"
    IMMEDIATE = "immediate"


class JobStatus(enum.StrEnum):
    """Where a job stands: armed or waiting to be (active), paused, or done (its schedule is
    spent: a one-shot that ran, a job past its last run; kept `retention_age`, then removed).
    """

    ACTIVE = "active"
    PAUSED = "paused"
    DONE = "done"


class Overlap(enum.StrEnum):
    """What a fire does while the previous fire of the same job is still queued or running."""

    DEFER = "defer"  # wait for it, then run every fire in turn
    SKIP = "skip"  # record `skipped`
    # the default: at most one fire waits; further ones are `skipped`, so a busy or blocked
    # session never turns into a burst of stale turns
    BUFFER_ONE = "buffer_one"


class Catchup(enum.StrEnum):
    """What happens to fires that came due while no engine was running."""

    SKIP = "skip"  # record them `missed`
    LATEST = "latest"  # run the most recent one, record the rest `missed`
    ALL = "all"  # run every one inside the catch-up window


@dataclass(frozen=True, slots=True)
class JobPolicy:
    """Per-job policies; defaults are the documented ones (README "Jobs and runs")."""

    overlap: Overlap = Overlap.BUFFER_ONE
    catchup: Catchup = Catchup.LATEST
    catchup_window: timedelta = timedelta(hours=24)
    max_failures: int = 5  # consecutive failures before auto-pause; 0 = never
    max_runs: int | None = None
    end_at: datetime | None = None
    delete_after_run: bool = False
    jitter: bool = False
    notify: Notify = Notify.ALWAYS  # when its outcomes are delivered (domain/notify.py)
    # what a fire due in its session's quiet hours does (domain/quiet.py)
    quiet: QuietMode = QuietMode.HOLD
    # how far the agent may move its next fire (domain/cadence.py); None: it may not
    cadence: CadenceBounds | None = None
    gate: Gate | None = None  # a pre-check run before the agent (domain/gates.py)
    budget: Budget | None = None  # its caps of tokens and money (domain/budgets.py)


@dataclass(frozen=True, slots=True)
class NewJob:
    """What a caller gives to create a job."""

    name: str
    spec: AnySpec
    message: str = ""
    session_key: str | None = None
    kind: JobKind = JobKind.AGENT_TURN
    created_by: CreatedBy = CreatedBy.API
    policy: JobPolicy = field(default_factory=JobPolicy)
    idempotency_key: str | None = None
    enabled: bool = True
    model: str | None = None  # the model its turns run on; None = the runner's default
    runner_url: str | None = None  # its fires' own runner URL; None = the session's or default
    # what history its turns get, its own history budget in tokens, the tools they may use
    context: ContextMode = ContextMode.CONTINUE
    history_tokens: int | None = None
    tools: tuple[str, ...] | None = None  # None: every tool
    # recalls the agent scheduled: its call type and its whole note (the name is cut to 80)
    call_type: RecallCallType | None = None
    internal_comment: str | None = None
    # delivery jobs only (their result goes to `channel`/`to`)
    deliver: bool | None = None
    channel: str | None = None
    to: str | None = None
    channel_meta: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Job:
    """A stored job."""

    id: str
    name: str
    kind: JobKind
    session_key: str | None
    spec: AnySpec
    message: str
    enabled: bool
    paused_reason: str | None
    paused_at: datetime | None
    created_by: CreatedBy
    policy: JobPolicy
    next_fire_at: datetime | None  # nominal time of the next fire (the fire's identity)
    next_run_at: datetime | None  # when it is due: nominal + jitter / backoff; None = not armed
    last_run_at: datetime | None
    last_status: RunState | None
    consecutive_failures: int
    run_count: int
    remaining_runs: int | None
    idempotency_key: str | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    version: int
    created_at: datetime
    updated_at: datetime
    deliver: bool | None = None
    channel: str | None = None
    to: str | None = None
    channel_meta: dict[str, Any] | None = None
    model: str | None = None  # the model its turns run on; None = the runner's default
    runner_url: str | None = None  # its fires' own runner URL; None = the session's or default
    call_type: RecallCallType | None = None  # a recall's, as the agent asked for it
    internal_comment: str | None = None  # a recall's note, whole
    finished_at: datetime | None = None  # when its last fire ended with no fire left (done)
    # its alerts (service/alerts.py), each sent once per episode: since when it is overdue
    # (a fire did not end within its grace) / failing (`consecutive_failures` past N); when
    # its coming end was announced (cleared by a renewal)
    overdue_since: datetime | None = None
    failing_since: datetime | None = None
    ending_warned_at: datetime | None = None
    # the agent's last move of its next fire (domain/cadence.py): the next fire is that move's
    # while `next_fire_at` is its `to_at` (`moved`)
    rescheduled: Reschedule | None = None

    @property
    def moved(self) -> Reschedule | None:
        """The agent's move that set the next fire, while that fire is still to come."""
        r = self.rescheduled
        return r if r is not None and self.next_fire_at == r.to_at else None

    # its trigger's secret (`whsec_...`, domain/triggers.py): events posted to its trigger URL
    # signed with it fire it; None = no trigger. Never in a repr nor a view.
    trigger_secret: str | None = field(default=None, repr=False)
    context: ContextMode = ContextMode.CONTINUE  # what history its turns get
    history_tokens: int | None = None  # its turns' history budget (None: the runner's)
    tools: tuple[str, ...] | None = None  # the tools its turns may use (None: every tool)
    spend: Spend | None = None  # a budgeted job's running figures (domain/budgets.py)
    # its session's budget and running figures, as a claim read them (only a claim fills
    # them, and only for a session with a budget): a fire checks them, its end adds to them
    session_budget: Budget | None = None
    session_spend: Spend | None = None

    @property
    def status(self) -> JobStatus:
        if self.finished_at is not None:
            return JobStatus.DONE
        return JobStatus.ACTIVE if self.enabled else JobStatus.PAUSED

    @property
    def trigger(self) -> bool:
        """Its trigger is on: an event posted to its trigger URL fires it."""
        return self.trigger_secret is not None

    @property
    def bound(self) -> bool:
        return self.session_key is not None

    @property
    def has_target_fields(self) -> bool:
        """Has delivery fields (`deliver`/`channel`/`to`): such a job runs isolated and its
        result goes to that target, even with a session (engine/isolated.py).
        """
        return bool(self.deliver or self.channel or self.to or self.channel_meta)

    @property
    def session_turn(self) -> bool:
        """A bound user job or a recall: its fire is a turn of its session (seed 001)."""
        return (
            self.session_key is not None
            and not self.has_target_fields
            and self.kind in (JobKind.AGENT_TURN, JobKind.RECALL)
        )


class RecallState(enum.StrEnum):
    """Where a recall stands (seed 003): pending (its job is armed), paused (its job stopped,
    e.g. auto-paused after failures: resumable or replaceable), fired or cancelled.
    """

    PENDING = "pending"
    PAUSED = "paused"
    FIRED = "fired"  # a one-time recall ran (whatever its outcome)
    CANCELLED = "cancelled"  # cancelled by the agent, a person, or its session's deletion


@dataclass(frozen=True, slots=True)
class Recall:
    """A session's recall as the agent and the API read it: the pending one or one that ended."""

    id: str
    session_key: str
    name: str
    message: str
    spec: AnySpec
    state: RecallState
    created_at: datetime
    run_count: int = 0
    last_run_at: datetime | None = None
    last_status: RunState | None = None
    next_fire_at: datetime | None = None  # pending only
    ended_at: datetime | None = None  # fired / cancelled only
    call_type: RecallCallType | None = None
    internal_comment: str | None = None
    paused_reason: str | None = None  # paused only: why (after failures: the last error)
    paused_at: datetime | None = None

    @classmethod
    def of_job(cls, job: Job, state: RecallState, ended_at: datetime | None = None) -> Recall:
        """The recall a `recall` job is (pending or paused), or was when it ended at
        `ended_at`.
        """
        paused = state is RecallState.PAUSED
        return cls(
            id=job.id,
            session_key=job.session_key or "",
            name=job.name,
            message=job.message,
            spec=job.spec,
            state=state,
            created_at=job.created_at,
            run_count=job.run_count,
            last_run_at=job.last_run_at,
            last_status=job.last_status,
            next_fire_at=job.next_fire_at if state is RecallState.PENDING else None,
            ended_at=ended_at,
            call_type=job.call_type,
            internal_comment=job.internal_comment,
            paused_reason=job.paused_reason if paused else None,
            paused_at=job.paused_at if paused else None,
        )

    @classmethod
    def live(cls, job: Job) -> Recall:
        """The recall a stored `recall` job is: pending, or paused when its job is disabled."""
        return cls.of_job(job, RecallState.PENDING if job.enabled else RecallState.PAUSED)
