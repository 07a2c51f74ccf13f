"""The runner protocol: what executes a turn of a session, plus an adapter for plain callables.

A turn holds one of the engine's `max_concurrent_runs` slots while its runner works. A runner
that must wait for something outside the turn (a person's approval, a human reply, an external
job) can give its slot back for that wait with `paused()`:

    async with paused():
        decision = await wait_for_a_person()

While paused the turn still holds its session (later turns of the session wait behind it), is
counted as `awaiting_approval` instead of `turns_in_runner`, and its `turn_timeout` clock
stops: the paused time does not count against it (the wait needs a bound of its own, as an
approval has its timeout). On leaving the block the turn takes a slot again, waiting for one
like a turn that starts (counted as `awaiting_slot`); a stop or a shutdown still reaches it at
any point. A delivery job's isolated run pauses the same way (counted in the same
`awaiting_approval` / `awaiting_slot`): both run in a `runtime.execution.Execution`, which is
the pause. Outside a turn or an isolated run (a test calling the runner directly) `paused()`
does nothing. The built-in agent's tool gate (`agent/gate.py`) uses it around an approval
wait only.

A runner reports each tool call as it happens with `tool_ran(record)`: a turn that is stopped,
times out or is cut by a shutdown before the runner returns still keeps those calls in its
transcript and run record (an `Outcome` the runner returns carries its own `tools`). The
built-in runner reports a call as it starts (no result yet) and again with its result.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from agentcron.domain.attachments import Attachment
from agentcron.domain.jobs import JobKind
from agentcron.domain.sessions import TurnSource as TurnSource
from agentcron.domain.states import RunState, TurnState

if TYPE_CHECKING:
    from agentcron.domain.jobs import Job
    from agentcron.domain.runs import ClaimedFire


@dataclass(frozen=True, slots=True)
class Trigger:
    """The inbound session event one fire produces."""

    run_id: str
    job_id: str
    job_name: str
    kind: str
    session_key: str | None
    message: str
    fire_at: datetime
    scheduled_by: str = "agentcron"
    event_id: str | None = None  # an event posted to the job's trigger fired it
    event: str | None = None  # that event's JSON body


def fire_source(job: Job) -> TurnSource:
    """What kind of turn a job's fire is: a recall, or an automation."""
    return TurnSource.RECALL if job.kind is JobKind.RECALL else TurnSource.AUTOMATION


def fire_trigger(fire: ClaimedFire) -> Trigger:
    """The inbound session event a fire produces (what a system handler or a plain-callable
    runner gets).
    """
    job = fire.job
    return Trigger(
        run_id=fire.run_id,
        job_id=job.id,
        job_name=job.name,
        kind=job.kind.value,
        session_key=job.session_key,
        message=job.message,
        fire_at=fire.fire_at,
        event_id=fire.event_id,
        event=fire.event,
    )


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """The session a turn runs in: its key and the execution context resolved from the store."""

    key: str
    channel: str = "api"
    chat_id: str = ""
    channel_meta: dict[str, Any] | None = None
    title: str | None = None
    tz: str = "UTC"


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One transcript entry as the runner sees it.

    Roles: "user", "assistant", "system"; "tool" (a tool call: `meta` has call_id, name, args;
    `content` is its result) and "summary" (a compaction of the older conversation).
    """

    role: str
    content: str
    meta: dict[str, Any] = field(default_factory=dict)
    at: datetime | None = None  # when it was written (None: not known, e.g. a fresh summary)


@dataclass(frozen=True, slots=True)
class ToolRecord:
    """One tool call a turn made, with its result (or error text when `ok` is False)."""

    call_id: str
    name: str
    args: dict[str, Any]
    result: str
    ok: bool = True  # False: the tool failed, or the call was denied (policy, person, timeout)
    duration_ms: int | None = None  # None: not measured (a runner of your own)


# The result a call keeps when its turn ended before the tool answered.
NO_RESULT = "(no result: the turn ended before the tool answered)"


class ToolLog:
    """The tool calls a runner call reported so far (`tool_ran`), in the order they were first
    reported; a later report of the same call id (its result) replaces the earlier one.
    """

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: dict[str, ToolRecord] = {}

    def add(self, record: ToolRecord) -> None:
        self._calls[record.call_id] = record

    @property
    def records(self) -> tuple[ToolRecord, ...]:
        return tuple(self._calls.values())


# The tool log of the runner call running in this context (the guard of a turn or an isolated
# run sets it; tasks the runner starts inherit it). None outside them.
turn_tools: ContextVar[ToolLog | None] = ContextVar("agentcron_turn_tools", default=None)


def tool_ran(record: ToolRecord) -> None:
    """Report a tool call of the turn as it happens: started (its `result` saying there is none
    yet, `ok` False) or done; a later report of its `call_id` replaces the earlier one. If the
    turn is stopped, times out or is cut by a shutdown before the runner returns, the calls
    reported so far are saved with its end (transcript and run record). An `Outcome` the runner
    returns with `tools` is saved as it is; one without takes the reported calls. A no-op
    outside a turn or an isolated run.
    """
    log = turn_tools.get()
    if log is not None:
        log.add(record)


@dataclass(frozen=True, slots=True)
class TurnInput:
    """Everything a runner needs for one turn."""

    turn_id: str
    source: TurnSource
    prompt: str  # the user's text, or the rendered execution prompt of a fire
    history: Sequence[HistoryEntry] = ()
    now: datetime | None = None
    system_context: str | None = None  # e.g. a recall's self-instruction, for this turn only
    trigger: Trigger | None = None
    model: str | None = None  # the fire's job names a model of its own (None: the default)
    # Files the message came with (a Telegram photo, a hook's attachment): by URL, as bytes,
    # or metadata only; the transcript entry of the message keeps their `describe()`.
    attachments: tuple[Attachment, ...] = ()
    # A fire's prompt template: {"id", "version", "sha256"} (None: not a fire's turn).
    prompt_ref: dict[str, Any] | None = None
    # The turn's own runner URL: its fire's job's, else its session's (None: the process's
    # runner runs it). `http_runner.RunnerRoutes` reads it.
    runner_url: str | None = None
    # The only tools this turn may use (its fire's job's allow-list; None: every tool). The
    # built-in agent offers no other; a runner of your own should hold to it too.
    tools: tuple[str, ...] | None = None


class TurnEvents(Protocol):
    """Where a runner streams what happens during a turn.

    Event dicts: {"type": "text_delta", "text": str}, {"type": "thinking_delta", "text": str},
    {"type": "tool_started", "name": str, "args": dict}, {"type": "tool_call", "name": str,
    "args": dict, "result": str}.
    """

    async def emit(self, event: dict[str, Any]) -> None: ...


class NullEvents:
    """Drops every event (a turn nobody is watching)."""

    async def emit(self, event: dict[str, Any]) -> None:
        return None


class OutcomeStatus(enum.StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EMPTY = "empty"
    CANCELLED = "cancelled"  # stopped by a person: not a failure

    @property
    def turn_state(self) -> TurnState:
        """The state of the turn that ended with this outcome (same name)."""
        return _TURN_END_OF_OUTCOME[self]

    @property
    def run_state(self) -> RunState:
        """The state of the run whose turn (or isolated call) ended with this outcome."""
        return _TURN_END_OF_OUTCOME[self].run_state


_TURN_END_OF_OUTCOME = {
    OutcomeStatus.SUCCEEDED: TurnState.SUCCEEDED,
    OutcomeStatus.FAILED: TurnState.FAILED,
    OutcomeStatus.EMPTY: TurnState.EMPTY,
    OutcomeStatus.CANCELLED: TurnState.CANCELLED,
}


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a turn ended: success with text, failure with an error, or an empty result."""

    status: OutcomeStatus
    text: str | None = None
    error: str | None = None
    error_details: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # The tool calls the turn made, in order: saved in the transcript before its reply.
    tools: tuple[ToolRecord, ...] = ()
    # Files to send with the reply (Telegram sendPhoto / sendDocument, the webhook's JSON):
    # at most MAX_ATTACHMENTS; the transcript keeps their `describe()`, never the bytes.
    attachments: tuple[Attachment, ...] = ()

    @classmethod
    def succeeded(cls, text: str, **kw: Any) -> Outcome:
        return cls(OutcomeStatus.SUCCEEDED, text=text, **kw)

    @classmethod
    def failed(cls, error: str, **kw: Any) -> Outcome:
        return cls(OutcomeStatus.FAILED, error=error, **kw)

    @classmethod
    def empty(cls, **kw: Any) -> Outcome:
        return cls(OutcomeStatus.EMPTY, **kw)

    @classmethod
    def cancelled(cls, reason: str, **kw: Any) -> Outcome:
        return cls(OutcomeStatus.CANCELLED, error=reason, **kw)


