"""The store as its users see it: narrow protocols with contract docstrings (SqlStore implements
all of them; the contract tests in tests/integration/test_store_contract.py hold them over SQLite
and PostgreSQL).

The engine needs the fire ledger, the lanes the transcripts and turns, the journal one group
commit; each is typed against its protocol, not against `SqlStore`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from agentcron.store.models import (
    ClaimedFire,
    ClaimResult,
    FirePlan,
    Job,
    MemoryScope,
    Message,
    Run,
    Session,
    Turn,
    TurnState,
)
from agentcron.store.turn_store import TurnRecovery
from agentcron.store.writes import JobFinish, JobOutcome, Write, WriteResult

__all__ = ["Finisher", "FireLedger", "GroupCommit", "LaneStore", "Planner", "Transcripts"]

Planner = Callable[[Job, datetime, int, int], FirePlan]
"""(job, now, active runs of the job, waiting runs of the job) -> what to do with its due fires."""

Finisher = Callable[[Job, JobOutcome], JobFinish]
"""(job as stored now, outcome) -> new values for FINISH_COLUMNS, and whether it is removed."""


class FireLedger(Protocol):
    """The engine's part: claiming due fires under leases, and recovering them."""

    async def claim_due(
        self,
        now: datetime,
        *,
        owner: str,
        lease_until: datetime,
        limit: int,
        planner: Planner,
        due_by: datetime | None = None,
    ) -> ClaimResult:
        """In one transaction: up to `limit` jobs due by `due_by` (default `now`), each
        planned by `planner`, advanced under a version compare-and-set, its runs inserted
        (claimed by `owner` until `lease_until`; missed/skipped ones terminal) and, for
        session-turn fires, their turn records opened. A fire is claimed at most once.
        """
        ...

    async def renew_leases(
        self, owner: str, until: datetime, turn_until: datetime | None = None
    ) -> int:
        """Extend `owner`'s active run leases (and its session turn leases); how many."""
        ...

    async def release(self, owner: str, run_ids: Sequence[str]) -> int:
        """Give back runs that never started (graceful stop), with their waiting turns, for
        the next engine to adopt.
        """
        ...

    async def reap(self, now: datetime, owner: str, is_dead: Callable[[str], bool]) -> list[Run]:
        """Settle the active runs of owners that are gone: a `running` one becomes
        `interrupted` (never re-run silently), one that never started is released.
        """
        ...

    async def adopt_released(
        self, owner: str, lease_until: datetime, now: datetime
    ) -> list[ClaimedFire]:
        """Take over released runs (claimed by a stopped engine, never started)."""
        ...

    async def earliest_foreign_lease(self, owner: str) -> datetime | None:
        """When the next lease of another owner's active run expires (to reap it then)."""
        ...

    async def prune_runs(
        self, now: datetime, *, keep_per_job: int, max_age: timedelta, job_ids: Iterable[str] = ()
    ) -> int:
        """Delete terminal runs beyond `keep_per_job` per job or older than `max_age`."""
        ...


class Transcripts(Protocol):
    """The lanes' part of the sessions store: sessions, transcript entries and turns."""

    async def ensure_session(
        self,
        key: str,
        now: datetime,
        *,
        channel: str | None = None,
        chat_id: str | None = None,
        channel_meta: dict[str, Any] | None = None,
        title: str | None = None,
        tz: str = "UTC",
    ) -> Session:
        """The session `key`, created with these values when it does not exist."""
        ...

    async def get_session(self, key: str) -> Session:
        """The session; SessionNotFoundError when there is none."""
        ...

    async def append_message(
        self,
        session_key: str,
        role: str,
        content: str,
        now: datetime,
        meta: dict[str, Any] | None = None,
    ) -> Message:
        """Append one entry (append-only, seq from the session's counter)."""
        ...

    async def history(self, session_key: str, *, before: int, limit: int) -> list[Message]:
        """The newest `limit` entries with seq below `before`, oldest first; one indexed read,
        whatever the transcript's length.
        """
        ...

    async def history_across(
        self, scope: MemoryScope, session_key: str, *, before: int, limit: int
    ) -> list[Message]:
        """The same across the sessions of one memory scope, as one timeline."""
        ...

    async def open_turn(
        self,
        session_key: str,
        source: str,
        content: str,
        now: datetime,
        *,
        owner: str,
        state: TurnState = TurnState.QUEUED,
        run_id: str | None = None,
        title: str | None = None,
    ) -> Turn:
        """Record a turn waiting in its lane (owned by `owner` until it starts or is released)."""
        ...

    async def set_turn_reply(self, turn_id: str, message_id: str) -> None:
        """Point a turn at its closing entry (written outside the turn's own end write)."""
        ...

    async def release_turns(self, turn_ids: list[str], owner: str) -> int:
        """Give waiting turns back (graceful stop): the next process to start adopts them."""
        ...

    async def recover_turns(
        self, now: datetime, owner: str, is_dead: Callable[[str], bool]
    ) -> TurnRecovery:
        """At start: close turns cut off by a dead owner (interrupted, visible notice) and
        hand back waiting ones (`TurnRecovery`).
        """
        ...


class LaneStore(Protocol):
    """What the lanes use: the transcripts, and giving back runs at a graceful stop."""

    @property
    def sessions(self) -> Transcripts: ...

    async def release(self, owner: str, run_ids: Sequence[str]) -> int:
        """As `FireLedger.release`."""
        ...


class GroupCommit(Protocol):
    """The journal's part: one transaction for a batch of the fire -> turn path's writes."""

    async def apply(self, writes: Sequence[Write], finisher: Finisher) -> list[WriteResult]:
        """Apply the writes in one transaction, in order; one result per write. A start whose
        session is held by another owner's live lease writes nothing (its result says until
        when); a finish or run change of a run that already ended is a no-op.
        """
        ...
