"""The channel protocol, outbound messages, and the manager that joins channels to sessions."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, get_args, runtime_checkable

from agentcron import views
from agentcron.approval_links import ApprovalLinks
from agentcron.domain.approvals import Approval, ApprovalNotFoundError, Decision
from agentcron.domain.attachments import Attachment
from agentcron.domain.deliveries import Delivery
from agentcron.domain.events import (
    ApprovalDecided,
    ApprovalReminder,
    ApprovalRequested,
    ChatContext,
    Event,
    JobAlert,
    MessagePosted,
    StreamEnd,
    StreamStart,
)
from agentcron.domain.quiet import held_until
from agentcron.domain.sessions import Turn, TurnSource
from agentcron.errors import AgentcronError
from agentcron.runtime.clock import Clock
from agentcron.store.errors import SessionNotFoundError
from agentcron.store.interface import DeliveryLedger

if TYPE_CHECKING:  # the facade will wire channels: no import cycle at run time
    from agentcron.app import AgentCron

log = logging.getLogger(__name__)


class Inbound(Protocol):
    """(channel, chat_id, content, channel_meta, attachments) -> the turn the message became."""

    def __call__(
        self,
        channel: str,
        chat_id: str,
        content: str,
        meta: dict[str, Any],
        /,
        attachments: Sequence[Attachment] = (),
    ) -> Awaitable[Turn]: ...


MessageKind = Literal[
    "turn", "message", "approval_requested", "approval_decided", "approval_reminder", "alert"
]
_KINDS: frozenset[str] = frozenset(get_args(MessageKind))


class ChannelError(AgentcronError):
    """Base class of channel failures."""


class ChannelStartError(ChannelError):
    """A channel could not start (the manager stops the ones it had started)."""

    def __init__(self, channel: str, cause: BaseException) -> None:
        super().__init__(f"channel {channel!r} could not start: {type(cause).__name__}: {cause}")
        self.channel = channel


class ChannelNotRunningError(ChannelError):
    """A delivery cannot be re-sent from here: this process runs no channel of its name."""

    def __init__(self, channel: str) -> None:
        super().__init__(
            f"channel {channel!r} is not running on this server: configure it (and restart) "
            "to re-send its deliveries"
        )
        self.channel = channel


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """One assistant message of a session, on its way to a channel.

    `kind` is `turn` for the closing reply of a turn (user or scheduled; `status` is the
    turn's outcome) and `message` for a message posted outside a turn (a delivery job's
    delivered result). `approval_requested` / `approval_decided` carry a gated tool call's
    approval (`approval`: the API's approval view; `status` its state; `text` a plain summary)
    to the channels that take approvals (`carries_approvals`). `alert` is a job's alert
    (overdue, failing, recovered, ending: `service/alerts.py`; `status` the event's type, `meta`
    its `job_id` and `alert`). `channel`, `chat_id` and
    `channel_meta` are the session's execution context, as the event carried it (read from
    the store only when it did not).
    """

    session_key: str
    channel: str
    chat_id: str
    text: str
    message_id: str
    status: str
    kind: MessageKind = "turn"
    source: str | None = None
    turn_id: str | None = None
    run_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    channel_meta: dict[str, Any] | None = None
    created_at: datetime | None = None
    approval: dict[str, Any] | None = None
    # The reply's files (`Outcome.attachments`); in the delivery record with their bytes as
    # base64 (bounded: MAX_ATTACHMENTS of MAX_ATTACHMENT_BYTES) while it is pending, to resend
    # after a restart, or failed, for a re-send (the store drops the bytes once it is delivered).
    attachments: tuple[Attachment, ...] = ()

    @property
    def not_before(self) -> datetime | None:
        """When it may be sent: its session's quiet hours hold a fire's reply until they
        end (domain/quiet.py); None: at once.
        """
        return held_until(self.meta)

    @property
    def is_approval(self) -> bool:
        return self.kind in ("approval_requested", "approval_decided", "approval_reminder")

    def to_payload(self) -> dict[str, Any]:
        """A JSON-ready dict (kept in the delivery record to resume after a restart)."""
        extra: dict[str, Any] = {} if self.approval is None else {"approval": self.approval}
        if self.attachments:
            extra["attachments"] = [a.to_json() for a in self.attachments]
        return {
            "session_key": self.session_key,
            "channel": self.channel,
            "chat_id": self.chat_id,
            "text": self.text,
            "message_id": self.message_id,
            "status": self.status,
            "kind": self.kind,
            "source": self.source,
            "turn_id": self.turn_id,
            "run_id": self.run_id,
            "meta": self.meta,
            "channel_meta": self.channel_meta,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            **extra,
        }

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> OutboundMessage:
        created = data.get("created_at")
        given = data.get("kind")
        kind = cast(MessageKind, given) if isinstance(given, str) and given in _KINDS else "turn"
        approval = data.get("approval")
        files = data.get("attachments")
        return cls(
            session_key=str(data["session_key"]),
            channel=str(data["channel"]),
            chat_id=str(data["chat_id"]),
            text=str(data["text"]),
            message_id=str(data["message_id"]),
            status=str(data["status"]),
            kind=kind,
            source=data.get("source"),
            turn_id=data.get("turn_id"),
            run_id=data.get("run_id"),
            meta=dict(data.get("meta") or {}),
            channel_meta=data.get("channel_meta"),
            created_at=datetime.fromisoformat(created) if created else None,
            approval=dict(approval) if isinstance(approval, dict) else None,
            attachments=tuple(Attachment.from_json(f) for f in files if isinstance(f, dict))
            if isinstance(files, list)
            else (),
        )


class Channel(Protocol):
    """An edge that carries session messages in and out (Telegram, a webhook, ...).

    `send` should return quickly: a channel that retries records the message durably and
    retries in its own task. `wants` says which messages the channel carries; a chat channel
    serves the sessions of its own name (`telegram:<chat>`).
    """

    name: str

    async def start(self, inbound: Inbound) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, message: OutboundMessage) -> None: ...

    def wants(self, message: OutboundMessage) -> bool: ...


@runtime_checkable
class StoreBound(Protocol):
    """A channel that keeps delivery records: the manager binds it to the store before start."""

    def bind(
        self,
        deliveries: DeliveryLedger,
        clock: Clock,
        report: Callable[[Event], Awaitable[None]] | None = None,
    ) -> None: ...


class ApprovalDesk(Protocol):
    """Where a channel decides approvals (`cron.approvals`, the service)."""

    async def get(self, approval_id: str) -> Approval: ...

    async def decide(self, approval_id: str, decision: Decision, *, by: str) -> Approval: ...


@runtime_checkable
class ApprovalBound(Protocol):
    """A channel that carries approvals: the manager gives it the desk to decide them on and
    the decision links (None: no links) before start. Only channels with
    `carries_approvals = True` get `approval_requested` / `approval_decided` messages.
    """

    carries_approvals: bool

    def bind_approvals(self, desk: ApprovalDesk, links: ApprovalLinks | None) -> None: ...


@dataclass(frozen=True, slots=True)
class ChannelStatus:
    """How a channel is doing (`GET /api/channels`): connected = it reaches its far end (for
    Telegram: the last poll did); healthy = running, connected and its deliveries not failing
    since their last success.
    """

    name: str
    kind: str
    running: bool
    connected: bool
    healthy: bool
    last_error: str | None
    last_error_at: datetime | None
    last_success_at: datetime | None
    failed: int  # deliveries given up since start


_Outbound = (
    StreamEnd | MessagePosted | ApprovalRequested | ApprovalDecided | ApprovalReminder | JobAlert
)
_OUTBOUND = (
    StreamEnd,
    MessagePosted,
    ApprovalRequested,
    ApprovalDecided,
    ApprovalReminder,
    JobAlert,
)
_HEARD = (*_OUTBOUND, StreamStart)  # and when a turn begins: a person's live turn
# What a person's live turn holds back until it ends: messages posted outside a turn and
# alerts (never an approval: the turn may be waiting for it); at most this many a session.
_HELD_IN_TURN = frozenset({"message", "alert"})
MAX_HELD_IN_TURN = 100
_STOP = object()  # queue sentinel: drain what came before, then end
# How far back a start looks for approval requests whose decision no process sent (an
# approval waits minutes; a week covers a long outage without reading every old record).
CATCH_UP = timedelta(days=7)


class ChannelManager:
    """Joins channels to an AgentCron: turn results go out, inbound messages become turns.

    The subscriber only queues events (it never blocks a turn); one task turns them into
    outbound messages (reading the store only for an event without its chat) and routes them,
    and one task per channel sends, so a slow channel delays no other.
    A gated tool call's approval request and its decision go the same way, to the session's
    channel among those that carry approvals; `approval_links` makes the webhook's decision
    URLs (`agentcron.approval_links`). Every replica's manager handles the decisions
    published in its process; the decision's delivery id makes one of them send it. At
    start the manager also sends the decisions nobody sent (`catch_up`).
    Stop the manager before closing AgentCron: it needs the store to drain its queues.
    """

    def __init__(
        self,
        cron: AgentCron,
        channels: Iterable[Channel],
        *,
        approval_links: ApprovalLinks | None = None,
    ) -> None:
        self.cron = cron
        self.approval_links = approval_links  # the webhook's decision URLs (None: none)
        self.channels: list[Channel] = list(channels)
        names = [c.name for c in self.channels]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ChannelError(f"channel names must be unique; repeated: {', '.join(duplicates)}")
        self._events: asyncio.Queue[_Outbound | object] = asyncio.Queue()
        self._outgoing: dict[str, asyncio.Queue[OutboundMessage | object]] = {}
        self._events_task: asyncio.Task[None] | None = None
        self._senders: list[asyncio.Task[None]] = []
        self._started: list[Channel] = []
        self._unsubscribe: Callable[[], None] | None = None
        # A person's turn live in a session (its id), and what waits for its end, in order.
        self._live: dict[str, str] = {}
        self._held: dict[str, list[OutboundMessage]] = {}
        # Replies its quiet hours hold, for a channel without delivery records (in memory).
        self._timers: set[asyncio.Task[None]] = set()

    @property
    def running(self) -> bool:
        return self._unsubscribe is not None

    async def start(self) -> None:
        """Bind and start every channel; listen to the events from before the first channel
        starts, so no reply to an early inbound message is missed.
        """
        if self.running:
            return
        if not self.channels:  # still listens: a chat session's reply fails for want of one
            log.info("no channels configured")
        for channel in self.channels:
            if isinstance(channel, StoreBound):
                channel.bind(self.cron.store.deliveries, self.cron.clock, self.cron.publish)
            if isinstance(channel, ApprovalBound):
                channel.bind_approvals(self.cron.approvals, self.approval_links)
        self._events = asyncio.Queue()
        self._outgoing = {c.name: asyncio.Queue() for c in self.channels}
        self._events_task = asyncio.create_task(self._event_loop(), name="channels:events")
        self._unsubscribe = self.cron.subscribe(self._on_event, types=_HEARD)
        for channel in self.channels:
            try:
                await channel.start(self.inbound)
            except Exception as exc:
                log.exception("channel failed to start", extra={"channel": channel.name})
                await self._halt(0.0)
                raise ChannelStartError(channel.name, exc) from exc
            self._started.append(channel)
        self._senders = [
            asyncio.create_task(
                self._send_loop(c, self._outgoing[c.name]), name=f"channel:{c.name}"
            )
            for c in self.channels
        ]
        log.info("channels started", extra={"channels": [c.name for c in self.channels]})
        await self.catch_up()

    async def catch_up(self) -> int:
        """Send the decisions of approvals whose request a channel sent (or still has to)
        but whose decision no process recorded for it: decided while no process with that
        channel listened (a stop cut the waiting turn, a restart expired it, a replica
        without the channel decided it). Any process may do it, once (the delivery id is
        unique). Returns how many it handed over; a failure is logged, never raised.
        """
        handed = 0
        kept = [c for c in self._started if isinstance(c, StoreBound) and _carries_approvals(c)]
        if not kept:  # nothing keeps requests: nothing to catch up on
            return 0
        since = self.cron.clock.now() - CATCH_UP
        for channel in kept:
            try:
                requests = await self.cron.deliveries.unanswered(
                    channel.name, prefix=_REQUESTED, answer_prefix=_DECIDED, since=since
                )
                for request in requests:
                    message = await self._decided_since(request)
                    if message is not None and channel.wants(message):
                        await channel.send(message)
                        handed += 1
            except Exception:
                log.exception(
                    "channels: could not catch up on approval decisions",
                    extra={"channel": channel.name},
                )
        if handed:
            log.info("channels: sent approval decisions nobody had sent", extra={"count": handed})
        return handed

    async def _decided_since(self, request: Delivery) -> OutboundMessage | None:
        """The decision of a request's approval, to where the request went; None while it
        is pending or once its record is gone.
        """
        asked = OutboundMessage.from_payload(request.payload)
        approval_id = str((asked.approval or {}).get("id") or "")
        if not approval_id:
            return None
        try:
            approval = await self.cron.approvals.get(approval_id)
        except ApprovalNotFoundError:
            return None
        if approval.pending:
            return None
        return replace(
            asked,
            kind="approval_decided",
            text=_decided_text(approval.state.value, approval.tool, approval.decided_by),
            message_id=approval_delivery_id(approval_id, requested=False),
            status=approval.state.value,
            created_at=self.cron.clock.now(),
            approval=views.approval_view(approval),
        )

    async def stop(self, grace: float = 10.0) -> None:
        """Stop listening, hand queued messages to their channels (for at most `grace`
        seconds), then stop the channels. A channel with delivery records resumes what it
        could not send on its next start.
        """
        if self.running:
            await self._halt(grace)

    async def _halt(self, grace: float) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        events_task, self._events_task = self._events_task, None
        senders, self._senders = self._senders, []
        timers, self._timers = list(self._timers), set()
        for timer in timers:  # a quiet-hours hold without records ends with the process
            timer.cancel()
        await asyncio.gather(*timers, return_exceptions=True)
        if events_task is not None:
            self._events.put_nowait(_STOP)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(events_task), grace)
        for queue in self._outgoing.values():
            queue.put_nowait(_STOP)
        if senders:
            _, late = await asyncio.wait(senders, timeout=grace)
            if late:
                log.warning(
                    "channels: queued messages not handed over before stop",
                    extra={"channels": sorted(t.get_name() for t in late)},
                )
        tasks = [*senders, *([events_task] if events_task is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._outgoing = {}
        await self._stop_channels()

    async def _stop_channels(self) -> None:
        while self._started:
            channel = self._started.pop()
            try:
                await channel.stop()
            except Exception:
                log.exception("channel failed to stop", extra={"channel": channel.name})

    def status(self) -> list[ChannelStatus]:
        """Each configured channel: running, connected, healthy, its last success and error."""
        found = []
        for channel in self.channels:
            outbox = getattr(channel, "outbox", None)
            health = getattr(outbox, "health", None)
            running = channel in self._started and self.running
            connected = getattr(channel, "connected", None)
            error = getattr(channel, "poll_error", None)
            last_error = error or (health.last_error if health is not None else None)
            healthy = running and connected is not False and (health is None or health.healthy)
            found.append(
                ChannelStatus(
                    name=channel.name,
                    kind=type(channel).__name__.removesuffix("Channel").lower(),
                    running=running,
                    connected=running if connected is None else connected,
                    healthy=healthy,
                    last_error=last_error,
                    last_error_at=None if health is None else health.last_error_at,
                    last_success_at=None if health is None else health.last_success_at,
                    failed=0 if health is None else health.failed,
                )
            )
        return found

    async def idle(self) -> None:
        """Wait until every queued event has been handed to its channels (tests use this)."""
        await self._events.join()
        for queue in list(self._outgoing.values()):
            await queue.join()

    # -- inbound ---------------------------------------------------------------------------

    async def inbound(
        self,
        channel: str,
        chat_id: str,
        content: str,
        meta: dict[str, Any],
        /,
        attachments: Sequence[Attachment] = (),
    ) -> Turn:
        """A message from a chat: its session (made with the chat's context when new) gets it
        like any user message, with its files (`Sessions.receive`).
        """
        turn = await self.cron.sessions.receive(channel, chat_id, content, meta, attachments)
        log.info(
            "inbound message submitted",
            extra={"channel": channel, "session_key": turn.session_key, "turn_id": turn.id},
        )
        return turn

    # -- outbound --------------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        # Called inside the publisher (often a turn): queue only, the rest happens in our task.
        if isinstance(event, StreamStart):
            if self.channels and not _served_here(event.session_key):
                self._events.put_nowait(event)
            return
        if not isinstance(event, _OUTBOUND):
            return
        if not self.channels and (
            isinstance(event, ApprovalRequested | ApprovalDecided | ApprovalReminder)
            or _served_here(event.session_key)
        ):
            return  # no channel to carry it, and nothing to record either
        self._events.put_nowait(event)

    async def _event_loop(self) -> None:
        while True:
            item = await self._events.get()
            try:
                if isinstance(item, StreamStart):
                    await self._turn_began(item)
                    continue
                if not isinstance(item, _OUTBOUND):  # the stop sentinel
                    return
                try:
                    message = await self._resolve(item)
                except Exception:
                    log.exception(
                        "channels: could not resolve an outbound message",
                        extra={
                            "session_key": item.session_key,
                            "event": item.type,
                            "message_id": _message_id(item),
                        },
                    )
                    continue
                if message is not None:
                    held = self._held.get(message.session_key)
                    if held is not None and message.kind in _HELD_IN_TURN:
                        held.append(message)  # a person's live turn: after its end
                        if len(held) >= MAX_HELD_IN_TURN:
                            await self._release_held(message.session_key)
                    else:
                        await self._route(message)
                if isinstance(item, StreamEnd) and self._live.get(item.session_key) == item.turn_id:
                    await self._release_held(item.session_key)
            finally:
                self._events.task_done()

    async def _turn_began(self, event: StreamStart) -> None:
        """A turn began in a chat: a person's (a message they sent) holds back what is
        posted to that chat outside it until it ends; any other turn there means the one
        before ended (its end seen or not).
        """
        key = event.session_key
        if key in self._live and self._live[key] != event.turn_id:
            await self._release_held(key)
        if event.source == TurnSource.USER.value:
            self._live[key] = event.turn_id
            self._held.setdefault(key, [])

    async def _release_held(self, key: str) -> None:
        """The person's turn ended: what waited for it goes out, in the order it came."""
        self._live.pop(key, None)
        for message in self._held.pop(key, []):
            await self._route(message)

    async def _resolve(self, event: _Outbound) -> OutboundMessage | None:
        """The outbound message an event announces, with the session's execution context."""
        if isinstance(event, ApprovalRequested | ApprovalDecided):
            return await self._resolve_approval(event)
        if isinstance(event, ApprovalReminder):
            return await self._resolve_reminder(event)
        if isinstance(event, JobAlert):
            return await self._resolve_alert(event)
        key = event.session_key
        kind: MessageKind
        source: str | None
        if isinstance(event, StreamEnd):
            reply = event.reply
            if reply is None:  # the turn's closing entry could not be committed
                return None
            kind, status, source, turn_id = "turn", event.status, event.source, event.turn_id
            run_id = event.run_id or reply.meta.get("automation_run_id")
            files = event.attachments
        else:
            reply = event.message
            if reply.role != "assistant":
                return None
            kind, status, turn_id = "message", "succeeded", None
            source, run_id = reply.meta.get("source"), reply.meta.get("automation_run_id")
            files = ()
        if reply.meta.get("held"):
            # Its job's notify policy held it (domain/notify.py): it stays in the transcript,
            # the chat's history, and its run says why; no channel sends it.
            return None
        chat = event.chat or await self._chat(key, reply.id)
        if chat is None:
            return None
        return OutboundMessage(
            session_key=key,
            channel=chat.channel,
            chat_id=chat.chat_id,
            text=reply.content,
            message_id=reply.id,
            status=status,
            kind=kind,
            source=source,
            turn_id=turn_id,
            run_id=run_id,
            meta=reply.meta,
            channel_meta=chat.channel_meta,
            created_at=reply.created_at,
            attachments=files,
        )

    async def _resolve_approval(
        self, event: ApprovalRequested | ApprovalDecided
    ) -> OutboundMessage | None:
        """An approval's request or decision, for the channel of its session."""
        key = event.session_key
        if not key:  # a call outside any session: no channel to ask
            return None
        chat = await self._chat(key, event.approval_id)
        if chat is None and isinstance(event, ApprovalDecided):
            # The session went first (its deletion expires its approvals, then deletes it,
            # while this event waits in the queue): the decision still edits the request sent
            # to its chat, which the key names (`channel:chat_id`).
            channel, _, chat_id = key.partition(":")
            chat = ChatContext(channel=channel, chat_id=chat_id)
        if chat is None:
            return None
        said: dict[str, Any] = {"tool": event.tool}
        if isinstance(event, ApprovalRequested):
            said.update(args=event.args, expires_at=event.expires_at or None)
        view = await self._approval_view(event.approval_id, key, event.turn_id, said)
        # the event says what happened; the record may already be further along
        if isinstance(event, ApprovalRequested):
            view.update(state="pending", decision=None, decided_by=None, decided_at=None)
            kind: MessageKind = "approval_requested"
            text = f"Approval needed: {event.tool} {_short_json(event.args)}"
        else:
            view.update(state=event.state, decided_by=event.decided_by)
            kind = "approval_decided"
            text = _decided_text(event.state, event.tool, event.decided_by)
        return OutboundMessage(
            session_key=key,
            channel=chat.channel,
            chat_id=chat.chat_id,
            text=text,
            message_id=approval_delivery_id(
                event.approval_id, requested=kind == "approval_requested"
            ),
            status=str(view["state"]),
            kind=kind,
            source="approval",
            turn_id=event.turn_id,
            channel_meta=chat.channel_meta,
            created_at=self.cron.clock.now(),
            approval=view,
        )

    async def _approval_view(
        self, approval_id: str, key: str, turn_id: str | None, said: dict[str, Any]
    ) -> dict[str, Any]:
        """An approval's record as its view; once pruned, what its event `said` of it."""
        try:
            return views.approval_view(await self.cron.approvals.get(approval_id))
        except ApprovalNotFoundError:  # pruned meanwhile: what the event says
            return {"id": approval_id, "session_key": key, "turn_id": turn_id, **said}

    async def _resolve_reminder(self, event: ApprovalReminder) -> OutboundMessage | None:
        """A scheduled run still waits for a person: a reminder to its session's channel,
        once (its record's `reminded_at`, and its own delivery id `apm.<id>`).
        """
        key = event.session_key
        if not key:
            return None
        chat = await self._chat(key, event.approval_id)
        if chat is None:
            return None
        said = {"tool": event.tool, "job_id": event.job_id, "expires_at": event.expires_at}
        view = await self._approval_view(event.approval_id, key, event.turn_id, said)
        if view.get("state", "pending") != "pending":
            return None  # decided while the reminder waited in the queue: nothing to remind
        return OutboundMessage(
            session_key=key,
            channel=chat.channel,
            chat_id=chat.chat_id,
            text=(
                f"Reminder: a scheduled run still waits for approval of {event.tool} "
                f"(it is denied at {event.expires_at} if nobody decides)"
            ),
            message_id=approval_reminder_id(event.approval_id),
            status="pending",
            kind="approval_reminder",
            source="approval",
            turn_id=event.turn_id,
            channel_meta=chat.channel_meta,
            created_at=self.cron.clock.now(),
            approval=view,
        )

    async def _resolve_alert(self, event: JobAlert) -> OutboundMessage | None:
        """A job's alert, for the chat of its session (an unbound job has none: the alert is
        on the bus, the WebSocket and `/metrics` only).
        """
        key = event.session_key
        if not key:
            return None
        message_id = alert_delivery_id(event)
        chat = await self._chat(key, message_id)
        if chat is None:
            return None
        return OutboundMessage(
            session_key=key,
            channel=chat.channel,
            chat_id=chat.chat_id,
            text=event.text,
            message_id=message_id,
            status=event.type,
            kind="alert",
            source="alert",
            meta={"job_id": event.job_id, "alert": event.type},
            channel_meta=chat.channel_meta,
            created_at=event.at,
        )

    async def _chat(self, key: str, message_id: str) -> ChatContext | None:
        """The session's execution context, for an event that did not carry it."""
        try:
            session = await self.cron.sessions.get(key)
        except SessionNotFoundError:
            log.warning(
                "channels: session gone before its message went out",
                extra={"session_key": key, "message_id": message_id},
            )
            return None
        return ChatContext(
            channel=session.channel, chat_id=session.chat_id, channel_meta=session.channel_meta
        )

    async def _route(self, message: OutboundMessage) -> None:
        taken = False
        refused: str | None = None
        for channel in self.channels:
            if message.is_approval and not _carries_approvals(channel):
                continue
            try:
                wanted = channel.wants(message)
                refused = refused or _refusal(channel, message)
            except Exception:
                log.exception(
                    "channels: wants() failed",
                    extra={"channel": channel.name, "session_key": message.session_key},
                )
                continue
            queue = self._outgoing.get(channel.name)
            if wanted and queue is not None:
                at = message.not_before
                if at is not None and not hasattr(channel, "outbox") and at > self.cron.clock.now():
                    self._put_later(queue, message, at)  # its outbox holds it, where it has one
                else:
                    queue.put_nowait(message)
                taken = True
        if message.is_approval:
            return  # an approval is decided in the web UI or the API all the same
        if refused is None and not taken and not _served_here(message.session_key):
            refused = f"no channel {message.channel!r} is configured to carry it"
        if refused is not None:
            await self._unroutable(message, refused)

    async def _unroutable(self, message: OutboundMessage, reason: str) -> None:
        """A reply no channel can carry: a failed delivery on its session's channel, with the
        reason, listed and announced like any other (seed 004: no plugin -> failed).
        """
        log.warning(
            "channels: reply not delivered: %s",
            reason,
            extra={"session_key": message.session_key, "message_id": message.message_id},
        )
        try:
            await self.cron.deliveries.unroutable(
                message.channel,
                message.message_id,
                message.session_key,
                message.to_payload(),
                reason,
            )
        except Exception:
            log.exception(
                "channels: could not record an unroutable reply",
                extra={"session_key": message.session_key, "message_id": message.message_id},
            )

    def _put_later(
        self, queue: asyncio.Queue[OutboundMessage | object], message: OutboundMessage, at: datetime
    ) -> None:
        """Hand `message` to a channel without delivery records at `at` (its quiet hours'
        end), from memory: a stop before then drops it (its transcript keeps it).
        """

        async def later() -> None:
            await self.cron.clock.sleep_until(at, asyncio.Event())
            queue.put_nowait(message)

        task = asyncio.create_task(later(), name=f"quiet:{message.session_key}")
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    def redeliver(self, record: Delivery) -> bool:
        """Hand a delivery made pending again (`Deliveries.retry`) to its channel's outbox in
        this process; False when this process does not run that channel (then the outbox of
        a process that does takes it up when it looks for records left behind).
        """
        for channel in self._started:
            resume = getattr(getattr(channel, "outbox", None), "resume", None)
            if channel.name == record.channel and callable(resume):
                resume(record.message_id)
                return True
        return False

    def carries(self, channel: str) -> bool:
        """Whether this process runs a channel of that name."""
        return self.running and any(c.name == channel for c in self._started)

    async def _send_loop(
        self, channel: Channel, queue: asyncio.Queue[OutboundMessage | object]
    ) -> None:
        while True:
            item = await queue.get()
            try:
                if not isinstance(item, OutboundMessage):  # the stop sentinel
                    return
                try:
                    await channel.send(item)
                except Exception:
                    log.exception(
                        "channels: send failed",
                        extra={
                            "channel": channel.name,
                            "session_key": item.session_key,
                            "message_id": item.message_id,
                        },
                    )
            finally:
                queue.task_done()


def _message_id(event: _Outbound) -> str | None:
    if isinstance(event, ApprovalRequested | ApprovalDecided | ApprovalReminder):
        return event.approval_id
    if isinstance(event, JobAlert):
        return alert_delivery_id(event)
    return event.message_id if isinstance(event, StreamEnd) else event.message.id


# Sessions whose replies are read in agentcron itself (the web UI, the API and its WebSocket,
# an isolated run's memory): no channel carries them, so none missing is a failure.
SERVED_HERE = frozenset({"websocket", "unified", "api", "cron", "system", "hook", "demo"})


def _served_here(session_key: str) -> bool:
    return session_key.partition(":")[0] in SERVED_HERE


def _refusal(channel: Channel, message: OutboundMessage) -> str | None:
    """Why `channel` will not carry a message of its own sessions (`unroutable`, optional)."""
    check = getattr(channel, "unroutable", None)
    if check is None:
        return None
    reason = check(message)
    return reason if isinstance(reason, str) and reason else None


def _carries_approvals(channel: Channel) -> bool:
    return getattr(channel, "carries_approvals", False) is True


def _decided_text(state: str, tool: str, decided_by: str | None) -> str:
    return f"Approval {state}: {tool}" + (f" (by {decided_by})" if decided_by else "")


_DELIVERY_ID_MAX = 32  # the deliveries table's message_id
# A request's and its decision's ids differ only in the prefix (same length: same rest).
_REQUESTED, _DECIDED, _REMINDED = "apr.", "apd.", "apm."


def approval_delivery_id(approval_id: str, *, requested: bool) -> str:
    """The delivery record id of an approval's request or decision: `apr.<id>` / `apd.<id>`,
    or a digest of the id when that would not fit the record's 32 characters.
    """
    return _delivery_id(_REQUESTED if requested else _DECIDED, approval_id)


def approval_reminder_id(approval_id: str) -> str:
    """The delivery record id of an approval's reminder: `apm.<id>` (or a digest, as above)."""
    return _delivery_id(_REMINDED, approval_id)


def _delivery_id(prefix: str, approval_id: str) -> str:
    if len(prefix) + len(approval_id) <= _DELIVERY_ID_MAX:
        return prefix + approval_id
    digest = hashlib.sha256(approval_id.encode("utf-8")).hexdigest()
    return prefix + digest[: _DELIVERY_ID_MAX - len(prefix)]


def alert_delivery_id(event: JobAlert) -> str:
    """The delivery record id of a job's alert: one per job, alert and episode (its time), so
    the outbox sends each once and a later episode again: `alr.` + a digest.
    """
    key = f"{event.job_id}|{event.type}|{event.at.isoformat()}"
    return "alr." + hashlib.sha256(key.encode("utf-8")).hexdigest()[: _DELIVERY_ID_MAX - 4]


def _short_json(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
