"""The WebSocket stream: per-session turn events (user and scheduled alike) and job updates.

Protocol (JSON text frames). The client authenticates first, with `Authorization: Bearer` on the
upgrade request or with a first frame `{"type": "auth", "token": ...}` (browsers cannot set
headers on a WebSocket). Then:

- `{"type": "subscribe", "session_key": K}` -> `{"type": "subscribed", "session_key": K,
  "running_turn": id | null, "replay": [events of the turn in progress]}`, then every event of K's
  turns: `stream_start`, `text_delta`, `thinking_delta`, `tool_started`, `tool_call`,
  `approval_requested` / `approval_decided` (a gated tool call waiting for a person, and its
  end), any other event its runner emits (as `{"type": name, ...}`), `stream_end`. Approvals are not
  in the replay: a client that (re)subscribes lists the pending ones with
  `GET /api/approvals?session_key=K`;
- `{"type": "unsubscribe", "session_key": K}`;
- `{"type": "message", "session_key": K, "content": text}` -> `{"type": "accepted", "turn_id"}`
  (the message goes through the session's lane like any other; the session must exist:
  create it with `POST /api/sessions`, else an error frame says so);
- `{"type": "ping"}` -> `{"type": "pong"}`.

Every authenticated client also gets the out-of-turn events of all sessions, for sidebars:
`automation_update`, `recall_update` (created, updated, paused, resumed, skipped, deleted,
deferred, fired, finished, settled), `session_sync`, `message` (a message posted outside a turn,
such as a delivered legacy result), `session_deleted`, and `delivery_succeeded` /
`delivery_failed` (a channel's attempt to deliver a message), and `system_event` (the text of a
`system_event` job such as a heartbeat, when it fires, with `source`; its `session_key` is its
job's session, "" for none). Every event carries its `session_key`;
the shapes are in `agentcron.server.events_json`. Errors come back as
`{"type": "error", "detail": ...}`; a binary frame, or a text frame that is not a JSON object, is
answered with one too (the connection stays open). A frame is at most 1 MiB.

Replicas (several `agentcron serve` on one PostgreSQL database): a client sees the events of
every replica, not only of the one it is connected to, in the same frames (`relay_events.py`).
A turn that runs on another replica streams here a few milliseconds later, in order. The
`subscribed` frame of a session whose turn runs on another replica names that turn and
replays its events as relayed here (from its `stream_start`, if this replica heard it: one
that started before this replica did replays nothing; the rest of the turn streams live all
the same). The relay is best effort: an event lost in a database fault is not sent again,
and an event too big to relay comes as a `session_sync` (a delta comes in pieces); the
transcript, re-read at `stream_end` and `session_sync`, is always whole. On SQLite there is
no relay: a client sees the turns of its own process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect
from starlette.websockets import WebSocketDisconnected

from agentcron.app import AgentCron
from agentcron.domain.events import (
    ApprovalDecided,
    ApprovalRequested,
    DeliveryFailed,
    DeliverySucceeded,
    Event,
    JobAlert,
    JobEvent,
    MessagePosted,
    RunnerEvent,
    SessionDeleted,
    SessionSync,
    StreamEnd,
    StreamStart,
    SystemEventFired,
    TextDelta,
    ThinkingDelta,
    ToolCalled,
    ToolStarted,
)
from agentcron.errors import AgentcronError
from agentcron.server.auth import bearer, token_matches
from agentcron.server.events_json import event_json
from agentcron.server.relay_events import EventRelay, Seam
from agentcron.session_keys import check_session_key

log = logging.getLogger(__name__)

# Events of a turn go to the clients subscribed to its session; the rest to every client.
_TURN_EVENTS = (
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolStarted,
    ToolCalled,
    ApprovalRequested,
    ApprovalDecided,
    RunnerEvent,
    StreamEnd,
)
_GLOBAL_EVENTS = (
    SystemEventFired,
    JobEvent,
    SessionSync,
    MessagePosted,
    SessionDeleted,
    DeliverySucceeded,
    DeliveryFailed,
    JobAlert,  # overdue, failing, recovered, ending: a badge in every open web UI
)
_QUEUE_LIMIT = 10_000  # events buffered per client; a client that falls this far behind is cut
_AUTH_TIMEOUT_S = 10.0


class _Client:
    def __init__(self, socket: WebSocket) -> None:
        self.socket = socket
        self.sessions: set[str] = set()
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(_QUEUE_LIMIT)
        self.overflowed = False

    def offer(self, event: dict[str, Any]) -> None:
        """Never blocks: the lane that publishes must not wait for a slow client."""
        if self.overflowed:
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True
            with contextlib.suppress(asyncio.QueueFull):
                self.queue.get_nowait()
                self.queue.put_nowait(None)  # tells the sender to close the connection


class Hub:
    """Fans the bus's events out to WebSocket clients (and, with a relay, the other replicas'
    events too, and this process's events to them: `relay_events`).
    """

    def __init__(self, cron: AgentCron, token: str) -> None:
        self._cron = cron
        self._token = token
        self._clients: set[_Client] = set()
        self.relay: EventRelay | None = None
        self._unsubscribe = cron.subscribe(self._on_event, types=(*_TURN_EVENTS, *_GLOBAL_EVENTS))

    def relay_through(self, signals: Seam) -> EventRelay:
        """Relay this process's events to the other replicas and theirs to these clients
        (`serve` on PostgreSQL; subscribe before the signals start listening).
        """
        if self.relay is None:
            self.relay = EventRelay(signals, self.deliver)
        return self.relay

    def close(self) -> None:
        self._unsubscribe()

    def _on_event(self, event: Event) -> None:
        # Called inside the publisher (often a turn): convert once, queue only.
        everyone = isinstance(event, _GLOBAL_EVENTS)
        relay = self.relay
        if relay is None:
            payload: dict[str, Any] | None = None
            for client in list(self._clients):
                if everyone or event.session_key in client.sessions:
                    if payload is None:
                        payload = event_json(event)
                    client.offer(payload)
            return
        wire = event_json(event)
        relay.send(wire, everyone)
        if relay.fresh(wire):
            self.deliver(wire, everyone)

    def deliver(self, payload: dict[str, Any], everyone: bool) -> None:
        """Queue one event (its wire dict) for every client, or for its session's subscribers."""
        key = payload.get("session_key")
        for client in list(self._clients):
            if everyone or key in client.sessions:
                client.offer(payload)

    async def serve(self, socket: WebSocket) -> None:
        await socket.accept()
        if not await self._authenticate(socket):
            return
        client = _Client(socket)
        self._clients.add(client)
        sender = asyncio.create_task(self._send(client), name="ws-send")
        try:
            await self._receive(client)
        except WebSocketDisconnect:
            pass
        finally:
            self._clients.discard(client)
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)

    async def _authenticate(self, socket: WebSocket) -> bool:
        given = bearer(socket)
        if given is None:
            try:
                first = await asyncio.wait_for(_receive_json(socket), _AUTH_TIMEOUT_S)
            except (TimeoutError, WebSocketDisconnect, ValueError):
                await _close(socket, 4401, 'authenticate first: {"type": "auth", "token": ...}')
                return False
            if isinstance(first, dict) and first.get("type") == "auth":
                given = str(first.get("token") or "")
        if not token_matches(given, self._token):
            await _close(socket, 4401, "wrong or missing token")
            return False
        await socket.send_json({"type": "ready"})
        return True

    async def _send(self, client: _Client) -> None:
        while True:
            event = await client.queue.get()
            if event is None:
                await _close(client.socket, 4408, "too slow: events were dropped; reconnect")
                return
            await client.socket.send_json(event)

    async def _receive(self, client: _Client) -> None:
        while True:
            try:
                frame = await _receive_json(client.socket)
            except ValueError as exc:
                client.offer({"type": "error", "detail": str(exc)})
                continue
            if not isinstance(frame, dict):
                client.offer({"type": "error", "detail": "frames must be JSON objects"})
                continue
            try:
                await self._handle(client, frame)
            except AgentcronError as exc:  # the caller's mistake: say what to fix
                client.offer({"type": "error", "detail": str(exc)})
            except Exception as exc:  # one bad frame must not end the connection
                log.warning(
                    "websocket frame failed: %s", exc, extra={"frame_type": frame.get("type")}
                )
                client.offer({"type": "error", "detail": f"{type(exc).__name__}: {exc}"})

    async def _handle(self, client: _Client, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        key = frame.get("session_key")
        if kind == "ping":
            client.offer({"type": "pong"})
            return
        if kind not in ("subscribe", "unsubscribe", "message"):
            client.offer(
                {
                    "type": "error",
                    "detail": f"unknown frame type {kind!r}; "
                    "accepted: subscribe, unsubscribe, message, ping",
                }
            )
            return
        if not isinstance(key, str) or not key:
            client.offer({"type": "error", "detail": f"{kind} needs a session_key"})
            return
        check_session_key(key)
        if kind == "subscribe":
            # Replay and subscription happen without an await in between, so no event is lost
            # or sent twice: the replay holds everything of the turn so far, the queue the rest.
            client.sessions.add(key)
            sessions = self._cron.sessions
            replay = [event_json(e) for e in sessions.replay(key)]
            running = sessions.running_turn(key)
            if running is None and self.relay is not None:
                running, replay = self.relay.turn_in_progress(key)  # a turn of another replica
            client.offer(
                {
                    "type": "subscribed",
                    "session_key": key,
                    "running_turn": running,
                    "replay": replay,
                }
            )
        elif kind == "unsubscribe":
            client.sessions.discard(key)
            client.offer({"type": "unsubscribed", "session_key": key})
        else:
            content = frame.get("content")
            if not isinstance(content, str) or not content.strip():
                client.offer({"type": "error", "detail": "message needs some content"})
                return
            turn = await self._cron.sessions.send(key, content, create=False)
            client.offer({"type": "accepted", "session_key": key, "turn_id": turn.id})


async def _receive_json(socket: WebSocket) -> Any:
    """The next frame as JSON: ValueError for a binary frame or text that is not JSON,
    WebSocketDisconnect when the client went away.
    """
    try:
        message = await socket.receive()
    except WebSocketDisconnected:
        # The sender met the closed connection first and starlette marked the socket
        # disconnected: the client is gone, as for a disconnect message (not a server error).
        raise WebSocketDisconnect(1006) from None
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000), message.get("reason"))
    text = message.get("text")
    if text is None:
        raise ValueError("binary frames are not read: send JSON objects as text frames")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise ValueError("frames must be JSON objects") from None


async def _close(socket: WebSocket, code: int, reason: str) -> None:
    with contextlib.suppress(RuntimeError, WebSocketDisconnect):
        await socket.close(code=code, reason=reason)
