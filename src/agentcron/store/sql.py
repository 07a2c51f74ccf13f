"""The SQLAlchemy Core store: the only module that speaks SQL (SQLite default, PostgreSQL-ready)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Row

from agentcron.schedule import spec_from_data, spec_to_data
from agentcron.store.bulk import executemany
from agentcron.store.database import Database
from agentcron.store.deliveries import DeliveryStore
from agentcron.store.errors import (
    ConflictError,
    JobLimitError,
    JobNotFoundError,
    ProtectedJobError,
    RunNotFoundError,
    VersionConflictError,
)
from agentcron.store.ids import new_id
from agentcron.store.interface import Finisher, Planner
from agentcron.store.migrate import current_revision, upgrade_connection
from agentcron.store.models import (
    ACTIVE_STATES,
    DIED_MID_TURN,
    TERMINAL_STATES,
    AnySpec,
    ArmedJob,
    Catchup,
    ClaimedFire,
    ClaimResult,
    CreatedBy,
    FirePlan,
    InsertJobs,
    Job,
    JobKind,
    JobOutcome,
    JobPolicy,
    JobsInserted,
    Overlap,
    Recall,
    RecallState,
    Run,
    RunEnd,
    RunState,
    Transition,
    TurnFinish,
    TurnFinished,
    TurnStart,
    TurnStarted,
    TurnState,
    Write,
    WriteResult,
)
from agentcron.store.schema import jobs, recall_history, runs, sessions, turns
from agentcron.store.sessions import (
    OPEN_TURN,
    WAITING_TURN,
    SessionStore,
    TurnWrites,
    session_values,
    turn_values,
)

log = logging.getLogger(__name__)

ACTIVE = [s.value for s in ACTIVE_STATES]
WAITING = [RunState.CLAIMED.value, RunState.QUEUED.value, RunState.DEFERRED.value]
TERMINAL = [s.value for s in TERMINAL_STATES]
# executemany() cannot expand IN lists, so batched statements use inline literals.
_ACTIVE_INLINE = runs.c.state.in_([sa.literal_column(f"'{s}'") for s in sorted(ACTIVE)])
_STATE_TIME = {
    RunState.CLAIMED: "claimed_at",
    RunState.QUEUED: "queued_at",
    RunState.DEFERRED: "deferred_at",
    RunState.RUNNING: "started_at",
}
# SQLite caps bound parameters per statement; chunk IN (...) lists well below it.
_IN_CHUNK = 500

# The job columns a finisher may change, written back in one executemany.
FINISH_COLUMNS = (
    "enabled",
    "paused_reason",
    "paused_at",
    "next_fire_at",
    "next_run_at",
    "last_run_at",
    "last_status",
    "consecutive_failures",
    "lease_owner",
    "lease_expires_at",
)

_RUN_FIELDS = (
    "output",
    "error",
    "error_details",
    "message_id",
    "usage",
    "prompt_ref",
    "prompt",
    "prompt_vars",
    "delivery",
)
USAGE_COLUMNS = ("input_tokens", "output_tokens", "cost_usd")


def usage_numbers(usage: Mapping[str, Any] | None) -> dict[str, Any]:
    """The numeric usage columns from a runner's usage dict."""
    usage = usage or {}
    return {col: usage.get(col) for col in USAGE_COLUMNS}


@functools.cache
def _transition_stmt(columns: tuple[str, ...]) -> Any:
    """The run update that sets `columns` (from bind parameters of the same names), only on a
    run that is still active: a terminal state is final.
    """
    values = {c: sa.bindparam(c, type_=runs.c[c].type) for c in columns if c != "b_id"}
    return runs.update().where(runs.c.id == sa.bindparam("b_id"), _ACTIVE_INLINE).values(values)


# Statements on the hot path are built once (building costs more than running them).
_DUE = (
    sa.select(jobs)
    .where(jobs.c.next_run_at <= sa.bindparam("now", type_=jobs.c.next_run_at.type))
    .order_by(jobs.c.next_run_at)
    .limit(sa.bindparam("limit", type_=sa.Integer))
)
_DUE_LOCKED = _DUE.with_for_update(skip_locked=True)
_NEXT_DUE = sa.select(sa.func.min(jobs.c.next_run_at))
_CLAIM_COLUMNS = (
    "next_fire_at",
    "next_run_at",
    "remaining_runs",
    "run_count",
    "last_status",
    "lease_owner",
    "lease_expires_at",
    "version",
    "updated_at",
)
_CLAIM_UPDATE = (
    jobs.update()
    .where(jobs.c.id == sa.bindparam("b_id"), jobs.c.version == sa.bindparam("b_version"))
    .values({c: sa.bindparam(c, type_=jobs.c[c].type) for c in _CLAIM_COLUMNS})
)
_INSERT_TURNS = turns.insert()
_STAMP_STMT = (
    jobs.update()
    .where(jobs.c.id == sa.bindparam("b_id"))
    .values(
        last_run_at=sa.bindparam("last_run_at", type_=jobs.c.last_run_at.type),
        last_status=sa.bindparam("last_status"),
        consecutive_failures=0,
        lease_owner=None,
        lease_expires_at=None,
        version=jobs.c.version + 1,
    )
)

# The planner and finisher types are the interface's (store/interface.py).


def sqlite_url(path: str | Path) -> str:
    return f"sqlite:///{Path(path).expanduser()}"


def _chunks(items: Sequence[Any], size: int = _IN_CHUNK) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _job_values(armed: ArmedJob, now: datetime) -> dict[str, Any]:
    new, policy = armed.new, armed.new.policy
    return {
        "id": armed.id,
        "name": new.name,
        "kind": new.kind.value,
        "session_key": new.session_key,
        "spec": spec_to_data(new.spec),
        "message": new.message,
        "enabled": new.enabled,
        "paused_reason": None if new.enabled else "created paused",
        "paused_at": None if new.enabled else now,
        "created_by": new.created_by.value,
        **_policy_values(policy),
        "next_fire_at": armed.next_fire_at if new.enabled else None,
        "next_run_at": armed.next_run_at if new.enabled else None,
        "last_run_at": None,
        "last_status": None,
        "consecutive_failures": 0,
        "run_count": 0,
        "remaining_runs": policy.max_runs,
        "idempotency_key": new.idempotency_key,
        "lease_owner": None,
        "lease_expires_at": None,
        "version": 1,
        "created_at": now,
        "updated_at": now,
        "deliver": new.deliver,
        "channel": new.channel,
        "to": new.to,
        "channel_meta": new.channel_meta,
        "model": new.model,
    }


