"""Sessions, turns and transcript entries, and how a turn's end relates to its run's."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentcron.domain.budgets import Budget, Spend
from agentcron.domain.states import TurnState


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
    runner_url: str | None = None  # its turns' own runner URL; None = the process's runner
    # its quiet hours in its zone, "HH:MM-HH:MM" (schedule/quiet.py); None: none
    quiet_hours: str | None = None
    # its caps across its jobs' fires and (only with caps) its running figures
    # (domain/budgets.py)
    budget: Budget | None = None
    spend: Spend | None = None


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

    def lane_of(self, session_key: str) -> str:
        """The lane (and turn lease) all of the scope's turns share: its first listed key
        (unified mode: `unified:default`), so that they never overlap; with no listed key,
        each session keeps its own.
        """
        return self.keys[0] if self.keys else session_key

    def includes(self, session_key: str) -> bool:
        """Whether `session_key` is one of the scope's sessions."""
        return session_key in self.keys or session_key.startswith(self.prefixes)
