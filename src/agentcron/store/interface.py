"""The store as its users see it: narrow protocols with contract docstrings (SqlStore implements
all of them; the contract tests in tests/integration/test_store_contract.py hold them over SQLite
and PostgreSQL).

The engine needs the fire ledger, the lanes the transcripts and turns, the journal one group
commit; each is typed against its protocol, not against `SqlStore`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from agentcron.domain.alerts import OverdueCandidate
from agentcron.domain.approvals import Approval
from agentcron.domain.budgets import Budget, Spend
from agentcron.domain.deliveries import Delivery, DeliveryCursor, DeliveryState
from agentcron.domain.grants import Grant
from agentcron.domain.jobs import Job, JobKind, Recall, RecallState
from agentcron.domain.runs import ClaimedFire, ClaimResult, FirePlan, Run, UsageRow
from agentcron.domain.sessions import MemoryScope, Message, Role, Session, Turn
from agentcron.domain.states import RunState, TurnState
from agentcron.store.alert_store import AlertColumn
from agentcron.store.owners import LiveWork, OrphanSettlement, OwnerRecord
from agentcron.store.relay_arms import ArmChange
from agentcron.store.turn_store import TurnRecovery
from agentcron.store.writes import ArmedJob, JobFinish, JobOutcome, Write, WriteResult

__all__ = [
    "AlertLedger",
    "ApprovalRecords",
    "DeliveryLedger",
    "DeliveryRecords",
    "EngineLedger",
    "Finisher",
    "FireLedger",
    "GrantRecords",
    "GroupCommit",
    "JobCatalog",
    "LaneStore",
    "OwnerRegistry",
    "Planner",
    "RelayArmLedger",
    "RunRecords",
    "SessionRecords",
    "Transcripts",
    "WriteQueue",
]

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
        """Take over released runs (claimed by a stopped engine, never started; or a
        person's manual run, `RunRecords.insert_manual_run`).
        """
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
        runner_url: str | None = None,
    ) -> Session:
        """The session `key`, created with these values when it does not exist."""
        ...

    async def get_session(self, key: str) -> Session:
        """The session; SessionNotFoundError when there is none."""
        ...

    async def append_message(
        self,
        session_key: str,
        role: Role,
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

    async def last_talked(self, scope: MemoryScope) -> str | None:
        """The session of the scope where a person last sent a message (its newest user
        turn); None when nobody has yet.
        """
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


class GroupCommit(Protocol):
    """The journal's part: one transaction for a batch of the fire -> turn path's writes."""

    async def apply(self, writes: Sequence[Write], finisher: Finisher) -> list[WriteResult]:
        """Apply the writes in one transaction, in order; one result per write. A start whose
        session is held by another owner's live lease writes nothing (its result says until
        when); a finish or run change of a run that already ended is a no-op.
        """
        ...


class WriteQueue(Protocol):
    """The journal as its writers see it (the group commit in front of `GroupCommit`)."""

    async def write(self, write: Write) -> WriteResult:
        """Queue `write`; return its result once the transaction holding it has committed."""
        ...


class JobCatalog(Protocol):
    """The jobs service's part: reading and changing stored jobs (the service creates jobs
    through the journal's `InsertJobs`, so concurrent creates share a transaction).
    """

    async def count_jobs(self) -> int:
        """How many jobs are stored (system jobs included)."""
        ...

    async def get_job(self, job_id: str) -> Job:
        """The job; JobNotFoundError when there is none."""
        ...

    async def list_jobs(
        self,
        *,
        session_key: str | None = None,
        kind: JobKind | None = None,
        enabled: bool | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> list[Job]:
        """Jobs matching every filter given, oldest first (by id), those with an id after
        `after`, at most `limit`.
        """
        ...

    async def update_job(
        self, job_id: str, changes: Mapping[str, Any], now: datetime, *, expected_version: int
    ) -> Job:
        """Apply `changes` (column values) if the job is still at `expected_version` (its
        version then goes up by one); VersionConflictError when it moved on.
        """
        ...

    async def reschedule_job(
        self,
        job_id: str,
        changes: Mapping[str, Any],
        now: datetime,
        *,
        expected_version: int,
        run_id: str | None,
        note: Mapping[str, Any],
    ) -> Job:
        """As `update_job`, and in the same transaction `note` added to the `reschedules` of
        run `run_id` (when given and kept): the agent's move of the job's next fire.
        """
        ...

    async def delete_job(
        self, job_id: str, *, allow_system: bool = False, now: datetime | None = None
    ) -> Job:
        """Delete the job and return it as it was; system jobs only with `allow_system`
        (SystemJobError). A deleted recall stays readable in `recall_history` as cancelled.
        """
        ...

    async def recall_history(
        self, session_key: str, *, states: Iterable[RecallState] | None = None, limit: int = 100
    ) -> list[Recall]:
        """The session's recalls that fired or were cancelled, newest first."""
        ...

    async def delete_finished_jobs(self, before: datetime) -> list[Job]:
        """Delete the done jobs (`finished_at` set) that finished before `before`; returns
        them as they were.
        """
        ...


