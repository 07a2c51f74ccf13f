"""Typed events and the bus they travel on: turns, transcript, jobs and fires, for live UIs."""

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from agentcron.domain.attachments import Attachment
from agentcron.domain.jobs import Job, JobKind
from agentcron.domain.runs import ClaimedFire
from agentcron.domain.sessions import Message

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Something that happened; `session_key` says whose subscribers care ("" = nobody's)."""

    type: ClassVar[str] = "event"
    session_key: str


# -- a turn in progress (in the session's replay while it runs) -------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamStart(Event):
    """A turn began: its trigger entry is in the transcript, the runner is called next."""

    type: ClassVar[str] = "stream_start"
    turn_id: str
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(Event):
    type: ClassVar[str] = "text_delta"
    turn_id: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingDelta(Event):
    """A piece of the model's thinking (reasoning), when it streams any: not part of the reply."""

    type: ClassVar[str] = "thinking_delta"
    turn_id: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted(Event):
    type: ClassVar[str] = "tool_started"
    turn_id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCalled(Event):
    type: ClassVar[str] = "tool_call"
    turn_id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    result: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested(Event):
    """A gated tool call waits for a person (`cron.approvals.decide`, POST /api/approvals/{id})."""

    type: ClassVar[str] = "approval_requested"
    approval_id: str
    turn_id: str | None
    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    expires_at: str = ""  # ISO 8601


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided(Event):
    """A gated call's approval ended: approved, denied (by `decided_by`) or expired."""

    type: ClassVar[str] = "approval_decided"
    approval_id: str
    turn_id: str | None
    tool: str
    state: str
    decided_by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalReminder(Event):
    """A scheduled run (of job `job_id`) still waits for a person's decision: sent once, part
    way into the wait, to its session's channel.
    """

    type: ClassVar[str] = "approval_reminder"
    approval_id: str
    turn_id: str | None
    job_id: str
    tool: str
    expires_at: str = ""  # ISO 8601


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerEvent(Event):
    """Any other event a runner emitted (its dict as given)."""

    type: ClassVar[str] = "runner_event"
    turn_id: str
    name: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatContext:
    """Where a session's messages go out: its channel, chat and channel metadata."""

    channel: str
    chat_id: str
    channel_meta: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEnd(Event):
    """A turn ended and its closing entry is committed (`reply`; None if it could not be)."""

    type: ClassVar[str] = "stream_end"
    turn_id: str
    status: str
    source: str
    run_id: str | None = None
    reply: Message | None = None
    chat: ChatContext | None = None
    # The reply's files (bytes included) for the channels of this process; the WebSocket
    # and the relay between replicas carry the reply only (its meta describes them).
    attachments: tuple[Attachment, ...] = ()

    @property
    def message_id(self) -> str | None:
        return None if self.reply is None else self.reply.id


# -- the session outside a turn ---------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSync(Event):
    """The session changed outside the stream (a turn let go, a message posted): re-read it."""

    type: ClassVar[str] = "session_sync"


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagePosted(Event):
    """A transcript entry written outside a turn (a delivered result, an interrupted notice)."""

    type: ClassVar[str] = "message"
    message: Message
    chat: ChatContext | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionDeleted(Event):
    type: ClassVar[str] = "session_deleted"


# -- jobs and their fires -------------------------------------------------------------------------


class JobAction(enum.StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    PAUSED = "paused"
    RESUMED = "resumed"
    SKIPPED = "skipped"
    DELETED = "deleted"
    DEFERRED = "deferred"  # a fire waits behind a turn of its session
    FIRED = "fired"  # a fire's turn started
    FINISHED = "finished"  # a fire's turn ended
    SETTLED = "settled"  # the job's own record is up to date after a fire (next run, pause)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobEvent(Event):
    """A job changed (created ... deleted) or one of its fires moved (deferred ... settled).

    `job` is the job as it is now when the action changed it; fire actions carry `run_id` and,
    once the fire ended, `status`.
    """

    type: ClassVar[str] = "job_update"
    action: JobAction
    job_id: str
    kind: JobKind
    run_id: str | None = None
    status: str | None = None
    job: Job | None = None

    @property
    def wire_type(self) -> str:
        """Recalls have their own stream in the UI (the banner); the rest are automations."""
        return "recall_update" if self.kind is JobKind.RECALL else "automation_update"


@dataclass(frozen=True, slots=True, kw_only=True)
class FireStarted(Event):
    """A fire is about to run (its turn is next): how late it is against its nominal time."""

    type: ClassVar[str] = "fire_started"
    job_id: str
    run_id: str
    lateness_s: float


# -- alerts on a job (service/alerts.py; each sent once per episode) ------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class JobAlert(Event):
    """Something about a job a person should know while nobody watches it; the channels send
    its `text` to the job's session's chat. `session_key` is the job's ("" unbound).
    """

    type: ClassVar[str] = "job_alert"
    job_id: str
    job_name: str
    text: str
    at: datetime  # when it was raised (the episode's start for overdue and failing)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobOverdue(JobAlert):
    """A fire of the job did not reach a terminal run within its grace: `reason` `not_fired`
    (its due fire was never claimed) or `run_open` (a claimed fire never ended; `run_id`).
    """

    type: ClassVar[str] = "job_overdue"
    reason: str
    due_at: datetime | None = None
    run_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFailing(JobAlert):
    """The job's last `failures` runs failed (at least the configured N)."""

    type: ClassVar[str] = "job_failing"
    failures: int


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRecovered(JobAlert):
    """An overdue or failing job is no longer so (`alert` says which episode ended)."""

    type: ClassVar[str] = "job_recovered"
    alert: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JobEnding(JobAlert):
    """The job ends soon (`end_at` within the warning window, or few `remaining_runs`); it can
    be renewed.
    """

    type: ClassVar[str] = "job_ending"
    end_at: datetime | None = None
    remaining_runs: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JobBudgetReached(Event):
    """A run's end reached a cap of its job's budget: the job is paused (until a person
    resumes it); `reason` says which cap, `run_id` which run reached it.
    """

    type: ClassVar[str] = "job_budget_reached"
    job_id: str
    run_id: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionBudgetReached(Event):
    """A run of job `job_id` reached a cap of its session's budget: the fires of the
    session's jobs are skipped until the day or month turns or the budget is raised (no job
    is paused); `reason` says which cap.
    """

    type: ClassVar[str] = "session_budget_reached"
    job_id: str
    run_id: str
    reason: str


# -- the bus --------------------------------------------------------------------------------------

Callback = Callable[[Event], Awaitable[None] | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliverySucceeded(Event):
    """A channel delivered a session's message (seed 004: `message.delivered`): when, and
    the far end's id of it (None: it gave none).
    """

    type: ClassVar[str] = "delivery_succeeded"
    channel: str
    message_id: str
    attempts: int
    external_id: str | None = None
    delivered_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryFailed(Event):
    """An attempt to deliver a session's message failed (seed 004: `message.failed`):
    `retryable` = another attempt follows; False = the delivery gave up (a permanent error,
    the deadline passed, or no channel could carry it: `attempts` 0), the message never
    reached that channel; it can be re-sent (`Deliveries.retry`).
    """

    type: ClassVar[str] = "delivery_failed"
    channel: str
    message_id: str
    attempts: int
    error: str
    retryable: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemEventFired(Event):
    """A `system_event` job fired (heartbeat, dream, a host's own): its text, for every live
    view (seed 004 broadcasts it); `session_key` is its job's session, "" for none.
    """

    type: ClassVar[str] = "system_event"
    job_id: str
    run_id: str
    name: str
    text: str
    source: str = "cron"  # where it comes from (seed 004: the scheduler)


@dataclass(eq=False)
class _Subscription:
    callback: Callback
    types: tuple[type[Event], ...] | None


class EventBus:
    """Publish/subscribe inside one process. Callbacks run in order of subscription; a failing
    callback is logged and never reaches the publisher. Keep callbacks short: a turn waits
    for them (queue the work, as the WebSocket hub and the channels do).
    """

    def __init__(self) -> None:
        self._subs: list[_Subscription] = []

    def subscribe(
        self, callback: Callback, types: Iterable[type[Event]] | None = None
    ) -> Callable[[], None]:
        """Call `callback(event)` for every event (or those of `types`); returns unsubscribe."""
        sub = _Subscription(callback, None if types is None else tuple(types))
        self._subs = [*self._subs, sub]

        def unsubscribe() -> None:
            self._subs = [s for s in self._subs if s is not sub]

        return unsubscribe

    @property
    def active(self) -> bool:
        """Someone listens (a publisher may skip building events nobody would get)."""
        return bool(self._subs)

    async def publish(self, event: Event) -> None:
        for sub in self._subs:
            if sub.types is not None and not isinstance(event, sub.types):
                continue
            try:
                result = sub.callback(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception(
                    "event subscriber failed",
                    extra={"event": event.type, "session_key": event.session_key},
                )


def runner_event(session_key: str, turn_id: str, data: dict[str, Any]) -> Event:
    """A runner's event dict (the `TurnEvents.emit` protocol) as a typed event."""
    kind = data.get("type")
    if kind == "text_delta":
        return TextDelta(session_key=session_key, turn_id=turn_id, text=str(data.get("text", "")))
    if kind == "thinking_delta":
        text = str(data.get("text", ""))
        return ThinkingDelta(session_key=session_key, turn_id=turn_id, text=text)
    if kind == "tool_started":
        name, args = str(data.get("name", "")), dict(data.get("args") or {})
        return ToolStarted(session_key=session_key, turn_id=turn_id, name=name, args=args)
    if kind == "tool_call":
        return ToolCalled(
            session_key=session_key,
            turn_id=turn_id,
            name=str(data.get("name", "")),
            args=dict(data.get("args") or {}),
            result=str(data.get("result", "")),
        )
    rest = {k: v for k, v in data.items() if k != "type"}
    return RunnerEvent(session_key=session_key, turn_id=turn_id, name=str(kind), data=rest)


async def publish_fire_settled(
    bus: EventBus, fire: ClaimedFire, status: str, *, job_deleted: bool
) -> None:
    """A fire ended and its job's record is committed: `settled`, then `deleted` when the end
    removed the job (a finished one-shot).
    """
    for action in (JobAction.SETTLED, *((JobAction.DELETED,) if job_deleted else ())):
        await bus.publish(fire_event(fire, action, status))


def fire_event(fire: ClaimedFire, action: JobAction, status: str | None = None) -> JobEvent:
    """The job event of one fire of a job (deferred, fired, finished, settled, deleted)."""
    job = fire.job
    return JobEvent(
        session_key=job.session_key or "",
        action=action,
        job_id=job.id,
        kind=job.kind,
        run_id=fire.run_id,
        status=status,
    )
