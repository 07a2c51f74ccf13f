"""The store's records and enums: jobs, runs, fires, sessions, turns, transcript entries,
approvals."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, NamedTuple

from agentcron.schedule import AtSpec, CronSpec, EverySpec

AnySpec = CronSpec | EverySpec | AtSpec


class JobKind(enum.StrEnum):
    AGENT_TURN = "agent_turn"
    RECALL = "recall"
    SYSTEM_EVENT = "system_event"


class CreatedBy(enum.StrEnum):
    USER = "user"
    AGENT = "agent"
    API = "api"
    SYSTEM = "system"


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


class RunState(enum.StrEnum):
    CLAIMED = "claimed"
    QUEUED = "queued"
    DEFERRED = "deferred"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EMPTY = "empty"
    MISSED = "missed"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self not in ACTIVE_STATES


# The two ways a fire or turn is cut off (recorded as its error; never re-run), one text each.
STOPPED_MID_TURN = "interrupted: agentcron stopped while this turn was running; not re-run"
DIED_MID_TURN = "interrupted: the process running this turn stopped before it finished; not re-run"

ACTIVE_STATES = frozenset({RunState.CLAIMED, RunState.QUEUED, RunState.DEFERRED, RunState.RUNNING})
TERMINAL_STATES = frozenset(RunState) - ACTIVE_STATES
OUTCOME_STATES = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.EMPTY})


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
    """Where a recall stands (seed 003): pending (its job is armed), fired or cancelled."""

    PENDING = "pending"
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

    @classmethod
    def of_job(cls, job: Job, state: RecallState, ended_at: datetime | None = None) -> Recall:
        """The recall a `recall` job is (pending), or was when it ended at `ended_at`."""
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
        )


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
    delivery: dict[str, Any] | None = None  # delivery jobs' runs: evaluation verdict, target
    # the turn's tool calls, in order: {name, args, result, ok, duration_ms} (truncated)
    tool_calls: list[dict[str, Any]] | None = None


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


@dataclass(frozen=True, slots=True)
class ClaimedFire:
    """A fire this process claimed and must carry to a terminal state.

    A session-turn fire (`job.session_turn`) comes with the turn record the claim opened for
    it (`turn_id`), `deferred` when its session already had a turn open, and the session's zone.
    """

    run_id: str
    job: Job  # the job as of the claim (after its state was advanced)
    fire_at: datetime
    turn_id: str | None = None
    deferred: bool = False
    session_tz: str = "UTC"


class ClaimResult(NamedTuple):
    """What one claim transaction did."""

    fires: list[ClaimedFire]
    examined: int  # due jobs looked at (== limit means: claim again)
    next_due_at: datetime | None  # earliest armed job after this claim


class TurnState(enum.StrEnum):
    QUEUED = "queued"
    DEFERRED = "deferred"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EMPTY = "empty"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    @property
    def terminal(self) -> bool:
        return self not in (TurnState.QUEUED, TurnState.DEFERRED, TurnState.RUNNING)

    @property
    def run_state(self) -> RunState:
        """The state a fire's run ends in when its turn ends in this one: a fire's turn and
        its run end together, in the same state. ValueError for a state that is not an end.
        """
        state = _RUN_END_OF_TURN_END.get(self)
        if state is None:
            raise ValueError(f"{self.value!r} is not an end state of a turn")
        return state


# The one relation between the two state sets (docs/architecture.md "Run and turn states"):
# a turn that ran ends in the same state as its run; a run has three more ends a turn never
# reaches (it was missed or skipped before its turn began: that turn is cancelled).
_RUN_END_OF_TURN_END = {
    TurnState.SUCCEEDED: RunState.SUCCEEDED,
    TurnState.FAILED: RunState.FAILED,
    TurnState.EMPTY: RunState.EMPTY,
    TurnState.CANCELLED: RunState.CANCELLED,
    TurnState.INTERRUPTED: RunState.INTERRUPTED,
}
_TURN_END_OF_UNSTARTED_RUN = {
    RunState.FAILED: TurnState.FAILED,
    RunState.CANCELLED: TurnState.CANCELLED,
    RunState.MISSED: TurnState.CANCELLED,
    RunState.SKIPPED: TurnState.CANCELLED,
    RunState.INTERRUPTED: TurnState.INTERRUPTED,
}


def unstarted_turn_end(state: RunState) -> TurnState:
    """The state a fire's turn ends in when its run ends in `state` before the turn began
    (missed after waiting, unrenderable prompt, session gone). ValueError for other states.
    """
    turn = _TURN_END_OF_UNSTARTED_RUN.get(state)
    if turn is None:
        raise ValueError(f"a run does not end in {state.value!r} before its turn began")
    return turn


@dataclass(frozen=True, slots=True)
class Session:
    """A conversation and the execution context its bound jobs resolve at fire time."""

    key: str
    channel: str
    chat_id: str
    channel_meta: dict[str, Any] | None
    title: str | None
    tz: str
    turn_owner: str | None
    turn_id: str | None
    turn_lease_expires_at: datetime | None
    created_at: datetime
    updated_at: datetime


class Role(enum.StrEnum):
    """Who a transcript entry is from (`messages.role`)."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"  # a tool call a turn made: meta call_id/name/args, content = its result
    SUMMARY = "summary"  # a compaction of the older conversation


@dataclass(frozen=True, slots=True)
class Message:
    """One transcript entry."""

    id: str
    session_key: str
    seq: int
    role: Role
    content: str
    meta: dict[str, Any]
    created_at: datetime


class TurnSource(enum.StrEnum):
    """What started a turn."""

    USER = "user"
    AUTOMATION = "automation"
    RECALL = "recall"
    HOOK = "hook"


@dataclass(frozen=True, slots=True)
class Turn:
    """One agent execution inside a session (a user message or a fire)."""

    id: str
    session_key: str
    source: TurnSource
    state: TurnState
    run_id: str | None
    content: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    error_details: dict[str, Any] | None
    usage: dict[str, Any] | None
    reply_message_id: str | None
    owner: str | None = None  # the process that runs it; None = released for another to adopt


@dataclass(frozen=True, slots=True)
class Entry:
    """A transcript entry to append (its seq and id are assigned in the transaction)."""

    role: Role
    content: str
    meta: dict[str, Any]


@dataclass(frozen=True, slots=True)
class MemoryScope:
    """Sessions whose transcripts are one memory (unified mode: `unified:default` and every
    `websocket:*` thread): a turn of any of them gets their entries as one timeline.
    """

    keys: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.keys and not self.prefixes:
            raise ValueError("a memory scope needs keys or key prefixes")
        if any(not p for p in self.prefixes):
            raise ValueError("a key prefix must not be empty")


Decision = Literal["approve", "deny"]


class ApprovalState(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Approval:
    """One tool call waiting for (or past) a person's decision (its transitions are
    `agentcron.agent.approvals`).
    """

    id: str
    session_key: str | None
    turn_id: str | None
    tool: str
    args: dict[str, Any]
    requested_at: datetime
    expires_at: datetime
    state: ApprovalState = ApprovalState.PENDING
    decision: Decision | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None

    @property
    def pending(self) -> bool:
        return self.state is ApprovalState.PENDING
