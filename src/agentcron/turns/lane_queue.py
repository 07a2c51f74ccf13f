"""One session's turns in order: the one running and those waiting behind it (pure, no I/O)."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentcron.agent.runner import TurnSource
from agentcron.domain.attachments import Attachment
from agentcron.domain.runs import ClaimedFire
from agentcron.store.writes import WriteResult
from agentcron.turns.fire_turn import FireTurn


@dataclass(eq=False)
class Pending:
    """A turn waiting in its lane: a user (or hook) message, or a fire."""

    turn_id: str
    source: TurnSource
    content: str
    fire: ClaimedFire | None = None
    started: bool = False  # its start is committed: it can only end, never be handed back
    # A message's files: in memory only (a turn adopted after a restart has none; its
    # transcript entry, written at the start, says what they were).
    attachments: tuple[Attachment, ...] = ()
    # The session it is a turn of; in unified mode a shared automation's fire moves, at its
    # start, to the thread the person last talked in ("" until its lane sets it).
    session_key: str = ""
    # The lane's own session when it is not `session_key` (unified mode: `unified:default`):
    # its turn lease is taken too, so that turns of one memory never overlap, in any process.
    lease_key: str | None = None
    # Its start, submitted with the end of the turn before it (one transaction for both;
    # `Lanes._pipeline`), and the slot taken for it then; its prompt, rendered then.
    early: asyncio.Future[WriteResult] | None = None
    prepared: FireTurn | None = None
    # What its fire's gate said when it let the turn through (its run's `delivery` keeps it).
    gate: dict[str, Any] | None = None
    # What its session's quiet hours did to it (domain/quiet.py `quiet_record`): a `wait`
    # fire waited until their end (not late for that wait); its run's `delivery` keeps it.
    quiet: dict[str, Any] | None = None
    waited_until: datetime | None = None


@dataclass(eq=False)
class LaneQueue:
    """The turns of one session, first in first out. The head is `current` from `begin` to
    `end`; everything behind it waits. A turn whose start is not committed can still be handed
    back (shutdown); a started one can only end.
    """

    key: str
    queue: deque[Pending] = field(default_factory=deque)
    current: Pending | None = None

    def push(self, pending: Pending) -> None:
        self.queue.append(pending)

    def begin(self) -> Pending | None:
        """Make the head current (None when nothing waits)."""
        self.current = self.queue[0] if self.queue else None
        return self.current

    def end(self, pending: Pending) -> None:
        """`pending` is over (ended, or handed back): the next one may begin."""
        self.current = None
        if self.queue and self.queue[0] is pending:
            self.queue.popleft()

    @property
    def busy(self) -> bool:
        """A turn runs or waits here."""
        return self.current is not None or bool(self.queue)

    @property
    def waiting(self) -> int:
        """Turns queued behind the current one (all of them when none is current)."""
        ahead = self.current is not None and bool(self.queue) and self.queue[0] is self.current
        return len(self.queue) - ahead

    def take_waiting(self) -> list[Pending]:
        """Remove and return every turn that is not current (a shutdown hands them back)."""
        waiting = [p for p in self.queue if p is not self.current]
        self.queue = deque(p for p in self.queue if p is self.current)
        return waiting