class Runner(Protocol):
    """Executes one turn. Raising counts as a failed turn; cancellation stops it."""

    async def run_turn(
        self, session: SessionInfo, turn: TurnInput, events: TurnEvents
    ) -> Outcome: ...


class TurnPause(Protocol):
    """The turn's side of `paused()`: what is set for the runner call of a turn or of an
    isolated run (`runtime.execution.Execution`)."""

    def pause(self) -> AbstractAsyncContextManager[None]: ...


# The pause of the turn whose runner is running in this context (its execution sets it
# around the runner call of a turn or an isolated run; tasks the runner starts inherit it).
# None outside them.
turn_pause: ContextVar[TurnPause | None] = ContextVar("agentcron_turn_pause", default=None)


def paused() -> AbstractAsyncContextManager[None]:
    """Wrap a wait for something outside the turn: its engine slot is given back for the wait
    and taken again after it, and the wait does not count against the turn's timeout (see the
    module's docstring). Several concurrent waits of one turn share one pause: the slot comes
    back when the last one ends. A no-op outside a lane's turn or an isolated run.
    """
    pause = turn_pause.get()
    return contextlib.nullcontext() if pause is None else pause.pause()


TurnCallable = Callable[[Trigger], Awaitable[Outcome | str | None]]


class CallableRunner:
    """Adapts `async def fn(trigger) -> Outcome | str | None`: text = success, None/"" = empty.

    For turns that come from a fire; a user turn reaches `fn` as a Trigger-less call only if
    `fn` accepts a TurnInput, so prefer a full Runner for chat use.
    """

    history_window = 0  # a plain callable sees only the trigger: no transcript is read for it

    def __init__(self, fn: TurnCallable) -> None:
        self._fn = fn

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        if turn.trigger is None:
            raise TypeError("a plain-callable runner only runs scheduled turns")
        return as_outcome(await self._fn(turn.trigger))


def as_outcome(result: Outcome | str | None) -> Outcome:
    """A plain callable's answer as an Outcome: text = success, None/blank = empty."""
    if isinstance(result, Outcome):
        return result
    if result is None or not str(result).strip():
        return Outcome.empty()
    return Outcome.succeeded(str(result))


def as_runner(runner: Runner | TurnCallable) -> Runner:
    """Accept a Runner or a plain async callable."""
    if isinstance(runner, CallableRunner) or hasattr(runner, "run_turn"):
        return runner
    return CallableRunner(runner)