class AlertLedger(Protocol):
    """The alert sweep's part (`service/alerts.py`): narrow reads that return candidates only,
    each from an index range (never every job or every run), and the once-per-episode marks.
    """

    async def overdue_candidates(
        self, *, due_before: datetime, open_before: datetime | None, limit: int
    ) -> list[OverdueCandidate]:
        """Enabled jobs whose `next_run_at` is before `due_before` (their due fire was not
        claimed), and the jobs of runs still open (claimed, queued, deferred, running) whose
        `fire_at` is before `open_before` (None: not asked), with that oldest open run; at most
        `limit` of each kind. Jobs outside both ranges are not read.
        """
        ...

    async def alerted_jobs(self, *, limit: int) -> list[Job]:
        """The jobs with an open overdue or failing episode (`overdue_since` or
        `failing_since` set), by id, at most `limit`.
        """
        ...

    async def overdue_jobs(self, *, limit: int) -> list[Job]:
        """The jobs with an open overdue episode (`overdue_since` set), by id, at most `limit`."""
        ...

    async def failing_candidates(self, *, threshold: int, limit: int) -> list[Job]:
        """Jobs with `consecutive_failures >= threshold` and no failing episode open yet."""
        ...

    async def ending_candidates(
        self, *, end_before: datetime, runs_left: int, limit: int
    ) -> list[Job]:
        """Enabled, not done jobs not yet warned (`ending_warned_at` NULL) whose `end_at` is
        at or before `end_before` or whose `remaining_runs` is at most `runs_left`.
        """
        ...

    async def mark_alert(
        self,
        job_id: str,
        column: AlertColumn,
        value: datetime | None,
        *,
        expected: datetime | None,
    ) -> Job | None:
        """Set the alert column (`overdue_since`, `failing_since`, `ending_warned_at`) to
        `value` if it is still `expected` (a compare-and-set; the job's version and schedule
        are untouched); the job after the change, or None when another process (or the job's
        deletion) came first.
        """
        ...