def _policy_values(policy: JobPolicy) -> dict[str, Any]:
    return {
        "overlap": policy.overlap.value,
        "catchup": policy.catchup.value,
        "catchup_window_s": int(policy.catchup_window.total_seconds()),
        "max_failures": policy.max_failures,
        "max_runs": policy.max_runs,
        "end_at": policy.end_at,
        "delete_after_run": policy.delete_after_run,
        "jitter": policy.jitter,
    }


@functools.lru_cache(maxsize=4096)
def _cached_spec(items: tuple[tuple[str, Any], ...]) -> AnySpec:
    # Specs are frozen models: one instance serves every job with the same schedule (a burst
    # of claims validates each distinct spec once, not once per row).
    return spec_from_data(dict(items))


def _spec(data: Any) -> AnySpec:
    if isinstance(data, dict):
        try:
            return _cached_spec(tuple(sorted(data.items())))
        except TypeError:  # an unhashable value: validate it as it is
            pass
    return spec_from_data(data)


def _job(row: Row[Any] | Mapping[str, Any]) -> Job:
    m = row._mapping if isinstance(row, Row) else row
    return Job(
        id=m["id"],
        name=m["name"],
        kind=JobKind(m["kind"]),
        session_key=m["session_key"],
        spec=_spec(m["spec"]),
        message=m["message"],
        enabled=bool(m["enabled"]),
        paused_reason=m["paused_reason"],
        paused_at=m["paused_at"],
        created_by=CreatedBy(m["created_by"]),
        policy=JobPolicy(
            overlap=Overlap(m["overlap"]),
            catchup=Catchup(m["catchup"]),
            catchup_window=timedelta(seconds=m["catchup_window_s"]),
            max_failures=m["max_failures"],
            max_runs=m["max_runs"],
            end_at=m["end_at"],
            delete_after_run=bool(m["delete_after_run"]),
            jitter=bool(m["jitter"]),
        ),
        next_fire_at=m["next_fire_at"],
        next_run_at=m["next_run_at"],
        last_run_at=m["last_run_at"],
        last_status=RunState(m["last_status"]) if m["last_status"] else None,
        consecutive_failures=m["consecutive_failures"],
        run_count=m["run_count"],
        remaining_runs=m["remaining_runs"],
        idempotency_key=m["idempotency_key"],
        lease_owner=m["lease_owner"],
        lease_expires_at=m["lease_expires_at"],
        version=m["version"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        deliver=m["deliver"],
        channel=m["channel"],
        to=m["to"],
        channel_meta=m["channel_meta"],
        model=m["model"],
    )


def _stored_job(armed: ArmedJob, values: Mapping[str, Any]) -> Job:
    """The job just inserted from `armed` (its typed parts as given, nothing parsed again)."""
    new = armed.new
    return Job(
        id=armed.id,
        name=new.name,
        kind=new.kind,
        session_key=new.session_key,
        spec=new.spec,
        message=new.message,
        enabled=new.enabled,
        paused_reason=values["paused_reason"],
        paused_at=values["paused_at"],
        created_by=new.created_by,
        policy=new.policy,
        next_fire_at=values["next_fire_at"],
        next_run_at=values["next_run_at"],
        last_run_at=None,
        last_status=None,
        consecutive_failures=0,
        run_count=0,
        remaining_runs=values["remaining_runs"],
        idempotency_key=new.idempotency_key,
        lease_owner=None,
        lease_expires_at=None,
        version=1,
        created_at=values["created_at"],
        updated_at=values["updated_at"],
        deliver=new.deliver,
        channel=new.channel,
        to=new.to,
        channel_meta=new.channel_meta,
        model=new.model,
    )


def _run(row: Row[Any] | Mapping[str, Any]) -> Run:
    m = row._mapping if isinstance(row, Row) else row
    return Run(
        id=m["id"],
        job_id=m["job_id"],
        session_key=m["session_key"],
        fire_at=m["fire_at"],
        state=RunState(m["state"]),
        owner=m["owner"],
        lease_expires_at=m["lease_expires_at"],
        claimed_at=m["claimed_at"],
        queued_at=m["queued_at"],
        deferred_at=m["deferred_at"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        prompt_ref=m["prompt_ref"],
        prompt=m["prompt"],
        prompt_vars=m["prompt_vars"],
        output=m["output"],
        error=m["error"],
        error_details=m["error_details"],
        message_id=m["message_id"],
        usage=m["usage"],
        delivery=m["delivery"],
    )


def _run_values(
    job: Job,
    fire_at: datetime,
    state: RunState,
    now: datetime,
    owner: str | None,
    lease: datetime | None,
) -> dict[str, Any]:
    """A new run row: only the columns that have a value (the rest default to NULL)."""
    row: dict[str, Any] = {
        "id": new_id(),
        "job_id": job.id,
        "session_key": job.session_key,
        "fire_at": fire_at,
        "state": state.value,
        "claimed_at": now,
    }
    if state in TERMINAL_STATES:
        row["finished_at"] = now
    else:
        row.update(owner=owner, lease_expires_at=lease)
    return row


class SqlStore:
    """Jobs and runs in one SQL database, behind a narrow async interface.

    SQLite: one writer connection (every write transaction is `BEGIN IMMEDIATE`, so writers
    queue in-process instead of failing with "database is locked"), WAL, a busy timeout for
    other processes, and a small pool of readers.
    """

    def __init__(self, url: str, *, busy_timeout_ms: int = 10_000) -> None:
        self._db = Database(url, busy_timeout_ms=busy_timeout_ms)
        self.url = str(self._db.url)
        self.dialect = self._db.dialect
        self.skip_locked = self.dialect == "postgresql"
        self._insert_runs = self._insert(runs).on_conflict_do_nothing().returning(runs.c.id)
        self._insert_sessions = self._insert(sessions).on_conflict_do_nothing()
        self._insert_jobs = self._insert(jobs).on_conflict_do_nothing()
        self.sessions = SessionStore(self._db)
        self.deliveries = DeliveryStore(self._db)

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, then create or upgrade the schema (Alembic)."""
        if self._db.is_open:
            return
        self._db.open()
        await self._db.write(upgrade_connection)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._db.close)

    async def schema_revision(self) -> str | None:
        """The Alembic revision the database is at."""
        return await self._db.read(current_revision)

    def _insert(self, table: sa.Table) -> Any:
        return (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(table)

    # -- jobs ------------------------------------------------------------------------------

    async def insert_jobs(
        self, armed: Sequence[ArmedJob], now: datetime, *, max_jobs: int | None = None
    ) -> list[Job]:
        """Insert jobs in one transaction; an idempotency-key duplicate returns the stored job.

        With `max_jobs`, the insert is refused (JobLimitError, nothing stored) when it would
        leave more than that many jobs, system jobs not counted; duplicates add nothing.
        """
        return await self._db.write(
            lambda conn: self._insert_jobs_op(conn, armed, now, max_jobs=max_jobs)
        )

    def _insert_jobs_op(
        self,
        conn: Connection,
        armed: Sequence[ArmedJob],
        now: datetime,
        *,
        max_jobs: int | None = None,
    ) -> list[Job]:
        if not armed:
            return []
        values = [_job_values(a, now) for a in armed]
        result = executemany(conn, self._insert_jobs, values)
        if result is not None and result.rowcount == len(values):  # the common case
            self._check_job_limit(conn, max_jobs, len(values))
            return [_stored_job(a, value) for a, value in zip(armed, values, strict=True)]
        inserted: set[str] = set()  # the ids are new: a row with one of them is ours
        for chunk in _chunks([v["id"] for v in values]):
            inserted.update(
                conn.execute(sa.select(jobs.c.id).where(jobs.c.id.in_(chunk))).scalars()
            )
        out: list[Job] = []
        for value in values:
            if value["id"] in inserted:
                out.append(_job(value))
                continue
            row = None
            if value["idempotency_key"] is not None:
                row = conn.execute(
                    sa.select(jobs).where(
                        sa.func.coalesce(jobs.c.session_key, "") == (value["session_key"] or ""),
                        jobs.c.idempotency_key == value["idempotency_key"],
                    )
                ).first()
            if row is None:  # a conflict other than the idempotency key
                if value["kind"] == JobKind.RECALL.value:
                    raise ConflictError(
                        f"session {value['session_key']!r} already has a pending recall: "
                        "cancel it first"
                    )
                raise ConflictError(f"job {value['id']!r} conflicts with a stored job")
            out.append(_job(row))
        self._check_job_limit(conn, max_jobs, len(inserted))
        return out

    def _check_job_limit(self, conn: Connection, max_jobs: int | None, added: int) -> None:
        """Counted after the insert, in its transaction: raising rolls the insert back."""
        if max_jobs is None or not added:
            return
        stored = conn.execute(
            sa.select(sa.func.count())
            .select_from(jobs)
            .where(jobs.c.kind != JobKind.SYSTEM_EVENT.value)
        ).scalar_one()
        if stored > max_jobs:
            raise JobLimitError(max_jobs, stored - added, added)

    async def get_job(self, job_id: str) -> Job:
        return await self._db.read(lambda conn: self._get_job_op(conn, job_id))

    def _get_job_op(self, conn: Connection, job_id: str) -> Job:
        row = (conn.execute(sa.select(jobs).where(jobs.c.id == job_id))).first()
        if row is None:
            raise JobNotFoundError(job_id)
        return _job(row)

    async def list_jobs(
        self,
        *,
        session_key: str | None = None,
        kind: JobKind | None = None,
        enabled: bool | None = None,
        limit: int | None = None,
    ) -> list[Job]:
        return await self._db.read(
            lambda conn: self._list_jobs_op(
                conn, session_key=session_key, kind=kind, enabled=enabled, limit=limit
            )
        )

    def _list_jobs_op(
        self,
        conn: Connection,
        *,
        session_key: str | None = None,
        kind: JobKind | None = None,
        enabled: bool | None = None,
        limit: int | None = None,
    ) -> list[Job]:
        query = sa.select(jobs).order_by(jobs.c.id)
        if session_key is not None:
            query = query.where(jobs.c.session_key == session_key)
        if kind is not None:
            query = query.where(jobs.c.kind == kind.value)
        if enabled is not None:
            query = query.where(jobs.c.enabled == enabled)
        if limit is not None:
            query = query.limit(limit)
        return [_job(r) for r in conn.execute(query)]

    async def count_jobs(self) -> int:
        return await self._db.read(lambda conn: self._count_jobs_op(conn))

    def _count_jobs_op(self, conn: Connection) -> int:
        return int((conn.execute(sa.select(sa.func.count()).select_from(jobs))).scalar_one())

    async def update_job(
        self,
        job_id: str,
        changes: Mapping[str, Any],
        now: datetime,
        *,
        expected_version: int,
    ) -> Job:
        """Compare-and-set update of raw job columns (the caller computed them from a read)."""
        return await self._db.write(
            lambda conn: self._update_job_op(
                conn, job_id, changes, now, expected_version=expected_version
            )
        )

    def _update_job_op(
        self,
        conn: Connection,
        job_id: str,
        changes: Mapping[str, Any],
        now: datetime,
        *,
        expected_version: int,
    ) -> Job:
        values = dict(changes)
        if "spec" in values and not isinstance(values["spec"], dict):
            values["spec"] = spec_to_data(values["spec"])
        if "policy" in values:
            values.update(_policy_values(values.pop("policy")))
        values["updated_at"] = now
        values["version"] = jobs.c.version + 1
        result = conn.execute(
            jobs.update()
            .where(jobs.c.id == job_id, jobs.c.version == expected_version)
            .values(values)
            .returning(*jobs.c)
        )
        row = result.first()
        if row is None:
            current = (
                conn.execute(sa.select(jobs.c.version).where(jobs.c.id == job_id))
            ).scalar_one_or_none()
            if current is None:
                raise JobNotFoundError(job_id)
            raise VersionConflictError(job_id, expected_version, current)
        return _job(row)

    async def delete_job(
        self, job_id: str, *, allow_system: bool = False, now: datetime | None = None
    ) -> Job:
        """Delete a job (ProtectedJobError for a system job unless `allow_system`).

        A deleted recall is cancelled: it stays readable in the recall history (ended `now`).
        """
        at = now or datetime.now(UTC)
        return await self._db.write(
            lambda conn: self._delete_job_op(conn, job_id, allow_system=allow_system, now=at)
        )

    def _delete_job_op(
        self, conn: Connection, job_id: str, *, allow_system: bool, now: datetime
    ) -> Job:
        row = (conn.execute(sa.select(jobs).where(jobs.c.id == job_id))).first()
        if row is None:
            raise JobNotFoundError(job_id)
        job = _job(row)
        if job.kind is JobKind.SYSTEM_EVENT and not allow_system:
            raise ProtectedJobError(f"job {job_id!r} is a system job and cannot be deleted")
        conn.execute(jobs.delete().where(jobs.c.id == job_id))
        if job.kind is JobKind.RECALL:
            self._end_recalls(conn, [(job, RecallState.CANCELLED, now)])
        return job

    def _end_recalls(
        self, conn: Connection, ended: Sequence[tuple[Job, RecallState, datetime]]
    ) -> None:
        """Keep recalls that ended (fired / cancelled) readable: one history row each."""
        conn.execute(
            self._insert(recall_history).on_conflict_do_nothing(),
            [
                {
                    "id": job.id,
                    "session_key": job.session_key or "",
                    "name": job.name,
                    "message": job.message,
                    "spec": job.spec.model_dump(mode="json"),
                    "state": state.value,
                    "run_count": job.run_count,
                    "last_run_at": job.last_run_at,
                    "last_status": job.last_status.value if job.last_status else None,
                    "created_at": job.created_at,
                    "ended_at": at,
                }
                for job, state, at in ended
            ],
        )

    async def recall_history(
        self,
        session_key: str,
        *,
        states: Iterable[RecallState] | None = None,
        limit: int = 100,
    ) -> list[Recall]:
        """A session's recalls that ended (fired / cancelled), newest first, at most `limit`.

        The pending recall is not here: it is the session's `recall` job. Rows go with their
        session and after `retention_age` (`prune_runs`).
        """
        wanted = None if states is None else [s.value for s in states]
        query = sa.select(recall_history).where(recall_history.c.session_key == session_key)
        if wanted is not None:
            query = query.where(recall_history.c.state.in_(wanted))
        query = query.order_by(recall_history.c.ended_at.desc(), recall_history.c.id.desc())
        rows = await self._db.read(lambda conn: conn.execute(query.limit(limit)).all())
        return [
            Recall(
                id=r.id,
                session_key=r.session_key,
                name=r.name,
                message=r.message,
                spec=_spec(r.spec),
                state=RecallState(r.state),
                created_at=r.created_at,
                run_count=r.run_count,
                last_run_at=r.last_run_at,
                last_status=None if r.last_status is None else RunState(r.last_status),
                ended_at=r.ended_at,
            )
            for r in rows
        ]

    # -- engine ------------------------------------------------------------------------------

    async def next_due_at(self) -> datetime | None:
        """The earliest `next_run_at` of any armed job (one indexed query)."""
        return await self._db.read(lambda conn: self._next_due_at_op(conn))

    def _next_due_at_op(self, conn: Connection) -> datetime | None:
        value = (conn.execute(sa.select(sa.func.min(jobs.c.next_run_at)))).scalar_one()
        return value  # type: ignore[no-any-return]

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
        """Claim the fires of up to `limit` jobs due by `due_by` (default `now`) in one
        transaction; `now` stamps the records.

        Each job's state (next fire, remaining runs) advances in the same transaction, under a
        version compare-and-set; fire uniqueness `(job_id, fire_at)` makes a second claim of the
        same fire lose. Also returns the earliest remaining due time, so the caller can sleep
        without another query.
        """
        return await self._db.write(
            lambda conn: self._claim_due_op(
                conn,
                now,
                owner=owner,
                lease_until=lease_until,
                limit=limit,
                planner=planner,
                due_by=due_by or now,
            )
        )

    def _claim_due_op(
        self,
        conn: Connection,
        now: datetime,
        *,
        owner: str,
        lease_until: datetime,
        limit: int,
        planner: Planner,
        due_by: datetime,
    ) -> ClaimResult:
        query = _DUE_LOCKED if self.skip_locked else _DUE
        rows = conn.execute(query, {"now": due_by, "limit": limit}).all()
        if not rows:
            return ClaimResult([], 0, conn.execute(_NEXT_DUE).scalar_one())
        # Only the skip / buffer_one policies look at a job's other active fires.
        counts = self._active_counts(conn, [r.id for r in rows if r.overlap != Overlap.DEFER.value])
        job_updates: list[dict[str, Any]] = []
        run_rows: list[dict[str, Any]] = []
        claimed_meta: dict[str, tuple[Job, datetime]] = {}
        for row in rows:
            try:
                job = _job(row)
                active, waiting = counts.get(job.id, (0, 0))
                plan = planner(job, due_by, active, waiting)
            except Exception as exc:
                # One unreadable job must not stop every other job from firing.
                log.exception("cannot plan job; pausing it", extra={"job_id": row.id})
                conn.execute(
                    jobs.update()
                    .where(jobs.c.id == row.id)
                    .values(
                        enabled=False,
                        next_fire_at=None,
                        next_run_at=None,
                        paused_at=now,
                        paused_reason=f"auto-paused: cannot plan this job: {exc}"[:500],
                        version=jobs.c.version + 1,
                        updated_at=now,
                    )
                )
                continue
            advanced = job_after_claim(job, plan, now, owner, lease_until)
            job_updates.append(
                {
                    "b_id": job.id,
                    "b_version": job.version,
                    "next_fire_at": advanced.next_fire_at,
                    "next_run_at": advanced.next_run_at,
                    "remaining_runs": advanced.remaining_runs,
                    "run_count": advanced.run_count,
                    "last_status": advanced.last_status.value if advanced.last_status else None,
                    "lease_owner": advanced.lease_owner,
                    "lease_expires_at": advanced.lease_expires_at,
                    "version": advanced.version,
                    "updated_at": now,
                }
            )
            for fire_at in plan.run:
                run_row = _run_values(advanced, fire_at, RunState.CLAIMED, now, owner, lease_until)
                claimed_meta[run_row["id"]] = (advanced, fire_at)
                run_rows.append(run_row)
            for i, fire_at in enumerate(plan.missed):
                run_row = _run_values(advanced, fire_at, RunState.MISSED, now, None, None)
                run_row["error"] = "missed: the engine was not running when this fire was due"
                noted = plan.unrecorded_missed or plan.uncounted_missed
                if noted and i == len(plan.missed) - 1:
                    run_row["error_details"] = {
                        "unrecorded_missed_fires": plan.unrecorded_missed,
                        "more_uncounted": plan.uncounted_missed,
                    }
                run_rows.append(run_row)
            for fire_at in plan.skipped:
                run_row = _run_values(advanced, fire_at, RunState.SKIPPED, now, None, None)
                run_row["error"] = (
                    "skipped: the previous fire of this job was still queued or running"
                )
                run_rows.append(run_row)
        won = self._cas_update_jobs(conn, job_updates)
        run_rows = [r for r in run_rows if r["job_id"] in won]
        turn_for = self._open_fire_turns(conn, run_rows, claimed_meta, now, owner)
        claimed: list[ClaimedFire] = []
        if run_rows:
            inserted: set[str] = set()
            shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
            for run_row in run_rows:  # an executemany takes rows of one shape
                shapes.setdefault(tuple(run_row), []).append(run_row)
            for rows_of_shape in shapes.values():
                inserted.update(r.id for r in conn.execute(self._insert_runs, rows_of_shape))
            turn_rows = [t for run_id, (t, _) in turn_for.items() if run_id in inserted]
            if turn_rows:
                executemany(conn, _INSERT_TURNS, turn_rows)
            for run_id in inserted:
                if run_id in claimed_meta:
                    job, fire_at = claimed_meta[run_id]
                    if run_id not in turn_for:
                        claimed.append(ClaimedFire(run_id=run_id, job=job, fire_at=fire_at))
                        continue
                    turn, zone = turn_for[run_id]
                    claimed.append(ClaimedFire(
                        run_id=run_id, job=job, fire_at=fire_at, turn_id=turn["id"],
                        deferred=turn["state"] == TurnState.DEFERRED.value, session_tz=zone,
                    ))  # fmt: skip
        due_next = conn.execute(_NEXT_DUE).scalar_one()
        claimed.sort(key=lambda c: (c.fire_at, c.run_id))
        return ClaimResult(claimed, len(rows), due_next)

    def _open_fire_turns(
        self,
        conn: Connection,
        run_rows: list[dict[str, Any]],
        claimed_meta: dict[str, tuple[Job, datetime]],
        now: datetime,
        owner: str,
    ) -> dict[str, tuple[dict[str, Any], str]]:
        """Turn records for the session-turn fires about to be claimed (run id -> turn row,
        session zone), their sessions created where missing, and their run rows set `queued`
        — or `deferred` when the session already has a turn open (or an earlier fire of this
        batch).
        """
        bound = sorted(
            (r for r in run_rows
             if r["id"] in claimed_meta and claimed_meta[r["id"]][0].session_turn),
            key=lambda r: (r["fire_at"], r["id"]),
        )  # fmt: skip
        if not bound:
            return {}
        keys = sorted({r["session_key"] for r in bound})
        tz: dict[str, str] = {}
        busy: set[str] = set()
        for chunk in _chunks(keys):
            executemany(conn, self._insert_sessions, [session_values(key, now) for key in chunk])
            tz.update(conn.execute(
                sa.select(sessions.c.session_key, sessions.c.tz)
                .where(sessions.c.session_key.in_(chunk))
            ).all())  # fmt: skip
            busy.update(conn.execute(
                sa.select(turns.c.session_key).distinct()
                .where(turns.c.session_key.in_(chunk), turns.c.state.in_(OPEN_TURN))
            ).scalars())  # fmt: skip
        out: dict[str, tuple[dict[str, Any], str]] = {}
        for row in bound:
            job = claimed_meta[row["id"]][0]
            key = row["session_key"]
            state = TurnState.DEFERRED if key in busy else TurnState.QUEUED
            busy.add(key)
            row["state"] = state.value
            row["deferred_at" if state is TurnState.DEFERRED else "queued_at"] = now
            source = "recall" if job.kind is JobKind.RECALL else "automation"
            turn = turn_values(key, source, job.message, now, state, row["id"], owner)
            out[row["id"]] = (turn, tz.get(key, "UTC"))
        return out

    def _active_counts(
        self, conn: Connection, job_ids: Sequence[str]
    ) -> dict[str, tuple[int, int]]:
        waiting = sa.func.sum(sa.case((runs.c.state.in_(WAITING), 1), else_=0))
        out: dict[str, tuple[int, int]] = {}
        for chunk in _chunks(job_ids):
            result = conn.execute(
                sa.select(runs.c.job_id, sa.func.count(), waiting)
                .where(runs.c.job_id.in_(chunk), runs.c.state.in_(ACTIVE))
                .group_by(runs.c.job_id)
            )
            for job_id, active, wait in result:
                out[job_id] = (int(active), int(wait or 0))
        return out

    def _cas_update_jobs(self, conn: Connection, updates: Sequence[dict[str, Any]]) -> set[str]:
        """Apply version-checked job updates; return the ids whose update won."""
        if not updates:
            return set()
        result = executemany(conn, _CLAIM_UPDATE, list(updates))
        if result is not None and result.rowcount == len(updates):
            return {u["b_id"] for u in updates}
        # Some lost (rare): find the winners one by one.
        won: set[str] = set()
        for update in updates:
            check = conn.execute(sa.select(jobs.c.version).where(jobs.c.id == update["b_id"]))
            if check.scalar_one_or_none() == update["version"]:
                won.add(update["b_id"])
        return won

    async def apply(self, writes: Sequence[Write], finisher: Finisher) -> list[WriteResult]:
        """Apply a group commit in one transaction, in order: turn starts (lease, opening
        entry, turn and run running), turn finishes (closing entry, outcome, lease let go,
        run and job bookkeeping) and other run changes. One result per write.

        A start whose session is held by another owner's live lease writes nothing (its
        result says until when); a finish or run change of a run that already ended is a no-op.
        """
        return await self._db.write(lambda conn: self._apply_op(conn, writes, finisher))

    def _apply_op(
        self, conn: Connection, writes: Sequence[Write], finisher: Finisher
    ) -> list[WriteResult]:
        keys = {w.session_key for w in writes if isinstance(w, TurnStart | TurnFinish)}
        saves = [(r, w.run.at) for w in writes
                 if isinstance(w, RunEnd) and (r := w.remember) is not None]  # fmt: skip
        if saves:  # legacy runs' own sessions (`cron:{job_id}`), created on first use
            new = {r.session_key: session_values(r.session_key, at, channel=r.channel,
                                                 chat_id=r.chat_id) for r, at in saves}  # fmt: skip
            executemany(conn, self._insert_sessions, list(new.values()))
            keys.update(new)
        staged = TurnWrites(conn, keys)
        transitions: list[Transition] = []
        outcomes: list[JobOutcome] = []
        results: list[WriteResult] = []
        for w in writes:
            if isinstance(w, TurnStart):
                message, session, busy = staged.start(w)
                if message is not None and w.run is not None:
                    transitions.append(w.run)
                results.append(TurnStarted(message, session, busy))
            elif isinstance(w, TurnFinish):
                message = staged.finish(w)
                if w.run is not None:
                    reply = None if message is None else message.id
                    transitions.append(replace(w.run, message_id=reply))
                if w.outcome is not None:
                    outcomes.append(w.outcome)
                results.append(TurnFinished(message))
            elif isinstance(w, InsertJobs):
                results.append(
                    JobsInserted(self._insert_jobs_op(conn, w.armed, w.at, max_jobs=w.max_jobs))
                )
            else:
                transitions.append(w.run)
                if w.outcome is not None:
                    outcomes.append(w.outcome)
                if w.remember is not None:
                    staged.remember(w.remember, w.run.at)
                results.append(TurnFinished(None))
        staged.flush()
        deleted = self._record_op(conn, transitions, outcomes, finisher)
        if deleted:
            for i, w in enumerate(writes):
                outcome = w.outcome if isinstance(w, TurnFinish | RunEnd) else None
                if outcome is not None and outcome.job_id in deleted:
                    results[i] = TurnFinished(getattr(results[i], "message", None), True)
        return results

    async def record(
        self,
        transitions: Sequence[Transition],
        outcomes: Sequence[JobOutcome] = (),
        finisher: Finisher | None = None,
    ) -> None:
        """Apply run transitions and job outcomes in one transaction (group commit).

        Several transitions of one run collapse into one row update that keeps every state's
        timestamp. Only an active run moves: a terminal state is final.
        """
        await self._db.write(lambda conn: self._record_op(conn, transitions, outcomes, finisher))

    def _record_op(
        self,
        conn: Connection,
        transitions: Sequence[Transition],
        outcomes: Sequence[JobOutcome] = (),
        finisher: Finisher | None = None,
    ) -> set[str]:
        if not transitions and not outcomes:
            return set()
        merged: dict[str, dict[str, Any]] = {}
        for t in transitions:
            row = merged.get(t.run_id)
            if row is None:
                row = merged[t.run_id] = {"b_id": t.run_id}
            row["state"] = t.state.value
            if t.state in TERMINAL_STATES:
                row["owner"] = row["lease_expires_at"] = None
            row[_STATE_TIME.get(t.state, "finished_at")] = t.at
            for col in _RUN_FIELDS:
                value = getattr(t, col)
                if value is not None:
                    row[col] = value
            if t.usage:
                row.update(usage_numbers(t.usage))
        # One statement per shape of change (the columns it sets): a burst has two or three
        # shapes (running with its prompt; ended with its output), each one executemany.
        shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row in merged.values():
            shapes.setdefault(tuple(sorted(row)), []).append(row)
        for columns, rows in shapes.items():
            executemany(conn, _transition_stmt(columns), rows)
        if outcomes:
            if finisher is None:
                raise ValueError("outcomes need a finisher")
            return self._apply_outcomes(conn, outcomes, finisher)
        return set()

    def _apply_outcomes(
        self, conn: Connection, outcomes: Sequence[JobOutcome], finisher: Finisher
    ) -> set[str]:
        """Apply job outcomes; returns the ids of jobs removed (finished one-shots)."""
        by_job: dict[str, list[JobOutcome]] = {}
        # Jobs in id order: two processes that update the same jobs lock them in one order.
        for outcome in sorted(outcomes, key=lambda o: o.job_id):
            by_job.setdefault(outcome.job_id, []).append(outcome)
        simple = [v[-1] for v in by_job.values() if all(o.simple for o in v)]
        if simple:
            # The common case: a success or empty result only stamps the job.
            executemany(
                conn,
                _STAMP_STMT,
                [
                    {"b_id": o.job_id, "last_run_at": o.finished_at, "last_status": o.status.value}
                    for o in simple
                ],
            )
        ids = [job_id for job_id, v in by_job.items() if not all(o.simple for o in v)]
        if not ids:
            return set()
        current: dict[str, Job] = {}
        for chunk in _chunks(ids):
            for row in conn.execute(sa.select(jobs).where(jobs.c.id.in_(chunk))):
                current[row.id] = _job(row)
        deletes: list[dict[str, Any]] = []
        fired: list[tuple[Job, RecallState, datetime]] = []
        for job_id in ids:
            for outcome in by_job[job_id]:  # in finish order: later outcomes see earlier ones
                job = current.get(job_id)
                if job is None:
                    break  # deleted while its fire ran
                values = finisher(job, outcome)
                if values.pop("delete", False):
                    deletes.append({"b_id": job.id})
                    del current[job.id]
                    if job.kind is JobKind.RECALL:  # a one-time recall ran: it stays readable
                        fired.append(
                            (job_with(job, values), RecallState.FIRED, outcome.finished_at)
                        )
                else:
                    current[job.id] = job_with(job, values)
        updates: list[dict[str, Any]] = []
        for job in current.values():
            values = {c: getattr(job, c) for c in FINISH_COLUMNS}
            values["last_status"] = job.last_status.value if job.last_status else None
            updates.append({"b_id": job.id, **values})
        if updates:
            stmt = (
                jobs.update()
                .where(jobs.c.id == sa.bindparam("b_id"))
                .values(
                    {c: sa.bindparam(c) for c in FINISH_COLUMNS} | {"version": jobs.c.version + 1}
                )
            )
            conn.execute(stmt, updates)
        if deletes:
            conn.execute(jobs.delete().where(jobs.c.id == sa.bindparam("b_id")), deletes)
        if fired:
            self._end_recalls(conn, fired)
        return {d["b_id"] for d in deletes}

    async def renew_leases(
        self, owner: str, until: datetime, turn_until: datetime | None = None
    ) -> int:
        """Extend every lease `owner` holds: its active runs' to `until`, and (with
        `turn_until`) its sessions' turn leases. Returns how many runs it renewed.
        """
        return await self._db.write(
            lambda conn: self._renew_leases_op(conn, owner, until, turn_until)
        )

    def _renew_leases_op(
        self, conn: Connection, owner: str, until: datetime, turn_until: datetime | None
    ) -> int:
        result = conn.execute(
            runs.update()
            .where(runs.c.owner == owner, runs.c.state.in_(ACTIVE))
            .values(lease_expires_at=until)
        )
        if turn_until is not None:
            conn.execute(
                sessions.update()
                .where(sessions.c.turn_owner == owner)
                .values(turn_lease_expires_at=turn_until)
            )
        return int(result.rowcount)

    async def reap(self, now: datetime, owner: str, is_dead: Callable[[str], bool]) -> list[Run]:
        """Settle the active runs of owners that are gone (lease expired or process dead).

        A `running` one may have done part of its turn: it becomes `interrupted` and is never
        run again silently. One that never started is released for `adopt_released`.
        Returns the interrupted runs.
        """
        return await self._db.write(lambda conn: self._reap_op(conn, now, owner, is_dead))

    def _reap_op(
        self, conn: Connection, now: datetime, owner: str, is_dead: Callable[[str], bool]
    ) -> list[Run]:
        rows = (
            conn.execute(
                sa.select(runs).where(
                    runs.c.state.in_(ACTIVE), runs.c.owner.is_not(None), runs.c.owner != owner
                )
            )
        ).all()
        gone = [
            _run(r)
            for r in rows
            if (r.lease_expires_at is not None and r.lease_expires_at <= now) or is_dead(r.owner)
        ]
        started = [r for r in gone if r.state is RunState.RUNNING]
        unstarted = [r for r in gone if r.state is not RunState.RUNNING]
        if unstarted:
            # Their turn never began (RUNNING is committed before a turn starts): hand them
            # back, like a graceful stop does, for an engine to adopt and run once.
            conn.execute(
                runs.update()
                .where(runs.c.id == sa.bindparam("b_id"), runs.c.owner == sa.bindparam("b_owner"))
                .values(owner=None, lease_expires_at=None),
                [{"b_id": r.id, "b_owner": r.owner} for r in unstarted],
            )
        if not started:
            return []
        error = DIED_MID_TURN
        conn.execute(
            runs.update()
            .where(runs.c.id == sa.bindparam("b_id"), _ACTIVE_INLINE)
            .values(
                state=RunState.INTERRUPTED.value,
                finished_at=now,
                owner=None,
                lease_expires_at=None,
                error=error,
                error_details=sa.bindparam("details", type_=runs.c.error_details.type),
            ),
            [{"b_id": r.id, "details": {"owner": r.owner, "was": r.state.value}} for r in started],
        )
        conn.execute(
            jobs.update()
            .where(jobs.c.id == sa.bindparam("b_id"))
            .values(
                last_status=RunState.INTERRUPTED.value,
                last_run_at=now,
                lease_owner=None,
                lease_expires_at=None,
            ),
            [{"b_id": job_id} for job_id in {r.job_id for r in started}],
        )
        return [
            Run(
                **{
                    **{f: getattr(r, f) for f in r.__dataclass_fields__},
                    "state": RunState.INTERRUPTED,
                }
            )
            for r in started
        ]

    async def earliest_foreign_lease(self, owner: str) -> datetime | None:
        """When the next lease of another owner's active run expires (to reap it then)."""
        return await self._db.read(lambda conn: self._earliest_foreign_lease_op(conn, owner))

    def _earliest_foreign_lease_op(self, conn: Connection, owner: str) -> datetime | None:
        value = (
            conn.execute(
                sa.select(sa.func.min(runs.c.lease_expires_at)).where(
                    runs.c.state.in_(ACTIVE), runs.c.owner.is_not(None), runs.c.owner != owner
                )
            )
        ).scalar_one()
        return value  # type: ignore[no-any-return]

    async def release(self, owner: str, run_ids: Sequence[str]) -> int:
        """Give back runs that never started (graceful stop), with their waiting turns, for
        the next engine to adopt.
        """
        return await self._db.write(lambda conn: self._release_op(conn, owner, run_ids))

    def _release_op(self, conn: Connection, owner: str, run_ids: Sequence[str]) -> int:
        released = 0
        for chunk in _chunks(list(run_ids)):
            result = conn.execute(
                runs.update()
                .where(runs.c.id.in_(chunk), runs.c.owner == owner, runs.c.state.in_(WAITING))
                .values(owner=None, lease_expires_at=None)
            )
            released += int(result.rowcount)
            conn.execute(
                turns.update()
                .where(turns.c.run_id.in_(chunk), turns.c.owner == owner,
                       turns.c.state.in_(WAITING_TURN))
                .values(owner=None)
            )  # fmt: skip
        return released

    async def adopt_released(
        self, owner: str, lease_until: datetime, now: datetime
    ) -> list[ClaimedFire]:
        """Take over runs released by a graceful stop; cancel those whose job is gone."""
        return await self._db.write(
            lambda conn: self._adopt_released_op(conn, owner, lease_until, now)
        )

    def _adopt_released_op(
        self, conn: Connection, owner: str, lease_until: datetime, now: datetime
    ) -> list[ClaimedFire]:
        rows = (
            conn.execute(sa.select(runs).where(runs.c.owner.is_(None), runs.c.state.in_(WAITING)))
        ).all()
        if not rows:
            return []
        job_rows: dict[str, Job] = {}
        for chunk in _chunks(list({r.job_id for r in rows})):
            for jr in conn.execute(sa.select(jobs).where(jobs.c.id.in_(chunk))):
                job_rows[jr.id] = _job(jr)
        adopted = [r for r in rows if r.job_id in job_rows]
        orphaned = [r for r in rows if r.job_id not in job_rows]
        if adopted:
            conn.execute(
                runs.update()
                .where(runs.c.id == sa.bindparam("b_id"), runs.c.owner.is_(None))
                .values(owner=owner, lease_expires_at=lease_until),
                [{"b_id": r.id} for r in adopted],
            )
        if orphaned:
            conn.execute(
                runs.update()
                .where(runs.c.id == sa.bindparam("b_id"))
                .values(
                    state=RunState.CANCELLED.value,
                    finished_at=now,
                    error="cancelled: the job was deleted before this fire ran",
                ),
                [{"b_id": r.id} for r in orphaned],
            )
        fire_turns = self._adopt_fire_turns(conn, adopted, job_rows, owner, now)
        fires = []
        for r in adopted:
            job = job_rows[r.job_id]
            if r.id in fire_turns:
                turn_id, deferred, zone = fire_turns[r.id]
                fires.append(ClaimedFire(run_id=r.id, job=job, fire_at=r.fire_at, turn_id=turn_id,
                                         deferred=deferred, session_tz=zone))  # fmt: skip
            else:
                fires.append(ClaimedFire(run_id=r.id, job=job, fire_at=r.fire_at))
        return sorted(fires, key=lambda c: (c.fire_at, c.run_id))

    def _adopt_fire_turns(
        self,
        conn: Connection,
        adopted: Sequence[Row[Any]],
        job_rows: Mapping[str, Job],
        owner: str,
        now: datetime,
    ) -> dict[str, tuple[str, bool, str]]:
        """The waiting turns of adopted session-turn fires, taken over by `owner` (opened
        anew where none is left): run id -> (turn id, deferred, session zone).
        """
        bound = [r for r in adopted if job_rows[r.job_id].session_turn]
        if not bound:
            return {}
        out: dict[str, tuple[str, bool, str]] = {}
        missing: list[Row[Any]] = []
        for chunk in _chunks(bound):
            ids = [r.id for r in chunk]
            found = {
                t.run_id: t
                for t in conn.execute(
                    sa.select(turns.c.id, turns.c.run_id, turns.c.state, sessions.c.tz)
                    .join(sessions, sessions.c.session_key == turns.c.session_key)
                    .where(turns.c.run_id.in_(ids), turns.c.state.in_(WAITING_TURN))
                )
            }
            conn.execute(
                turns.update().where(turns.c.run_id.in_(ids), turns.c.state.in_(WAITING_TURN))
                .values(owner=owner)
            )  # fmt: skip
            for r in chunk:
                t = found.get(r.id)
                if t is None:
                    missing.append(r)
                else:
                    out[r.id] = (t.id, t.state == TurnState.DEFERRED.value, t.tz)
        if missing:
            # A run claimed before fires opened their turns at claim time: open one now.
            claimed = {r.id: (job_rows[r.job_id], r.fire_at) for r in missing}
            rows = [{"id": r.id, "session_key": r.session_key, "fire_at": r.fire_at}
                    for r in missing]  # fmt: skip
            opened = self._open_fire_turns(conn, rows, claimed, now, owner)
            if opened:
                conn.execute(turns.insert(), [t for t, _ in opened.values()])
            for run_id, (turn, zone) in opened.items():
                out[run_id] = (turn["id"], turn["state"] == TurnState.DEFERRED.value, zone)
        return out

    async def prune_runs(
        self, now: datetime, *, keep_per_job: int, max_age: timedelta, job_ids: Iterable[str] = ()
    ) -> int:
        """Delete terminal runs older than `max_age`, and beyond the newest `keep_per_job`."""
        return await self._db.write(
            lambda conn: self._prune_runs_op(
                conn, now, keep_per_job=keep_per_job, max_age=max_age, job_ids=job_ids
            )
        )

    def _prune_runs_op(
        self,
        conn: Connection,
        now: datetime,
        *,
        keep_per_job: int,
        max_age: timedelta,
        job_ids: Iterable[str] = (),
    ) -> int:
        removed = 0
        result = conn.execute(
            runs.delete().where(runs.c.state.in_(TERMINAL), runs.c.finished_at < now - max_age)
        )
        removed += int(result.rowcount)
        conn.execute(recall_history.delete().where(recall_history.c.ended_at < now - max_age))
        for job_id in job_ids:
            keep = (
                sa.select(runs.c.id)
                .where(runs.c.job_id == job_id)
                .order_by(runs.c.fire_at.desc())
                .limit(keep_per_job)
                .scalar_subquery()
            )
            result = conn.execute(
                runs.delete().where(
                    runs.c.job_id == job_id,
                    runs.c.state.in_(TERMINAL),
                    runs.c.id.not_in(keep),
                )
            )
            removed += int(result.rowcount)
        return removed

    # -- runs --------------------------------------------------------------------------------

    async def get_run(self, run_id: str) -> Run:
        return await self._db.read(lambda conn: self._get_run_op(conn, run_id))

    def _get_run_op(self, conn: Connection, run_id: str) -> Run:
        row = (conn.execute(sa.select(runs).where(runs.c.id == run_id))).first()
        if row is None:
            raise RunNotFoundError(run_id)
        return _run(row)

    async def list_runs(
        self,
        *,
        job_id: str | None = None,
        session_key: str | None = None,
        states: Iterable[RunState] | None = None,
        limit: int | None = 100,
    ) -> list[Run]:
        """Runs, newest fire first."""
        return await self._db.read(
            lambda conn: self._list_runs_op(
                conn, job_id=job_id, session_key=session_key, states=states, limit=limit
            )
        )

    def _list_runs_op(
        self,
        conn: Connection,
        *,
        job_id: str | None = None,
        session_key: str | None = None,
        states: Iterable[RunState] | None = None,
        limit: int | None = 100,
    ) -> list[Run]:
        query = sa.select(runs).order_by(runs.c.fire_at.desc(), runs.c.id.desc())
        if job_id is not None:
            query = query.where(runs.c.job_id == job_id)
        if session_key is not None:
            query = query.where(runs.c.session_key == session_key)
        if states is not None:
            query = query.where(runs.c.state.in_([s.value for s in states]))
        if limit is not None:
            query = query.limit(limit)
        return [_run(r) for r in conn.execute(query)]

    async def usage_totals(
        self, *, job_id: str | None = None, session_key: str | None = None
    ) -> dict[str, Any]:
        """Tokens and cost summed over a job's runs, or over a session's turns (user and
        scheduled), so a user sees what a schedule or a conversation costs; `unpriced` counts
        those whose model has no known price (their cost is not in `cost_usd`).
        """
        if (job_id is None) == (session_key is None):
            raise ValueError("give exactly one of job_id or session_key")
        table, where = (
            (runs, runs.c.job_id == job_id)
            if job_id is not None
            else (turns, turns.c.session_key == session_key)
        )
        query = sa.select(
            sa.func.count(),
            *(sa.func.coalesce(sa.func.sum(table.c[c]), 0) for c in USAGE_COLUMNS),
            sa.func.coalesce(sa.func.sum(sa.case((table.c.cost_usd.is_(None), 1), else_=0)), 0),
        ).where(where, table.c.input_tokens.is_not(None))
        count, tokens_in, tokens_out, cost, unpriced = await self._db.read(
            lambda conn: conn.execute(query).one()
        )
        return {
            "counted": int(count),
            "input_tokens": int(tokens_in),
            "output_tokens": int(tokens_out),
            "cost_usd": round(float(cost), 6),  # of the priced ones
            "unpriced": int(unpriced),  # counted, but no price known for their model
        }

    async def count_runs(self, *, states: Iterable[RunState] | None = None) -> int:
        return await self._db.read(lambda conn: self._count_runs_op(conn, states=states))

    def _count_runs_op(self, conn: Connection, *, states: Iterable[RunState] | None = None) -> int:
        query = sa.select(sa.func.count()).select_from(runs)
        if states is not None:
            query = query.where(runs.c.state.in_([s.value for s in states]))
        return int((conn.execute(query)).scalar_one())


