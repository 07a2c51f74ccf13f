"""The journal's write records: what one group commit applies (TurnStart, TurnFinish, RunEnd,
InsertJobs and their parts) and what each write returns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentcron.domain.jobs import Job, NewJob
from agentcron.domain.runs import ClaimedFire
from agentcron.domain.sessions import Entry, Message, Session
from agentcron.domain.states import RunState, TurnState


@dataclass(frozen=True, slots=True)
class JobFinish:
    """How a job changes when one of its fires ends (`engine.policies.finish_job`): new values
    for its FINISH_COLUMNS, and whether it is removed (an ended job with `delete_after_run`;
    without it an ended job is kept, done).
    """

    values: dict[str, Any]
    delete: bool = False
    budget_reached: str | None = None  # the job paused at a cap of its budget: why


@dataclass(frozen=True, slots=True)
class Transition:
    """A run state change, applied in batches by the store (group commit)."""

    run_id: str
    state: RunState
    at: datetime
    output: str | None = None
    error: str | None = None
    error_details: dict[str, Any] | None = None
    message_id: str | None = None
    usage: dict[str, Any] | None = None
    prompt_ref: dict[str, Any] | None = None
    prompt: str | None = None
    prompt_vars: dict[str, Any] | None = None
    delivery: dict[str, Any] | None = None
    tool_calls: list[dict[str, Any]] | None = None  # None (not bound): the turn called none


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """How a finished fire changes its job (applied with the run's terminal transition)."""

    job_id: str
    status: RunState
    finished_at: datetime
    error: str | None = None
    delete_after_run: bool = False  # from the claim's snapshot: may need the finisher
    manual: bool = False  # a "run now" or an event: the finisher leaves the schedule as it is
    # its job had a budget at the claim: the run's tokens and cost go to its running figures
    budgeted: bool = False
    tokens: int = 0
    cost_usd: float | None = None
    session_key: str | None = None  # its job's (a budget's notice goes there)
    job_name: str = ""
    # its job's session had a budget at the claim: the run's use goes to the session's figures
    session_budgeted: bool = False

    @property
    def simple(self) -> bool:
        """A plain success/empty: the job update needs no read of the job first (the stamp
        also makes a job with no fire left done, as the finisher would).
        """
        return (
            self.status not in (RunState.FAILED, RunState.CANCELLED)
            and not self.delete_after_run
            and not self.manual
            and not self.budgeted
        )

    @property
    def failed(self) -> bool:
        return self.status is RunState.FAILED


def fire_end(
    fire: ClaimedFire,
    state: RunState,
    at: datetime,
    *,
    output: str | None = None,
    error: str | None = None,
    error_details: dict[str, Any] | None = None,
    usage: dict[str, Any] | None = None,
    message_id: str | None = None,
    delivery: dict[str, Any] | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
) -> tuple[Transition, JobOutcome]:
    """A fire's run ending in `state`, and what its job takes from that end (next fire,
    failures, removal of a finished one-shot): the two are written in one transaction.
    """
    run = Transition(
        fire.run_id,
        state,
        at,
        output=output,
        error=error,
        error_details=error_details,
        usage=usage,
        message_id=message_id,
        delivery=delivery,
        tool_calls=tool_calls or None,
    )
    budgeted = fire.job.policy.budget is not None
    session_budgeted = fire.job.session_budget is not None
    counted = budgeted or session_budgeted
    numbers = usage or {}
    job = JobOutcome(
        fire.job.id,
        state,
        at,
        error=error,
        delete_after_run=fire.job.policy.delete_after_run,
        manual=fire.asked,
        budgeted=budgeted,
        tokens=_count(numbers.get("input_tokens")) + _count(numbers.get("output_tokens"))
        if counted
        else 0,
        cost_usd=_cost(numbers.get("cost_usd")) if counted else None,
        session_key=fire.job.session_key,
        job_name=fire.job.name,
        session_budgeted=session_budgeted,
    )
    return run, job


def _count(value: Any) -> int:
    """A runner's token count (anything else counts 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _cost(value: Any) -> float | None:
    """A runner's cost in dollars (None: unknown)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


@dataclass(frozen=True, slots=True)
class Remember:
    """Entries an isolated run saves in its own session (a delivery job's `cron:{job_id}`),
    created on first use with `channel`/`chat_id`.
    """

    session_key: str
    channel: str
    chat_id: str
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class TurnStart:
    """Begin a turn: take the session's turn lease, append the turn's opening entry, mark the
    turn running (and its fire's run, with `run`) — all in one group-committed transaction.
    """

    session_key: str
    turn_id: str
    owner: str
    at: datetime
    lease_until: datetime
    entry: Entry
    run: Transition | None = None
    # Another session whose turn lease the turn takes too (unified mode: the one lane of the
    # shared memory), so that no turn of that memory starts meanwhile in any process.
    lease_key: str | None = None


@dataclass(frozen=True, slots=True)
class TurnStarted:
    """What a TurnStart did: `message` and `session` when it began; else `busy_until`, when the
    lease another process holds on the session runs out (nothing was written).
    """

    message: Message | None
    session: Session | None
    busy_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class TurnFinish:
    """End a turn: its closing entry, its outcome, the session lease let go (when this owner
    holds it for this turn), and its fire's run and job bookkeeping — in one transaction.
    `entry` None writes no closing entry (the turn never began).
    """

    session_key: str
    turn_id: str
    owner: str
    at: datetime
    state: TurnState
    entry: Entry | None
    error: str | None = None
    error_details: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    run: Transition | None = None
    outcome: JobOutcome | None = None
    # Entries written before the closing entry (a compaction's summary, the turn's tool
    # calls); only with `entry`.
    before: tuple[Entry, ...] = ()
    lease_key: str | None = None  # the other session whose lease the turn's start took


@dataclass(frozen=True, slots=True)
class TurnFinished:
    """What a TurnFinish wrote: the closing entry, and whether the fire's job was removed."""

    message: Message | None
    job_deleted: bool = False
    budget_reached: str | None = None  # its job paused at a cap of its budget: why
    session_budget_reached: str | None = None  # its run reached a cap of its session's: why


@dataclass(frozen=True, slots=True)
class RunEnd:
    """A fire that is not a turn ended (or moved): its run's transition, and for a terminal
    one, how it changes its job.
    """

    run: Transition
    outcome: JobOutcome | None = None
    remember: Remember | None = None  # a delivery job's exchange, saved in the same transaction


@dataclass(frozen=True, slots=True)
class ArmedJob:
    """A new job with its id and first fire already computed by the caller."""

    id: str
    new: NewJob
    next_fire_at: datetime | None
    next_run_at: datetime | None


@dataclass(frozen=True, slots=True)
class InSession:
    """A job of an existing session (the API's create), checked and armed inside the insert's
    transaction, so that the request costs no read of its own:

    - `key` must name a stored session; when it does not, nothing is written and the result
      is refused with `SessionNotFoundError`.
    - `shared` (unified mode: the session web chats' jobs bind to) is created when missing,
      titled `shared_title`.
    - `arm(tz)` builds the job from the zone of session `key`: a transaction callback, pure
      (no I/O; its `now` is fixed by the caller). What it raises is the request's error: the
      result is refused with it, nothing of the job is written, the rest of the batch goes on.
    """

    key: str
    arm: Callable[[str], ArmedJob]
    shared: str | None = None
    shared_title: str | None = None


@dataclass(frozen=True, slots=True)
class InsertJobs:
    """Create jobs (all or none: a conflict fails this write alone), and with `in_session`
    one more, checked and armed in the transaction (see `InSession`).
    """

    armed: Sequence[ArmedJob]
    at: datetime
    max_jobs: int | None = None  # refuse (JobLimitError) past this many non-system jobs
    in_session: InSession | None = None


@dataclass(frozen=True, slots=True)
class JobsInserted:
    """The jobs an InsertJobs stored (or found stored, for an idempotency-key duplicate).

    `refused`: an `InSession` create that was turned down before anything of it was written
    (its session is missing, its request is wrong); the caller raises it.
    """

    jobs: list[Job]
    refused: Exception | None = None


Write = TurnStart | TurnFinish | RunEnd | InsertJobs
"""One item of a group commit."""

WriteResult = TurnStarted | TurnFinished | JobsInserted | None