class RunRecords(Protocol):
    """Reading run records, and what runs and turns cost."""

    async def get_run(self, run_id: str) -> Run:
        """The run; RunNotFoundError when there is none."""
        ...

    async def list_runs(
        self,
        *,
        job_id: str | None = None,
        session_key: str | None = None,
        states: Iterable[RunState] | None = None,
        since: datetime | None = None,
        before: tuple[datetime, str] | None = None,
        limit: int | None = 100,
    ) -> list[Run]:
        """Runs matching the filters, newest fire first (ties by id, newest first), fired at
        or after `since`, after the run whose `(fire_at, id)` is `before` (the page before),
        at most `limit` (None: all).
        """
        ...

    async def has_runs(self, job_id: str) -> bool:
        """Whether any run of `job_id` is kept (a deleted job's history outlives it)."""
        ...

    async def usage_rows(
        self,
        *,
        since: datetime,
        until: datetime,
        session_key: str | None = None,
        job_id: str | None = None,
    ) -> list[UsageRow]:
        """Each turn opened and each run without a turn fired in `[since, until)`, with its
        tokens and cost (of one session, of one job's fires, when given).
        """
        ...

    async def usage_totals(
        self, *, job_id: str | None = None, session_key: str | None = None
    ) -> dict[str, Any]:
        """Tokens and cost summed over one job's runs or one session's turns (exactly one of
        the two); `unpriced` counts those whose model has no known price.
        """
        ...

    async def count_runs(self, *, states: Iterable[RunState] | None = None) -> int:
        """How many runs are stored (in one of `states`, when given)."""
        ...

    async def insert_manual_run(self, job_id: str, now: datetime) -> Run:
        """A person's "run now": an unclaimed run of the job marked manual, announced for an
        engine to adopt; the job is not changed. JobNotFoundError when there is no such job,
        ManualRunPendingError while an earlier manual run of it has not ended.
        """
        ...

    async def insert_event_run(
        self, job_id: str, event_id: str, event: str, now: datetime, keep_until: datetime
    ) -> tuple[Run | None, str, bool]:
        """An event posted to the job's trigger: an unclaimed run carrying it, announced for an
        engine to adopt, unless the trigger saw `event_id` before (kept until `keep_until`):
        (the run, its id, seen before). JobNotFoundError when there is no such job.
        """
        ...


class LaneStore(RunRecords, Protocol):
    """What the lanes use: the transcripts, giving back runs at a graceful stop, and the run
    records (a `changes` job's last delivered outcome).
    """

    @property
    def sessions(self) -> Transcripts: ...

    async def release(self, owner: str, run_ids: Sequence[str]) -> int:
        """As `FireLedger.release`."""
        ...


class SessionRecords(Transcripts, Protocol):
    """The sessions service's part: the transcripts, and reading and removing sessions."""

    async def list_sessions(
        self,
        *,
        limit: int | None = None,
        before: tuple[datetime, str] | None = None,
        search: str | None = None,
    ) -> list[Session]:
        """Sessions, most recently updated first (ties by key, last first), after the one
        whose `(updated_at, key)` is `before`, those whose title or key holds `search`
        (case-insensitive), at most `limit`.
        """
        ...

    async def delete_session(self, key: str) -> None:
        """Delete the session with its transcript, turns and deliveries."""
        ...

    async def set_quiet_hours(self, key: str, hours: str | None, now: datetime) -> Session:
        """Set (None: clear) the session's quiet hours ("HH:MM-HH:MM", checked by the
        caller); SessionNotFoundError when there is no such session.
        """
        ...

    async def set_session_budget(
        self, key: str, budget: Budget | None, spend: Spend | None
    ) -> Session:
        """Set the session's budget and its running figures (None: none); a fire skipped
        for it is told again. SessionNotFoundError when there is none.
        """
        ...

    async def get_message(self, message_id: str) -> Message | None:
        """One transcript entry, None when there is none."""
        ...

    async def list_messages(
        self,
        session_key: str,
        *,
        after: int | None = None,
        limit: int | None = None,
        before: int | None = None,
    ) -> list[Message]:
        """The transcript in order, entries after seq `after`, at most `limit`; with `before`
        (a seq), the newest `limit` entries below it, in order.
        """
        ...

    async def get_turn(self, turn_id: str) -> Turn:
        """The turn; TurnNotFoundError when there is none."""
        ...

    async def list_turns(self, session_key: str, *, limit: int | None = None) -> list[Turn]:
        """The session's turns, oldest first."""
        ...