def job_after_claim(
    job: Job, plan: FirePlan, now: datetime, owner: str, lease_until: datetime
) -> Job:
    """The job as advanced by a claim: next fire, remaining runs, lease, version."""
    ran = len(plan.run)
    status = job.last_status
    if not ran and (plan.missed or plan.skipped):
        status = RunState.SKIPPED if plan.skipped else RunState.MISSED
    return job_with(
        job,
        {
            "next_fire_at": plan.next_fire_at,
            "next_run_at": plan.next_run_at,
            "remaining_runs": None if job.remaining_runs is None else job.remaining_runs - ran,
            "run_count": job.run_count + ran,
            "last_status": status,
            "lease_owner": owner if ran else job.lease_owner,
            "lease_expires_at": lease_until if ran else job.lease_expires_at,
            "version": job.version + 1,
            "updated_at": now,
        },
    )


def job_with(job: Job, values: Mapping[str, Any]) -> Job:
    """A copy of `job` with some fields replaced."""
    fields = {f: getattr(job, f) for f in job.__dataclass_fields__}
    fields.update(values)
    return Job(**fields)


async def upgrade_and_count(url: str) -> tuple[str | None, int, int]:
    """Open (creating or upgrading the schema of) the database at `url`: its schema revision,
    and how many jobs and runs it holds. For `agentcron db upgrade`.
    """
    store = SqlStore(url)
    try:
        await store.open()
        return await store.schema_revision(), await store.count_jobs(), await store.count_runs()
    finally:
        await store.close()
