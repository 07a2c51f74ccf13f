"""The live-event relay between `serve` replicas on one PostgreSQL database.

Every event the WebSocket hub sends its clients and that happened in this process is serialized
once (its wire shape, `events_json.event_json`) and sent to the other replicas through the
signal seam (`SignalHub.publish(Topic.EVENTS, ...)`, PostgreSQL NOTIFY, best effort). A replica
hands what it hears to its own hub's clients exactly as a local event (turn events to the
session's subscribers, the rest to everyone) and never to its EventBus: channels, metrics and
waiters see each event once, in the process where it happened.

Wire format: one NOTIFY payload is a batch of lines, one event a line: a scope letter (`t`, the
session's subscribers; `g`, every client) and the event's JSON (compact; JSON escapes every
newline, so a line never holds one). Batching: the first event waits at most `linger` seconds
(15 ms) for company; a batch is sent at once when it holds `flush_at` bytes (6,000), and never
exceeds `limit` (6,900: the seam's payload limit less the origin in front). One sender task and
the seam's one publishing connection keep the events of a process in order (NOTIFY delivers
the notices of one connection in the order they were sent). The backlog is bounded (1 MB): past
it, while the database does not keep up, new events are not relayed, and their sessions get a
`session_sync` once the backlog is half sent.

An event too big for one payload: a text or thinking delta is split into several deltas whose
texts join to the original; a job update loses its `job` (clients re-read on every update);
anything else (a long tool result, a long posted message) is replaced by a `session_sync` for
its session, so the clients re-read the session.

Replay: while a turn of another replica runs, the events it relayed (`stream_start` and what
the lanes' replay also holds: deltas, tool and runner events) are kept per session, dropped at
its `stream_end`, so a client subscribing here mid-turn gets the turn so far as `replay`
(bounded: `MAX_TURNS` sessions, `MAX_TURN_EVENTS` events of each; past that, the live rest only).

Duplicates: a decision made on one replica for a call waiting on another is announced by both
(the decider and the waiting call's process); the hub shows each approval's decision once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from agentcron.store.signals import Topic

log = logging.getLogger(__name__)

LIMIT = 6_900  # bytes of one payload (the seam allows 7,000 with the origin in front)
FLUSH_AT = 6_000  # a batch this big goes at once
LINGER_S = 0.015  # the first event of a batch waits this long for more
MAX_TURNS = 256  # sessions whose relayed turn in progress is kept for replay
MAX_TURN_EVENTS = 4_000  # events kept of one relayed turn
MAX_DECIDED = 1_024  # approval decisions remembered to show each once
MAX_WAITING_BYTES = 1_000_000  # queued for sending; past it new events are not relayed
# (their sessions get a `session_sync` once half of the backlog is sent)
CLOSE_S = 2.0  # how long a stop waits for the last batches

_DELTAS = frozenset({"text_delta", "thinking_delta"})
_JOB_UPDATES = frozenset({"automation_update", "recall_update"})
_NOT_REPLAYED = frozenset({"approval_requested", "approval_decided"})

Deliver = Callable[[dict[str, Any], bool], None]
"""Hands one event (its wire dict) to the local clients: to everyone (True) or to its
session's subscribers (False).
"""


class Seam(Protocol):
    """What the relay needs of the signal seam (`store.signals.SignalHub`)."""

    async def publish(self, topic: Topic, payload: str) -> bool: ...

    def subscribe_raw(
        self, topic: Topic, listener: Callable[[str, str], None]
    ) -> Callable[[], None]: ...


class _Turn:
    __slots__ = ("events", "full", "turn_id")

    def __init__(self, turn_id: str | None, first: dict[str, Any]) -> None:
        self.turn_id = turn_id
        self.events: list[dict[str, Any]] = [first]
        self.full = False


class EventRelay:
    """Sends this process's hub events to the other replicas; hands theirs to `deliver`."""

    def __init__(
        self,
        signals: Seam,
        deliver: Deliver,
        *,
        linger: float = LINGER_S,
        flush_at: int = FLUSH_AT,
        limit: int = LIMIT,
    ) -> None:
        self._signals = signals
        self._deliver = deliver
        self.linger = linger
        self.flush_at = flush_at
        self.limit = limit
        self._lines: list[tuple[str, int]] = []  # (line, bytes) waiting to be sent, in order
        self._size = 0  # bytes of _lines (each + 1 for its newline)
        self._since = 0.0  # loop time the oldest waiting line came
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._turns: OrderedDict[str, _Turn] = OrderedDict()
        self._decided: OrderedDict[str, None] = OrderedDict()
        self.sent = 0  # payloads published (tests, the measurement script)
        self.dropped = 0  # payloads the seam could not send
        self.lost = 0  # events not queued: too much was waiting
        self._unsynced: set[str] = set()  # sessions of those events
        self.received = 0  # events heard from other replicas
        self._unsubscribe = signals.subscribe_raw(Topic.EVENTS, self._heard)

    # -- sending ---------------------------------------------------------------------------

    def send(self, event: dict[str, Any], everyone: bool) -> None:
        """Queue one local event (its wire dict) for the other replicas. Never blocks."""
        if self._closed:
            return
        line = _line(event, everyone)
        if line is None:
            return
        size = len(line.encode())
        key = event.get("session_key")
        key = key if isinstance(key, str) else ""
        if size > self.limit:
            for piece in self._fit(event, everyone):
                self._queue(piece, len(piece.encode()), key)
        else:
            self._queue(line, size, key)
        if event.get("type") == "stream_end":
            self._since = 0.0  # a turn's last event: no linger, the burst is over

    def _queue(self, line: str, size: int, key: str = "") -> None:
        if self._size > MAX_WAITING_BYTES:  # the database does not keep up (or is away)
            self.lost += 1
            self._unsynced.add(key)  # told to re-read once the backlog is sent
            return
        loop = asyncio.get_running_loop()
        if not self._lines:
            self._since = loop.time()
        self._lines.append((line, size))
        self._size += size + 1
        if self._task is None:
            self._task = loop.create_task(self._run(), name="agentcron-relay-send")
        self._ready.set()

    def _fit(self, event: dict[str, Any], everyone: bool) -> list[str]:
        """Lines under the limit that stand for one event too big for a payload."""
        kind = event.get("type")
        text = event.get("text")
        if kind in _DELTAS and isinstance(text, str):
            overhead = len((_line({**event, "text": ""}, everyone) or "").encode())
            step = max(1, (self.limit - overhead) // 6)  # JSON writes a character in <= 6 bytes
            pieces = [
                _line({**event, "text": text[i : i + step]}, everyone)
                for i in range(0, len(text), step)
            ]
            return [p for p in pieces if p is not None]
        if kind in _JOB_UPDATES and "job" in event:
            trimmed = {k: v for k, v in event.items() if k != "job"}
            line = _line(trimmed, everyone)
            if line is not None and len(line.encode()) <= self.limit:
                return [line]
        key = event.get("session_key")
        sync = _line({"type": "session_sync", "session_key": key if isinstance(key, str) else ""})
        log.debug("an event too big to relay went as a session_sync", extra={"event": kind})
        return [sync] if sync is not None else []

    def _take(self) -> str:
        """The oldest waiting lines that fit in one payload, joined."""
        count = size = 0
        for _, cost in self._lines:
            if count and size + cost + 1 > self.limit + 1:
                break
            count += 1
            size += cost + 1
        taken = [line for line, _ in self._lines[:count]]
        del self._lines[:count]
        self._size -= size
        # What is left waited through the send (or did not fit): it goes next, no linger.
        self._since = 0.0
        return "\n".join(taken)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._ready.wait()
            if not self._lines:
                self._ready.clear()
                if self._closed:
                    return
                continue
            wait = self._since + self.linger - loop.time()
            if wait > 0 and self._size < self.flush_at and not self._closed:
                await asyncio.sleep(wait)  # let the burst gather (the linger bounds latency)
            payload = self._take()
            if self._unsynced and self._size < MAX_WAITING_BYTES // 2:
                self._resync()
            if await self._signals.publish(Topic.EVENTS, payload):
                self.sent += 1
            else:
                self.dropped += 1

    def _resync(self) -> None:
        """A `session_sync` for each session whose events were not relayed (the backlog was
        full): the other replicas' clients re-read it.
        """
        keys, self._unsynced = self._unsynced, set()
        for key in sorted(keys):
            line = _line({"type": "session_sync", "session_key": key})
            if line is not None:
                self._queue(line, len(line.encode()), key)

    async def close(self) -> None:
        """Stop relaying: send what waits (for at most `CLOSE_S`), stop hearing."""
        self._unsubscribe()
        self._closed = True
        task, self._task = self._task, None
        if task is None:
            return
        self._ready.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_S)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- hearing ---------------------------------------------------------------------------

    def _heard(self, origin: str, payload: str) -> None:
        for line in payload.split("\n"):
            scope, body = line[:1], line[1:]
            try:
                event = json.loads(body)
            except ValueError:
                log.debug("a relayed line is not JSON", extra={"origin": origin})
                continue
            if scope not in ("t", "g") or not isinstance(event, dict):
                continue
            self.received += 1
            everyone = scope == "g"
            if not everyone:
                self._keep(event)
            if self.fresh(event):
                self._deliver(event, everyone)

    def fresh(self, event: dict[str, Any]) -> bool:
        """False for an approval decision already shown (the decider and the waiting call's
        process both announce one that was made elsewhere).
        """
        if event.get("type") != "approval_decided":
            return True
        approval_id = str(event.get("approval_id"))
        if approval_id in self._decided:
            return False
        self._decided[approval_id] = None
        if len(self._decided) > MAX_DECIDED:
            self._decided.popitem(last=False)
        return True

    def _keep(self, event: dict[str, Any]) -> None:
        """Keep a relayed turn's events for replay until its end."""
        key = event.get("session_key")
        if not isinstance(key, str):
            return
        kind = event.get("type")
        if kind == "stream_start":
            turn_id = event.get("turn_id")
            self._turns.pop(key, None)
            self._turns[key] = _Turn(turn_id if isinstance(turn_id, str) else None, event)
            if len(self._turns) > MAX_TURNS:
                self._turns.popitem(last=False)  # oldest: perhaps a replica that died mid-turn
        elif kind == "stream_end":
            self._turns.pop(key, None)
        elif kind not in _NOT_REPLAYED:
            turn = self._turns.get(key)
            if turn is not None and not turn.full:
                turn.events.append(event)
                if len(turn.events) >= MAX_TURN_EVENTS:
                    turn.full = True
                    turn.events = []  # a replay with a hole would mislead: the live rest only

    def turn_in_progress(self, session_key: str) -> tuple[str | None, list[dict[str, Any]]]:
        """The running turn of `session_key` on another replica, as relayed here, and its
        events so far (None and [] when none is known).
        """
        turn = self._turns.get(session_key)
        if turn is None:
            return None, []
        return turn.turn_id, list(turn.events)


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # made once


def _line(event: dict[str, Any], everyone: bool = True) -> str | None:
    try:
        body = _encode(event)
    except (TypeError, ValueError) as exc:  # a runner's event that is not JSON
        log.warning("an event could not be relayed: %s", exc, extra={"event": event.get("type")})
        return None
    return ("g" if everyone else "t") + body