class DeliveryRecords(Protocol):
    """Reading what the channels did with the sessions' messages."""

    async def page(
        self,
        *,
        session_key: str | None = None,
        state: DeliveryState | None = None,
        channel: str | None = None,
        limit: int = 50,
        before: DeliveryCursor | None = None,
    ) -> list[Delivery]:
        """Newest first, at most `limit`, strictly after the cursor `before`."""
        ...

    async def unanswered(
        self,
        channel: str,
        *,
        prefix: str,
        answer_prefix: str,
        since: datetime,
        limit: int = 200,
    ) -> list[Delivery]:
        """The channel's records since `since` with ids `prefix` + rest, not failed, that have
        no record `answer_prefix` + rest: follow-ups nobody recorded. Oldest first.
        """
        ...

    async def get(self, channel: str, message_id: str) -> Delivery:
        """The record; DeliveryNotFoundError when there is none."""
        ...

    async def retry(self, channel: str, message_id: str, *, now: datetime) -> Delivery:
        """Failed -> pending, due now, its deadline counted from now (`retried_at`).
        DeliveryNotFoundError: none; DeliveryNotFailedError: delivered or still pending.
        """
        ...

    async def record_failed(
        self,
        channel: str,
        message_id: str,
        session_key: str,
        payload: dict[str, Any],
        *,
        error: str,
        now: datetime,
    ) -> tuple[Delivery, bool]:
        """Record a delivery failed before any attempt (an unroutable reply), with the
        reason: (record, created); an existing record is returned as it is.
        """
        ...


class DeliveryLedger(DeliveryRecords, Protocol):
    """The channels' part: one delivery record per (channel, message), sent at least once."""

    async def stalled(
        self, channel: str, *, now: datetime, idle_for: timedelta, limit: int = 100
    ) -> list[Delivery]:
        """Pending records of `channel` untouched for `idle_for` whose planned attempt (if
        any) was due that long ago: left by a process that stopped or died. Oldest first.
        """
        ...

    async def enqueue(
        self,
        channel: str,
        message_id: str,
        session_key: str,
        payload: dict[str, Any],
        now: datetime,
    ) -> tuple[Delivery, bool]:
        """Record a pending delivery: (record, created); an existing record is returned as it
        is with `created` False (delivered, failed, or pending from an earlier attempt).
        """
        ...

    async def begin_attempt(
        self,
        channel: str,
        message_id: str,
        *,
        attempts: int,
        now: datetime,
        lease: timedelta | None = None,
    ) -> Delivery | None:
        """Count one more attempt if the record is still pending at `attempts` tries; None
        when it is no longer the caller's to send (settled, or another process began one).
        With a `lease`: the record is in flight (no `next_attempt_at`) until the attempt
        settles, and none begins while another is in flight, unless that one began more
        than `lease` ago.
        """
        ...

    async def mark_delivered(
        self,
        channel: str,
        message_id: str,
        now: datetime,
        *,
        result: dict[str, Any] | None = None,
        external_id: str | None = None,
    ) -> bool:
        """Pending -> delivered, keeping what the far end answered (`result`; None keeps what
        `save_progress` left) and its id of the message; False if it was not pending.
        """
        ...

    async def save_progress(
        self, channel: str, message_id: str, result: dict[str, Any], now: datetime
    ) -> bool:
        """Keep what an attempt in flight achieved so far (the record's `result`), so a later
        attempt in any process goes on from there; False if it is no longer pending.
        """
        ...

    async def mark_retry(
        self, channel: str, message_id: str, *, error: str, next_attempt_at: datetime, now: datetime
    ) -> bool:
        """Stay pending after a failed attempt, the next one at `next_attempt_at`."""
        ...

    async def mark_failed(
        self, channel: str, message_id: str, *, error: str, now: datetime
    ) -> bool:
        """Pending -> failed (permanent error or no attempts left): never retried."""
        ...

    async def pending(self, channel: str, *, limit: int | None = None) -> list[Delivery]:
        """The channel's pending deliveries, oldest first (what a restart resumes)."""
        ...


class GrantRecords(Protocol):
    """Standing approvals of jobs (`domain/grants.py`): a person makes and revokes them; the
    approval broker reads a job's before a call of its scheduled run waits for a person.
    """

    async def insert(self, grant: Grant) -> bool:
        """Store a new grant if its job exists (in the same transaction); False if not."""
        ...

    async def list(self, job_id: str) -> builtins.list[Grant] | None:
        """The job's grants, oldest first (expired ones too, until revoked); None when there
        is no such job.
        """
        ...

    async def delete(self, job_id: str, grant_id: str) -> Grant | None:
        """Revoke one grant of the job; None when the job has no such grant."""
        ...

    async def job_of(self, turn_id: str) -> str | None:
        """The job of the scheduled run whose turn (a bound fire's) or isolated run (its run
        id) is `turn_id`; None for a message's turn: its calls never use a job's grants.
        """
        ...


class ApprovalRecords(Protocol):
    """The approvals of gated tool calls, durable: what the broker writes before it tells
    anyone, and what the API lists and decides from. A decision lands only on a pending
    record (compare-and-set), so two processes or replicas can never both decide one.
    """

    async def insert(self, approval: Approval) -> Approval:
        """Store a new approval (pending) as given; its id must be new."""
        ...

    async def update_if_pending(self, approval: Approval) -> Approval | None:
        """Write `approval`'s end (state, decision, decided_by, decided_at) if the stored
        record is still pending, and return it as stored; None when it is not pending any
        more (or there is none): someone else decided first, it expired, or it was reaped.
        """
        ...

    async def get(self, approval_id: str) -> Approval | None:
        """The approval, None when there is none."""
        ...

    async def list(
        self,
        session_key: str | None = None,
        *,
        pending_only: bool = True,
        limit: int = 500,
        after: tuple[datetime, str] | None = None,
    ) -> builtins.list[Approval]:
        """Pending approvals (or all, decided too: the newest `limit`), of one session or of
        all, oldest first, at most `limit`; pending ones after the one whose
        `(requested_at, id)` is `after`.
        """
        ...

    async def list_newest(
        self,
        session_key: str | None = None,
        *,
        limit: int = 500,
        after: tuple[datetime, str] | None = None,
    ) -> builtins.list[Approval]:
        """Every approval, decided too, newest first (ties by id), after the one whose
        `(requested_at, id)` is `after`, at most `limit`.
        """
        ...

    async def waiting_of_job(self, job_id: str) -> Approval | None:
        """The oldest pending approval a scheduled run of the job (`job_id`) waits for."""
        ...

    async def mark_reminded(self, approval_id: str, at: datetime) -> Approval | None:
        """Set `reminded_at` of a pending approval not reminded yet and return it; None
        otherwise (reminded already, by this process or another, or ended): a reminder is
        sent at most once.
        """
        ...

    async def expire_orphaned(
        self, at: datetime, by: str, *, turnless: bool = True
    ) -> builtins.list[Approval]:
        """Reaping, at start and with the engine's periodic reap: every pending approval that
        no turn waits for any more (its turn is not running: ended, interrupted by turn
        recovery, deleted; for an isolated run, whose `turn_id` is its run's id, the run is
        not running either) becomes expired (decision deny, `decided_by` = `by`, at `at`);
        with `turnless` (at start) also those that name no turn. The approvals of turns and
        runs still running (in a live process) stay pending. Cheap when nothing is pending
        (one read on the state index). Returns those expired, oldest first.
        """
        ...

    async def expire_session(
        self, session_key: str, at: datetime, by: str
    ) -> builtins.list[Approval]:
        """Expire (decision deny, `decided_by` = `by`, at `at`) every pending approval of the
        session (it is being deleted; the records stay, decided, until pruned). Returns those
        expired, oldest first.
        """
        ...

    async def prune(self, before: datetime) -> int:
        """Delete approvals decided before `before` (pending ones are kept); how many."""
        ...


class RelayArmLedger(Protocol):
    """The relay's part: the arms of its agents (unbound one-shot jobs `arm:{agent}:{job_id}`),
    each change one transaction under the agent's database lock, so relay processes (on any
    host) sharing the database never interleave the read and the write of one agent's arms.
    """

    async def arms(self, agent: str, job_id: str | None = None) -> builtins.list[Job]:
        """The arms of `agent` (of its `job_id` only, when given), oldest first."""
        ...

    async def all_arms(self) -> builtins.list[Job]:
        """Every agent's arms."""
        ...

    async def replace(
        self,
        agent: str,
        job_id: str,
        armed: ArmedJob | None,
        now: datetime,
        *,
        same: Callable[[Job], bool] = ...,
    ) -> ArmChange:
        """Under the agent's lock: when an arm of `job_id` is `same` (the same fire again),
        keep it and change nothing; else remove every arm of `job_id` and insert `armed`
        (None: a cancel). Freed with the transaction, also when the holder dies.
        """
        ...

    async def rearm_cut(self, agent: str, arm_id: str, armed: ArmedJob, now: datetime) -> bool:
        """Under the agent's lock: replace the arm `arm_id` by `armed` when it has fired and no
        run of it is active (its delivery was cut by a stop); False when it changed meanwhile.
        """
        ...


class OwnerRegistry(Protocol):
    """Owner liveness: every process that takes leases keeps one heartbeat row. An owner whose
    heartbeat is older than the takeover time is dead wherever it ran; a live replica settles
    its work and then deletes its row. A process whose own row is gone was declared dead: it
    must stop taking work (see `Engine`).
    """

    async def register_owner(self, owner: str, role: str, now: datetime) -> None:
        """Record `owner` (`host:pid:ulid`; host and pid are parsed from it) with `role`
        (`engine` | `relay`) alive at `now`. Registering again renews the heartbeat.
        """
        ...

    async def heartbeat_owner(self, owner: str, now: datetime) -> bool:
        """Set `owner`'s heartbeat to `now` (one UPDATE). False when its row is gone: another
        process declared it dead (or it unregistered); the row is not recreated.
        """
        ...

    async def unregister_owner(self, owner: str) -> bool:
        """Delete `owner`'s row (a graceful stop, or a dead owner whose work is settled);
        False when there was none.
        """
        ...

    async def dead_owners(
        self, before: datetime, *, exclude: str | None = None
    ) -> list[OwnerRecord]:
        """Owners whose last heartbeat is strictly older than `before` (the caller passes its
        now minus the takeover time), `exclude` left out; oldest heartbeat first. One read
        on the heartbeat index: cheap enough for every heartbeat.
        """
        ...


class EngineLedger(FireLedger, OwnerRegistry, RunRecords, Protocol):
    """What the engine uses: the fire ledger, owner liveness, the leases and orphans of the
    work this process really holds, and the run records (a `changes` job's last delivered
    outcome).
    """

    async def renew_held(
        self, owner: str, live: LiveWork, until: datetime, turn_until: datetime
    ) -> int:
        """Extend only the leases of live work: `owner`'s active runs in `live.runs` to
        `until`, its session turn leases in `live.sessions` to `turn_until`; how many runs.
        Anything else `owner` holds is not renewed (an orphan: its lease runs out).
        """
        ...

    async def settle_orphans(
        self, owner: str, now: datetime, live: LiveWork, suspects: frozenset[str] = frozenset()
    ) -> OrphanSettlement:
        """Settle `owner`'s own open work that is not in `live`: never-started runs released
        (with their waiting turns) for `adopt_released`; started runs `interrupted`; running
        turns handed back (owner NULL) so that `recover_turns` closes them with the visible
        notice; waiting turns handed back only when also in `suspects` (seen without a task
        by the previous call: one being opened now is not live yet); session leases outside
        `live.sessions` let go. Every change is a compare-and-set on the owner.
        """
        ...
