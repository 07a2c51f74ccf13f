"""The SQLAlchemy Core store: the only module that speaks SQL (SQLite default, PostgreSQL-ready)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from ulid import ULID

from agentcron.schedule import spec_from_data, spec_to_data
from agentcron.store.errors import (
    JobNotFoundError,
    ProtectedJobError,
    RunNotFoundError,
    VersionConflictError,
)
from agentcron.store.migrate import current_revision, upgrade_connection
from agentcron.store.models import (
    ACTIVE_STATES,
    TERMINAL_STATES,
    Catchup,
    ClaimedFire,
    CreatedBy,
    FirePlan,
    Job,
    JobKind,
    JobOutcome,
    JobPolicy,
    NewJob,
    Overlap,
    Run,
    RunState,
    Transition,
)
from agentcron.store.schema import jobs, runs

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
)
_MERGED_NULLS = (*_STATE_TIME.values(), "finished_at", *_RUN_FIELDS)


def _transition_stmt() -> Any:
    values: dict[str, Any] = {"state": sa.bindparam("state")}
    for col in _MERGED_NULLS:
        values[col] = sa.func.coalesce(sa.bindparam(col, type_=runs.c[col].type), runs.c[col])
    clear = sa.bindparam("clear_owner", type_=sa.Boolean)
    values["owner"] = sa.case((clear, sa.null()), else_=runs.c.owner)
    values["lease_expires_at"] = sa.case((clear, sa.null()), else_=runs.c.lease_expires_at)
    return runs.update().where(runs.c.id == sa.bindparam("b_id"), _ACTIVE_INLINE).values(values)


_TRANSITION_STMT = _transition_stmt()

Planner = Callable[[Job, datetime, int, int], FirePlan]
"""(job, now, active runs of the job, waiting runs of the job) -> what to do with its due fires."""

Finisher = Callable[[Job, JobOutcome], dict[str, Any]]
"""(job as stored now, outcome) -> new values for FINISH_COLUMNS."""


@dataclass(frozen=True, slots=True)
class ArmedJob:
    """A new job with its id and first fire already computed by the caller."""

    id: str
    new: NewJob
    next_fire_at: datetime | None
    next_run_at: datetime | None


def new_id() -> str:
    """A sortable, collision-free id (ULID)."""
    return str(ULID())


def sqlite_url(path: str | Path) -> str:
    return f"sqlite+aiosqlite:///{Path(path).expanduser()}"


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


def _job(row: Row[Any] | Mapping[str, Any]) -> Job:
    m = row._mapping if isinstance(row, Row) else row
    return Job(
        id=m["id"],
        name=m["name"],
        kind=JobKind(m["kind"]),
        session_key=m["session_key"],
        spec=spec_from_data(m["spec"]),
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
    )


def _run_values(
    job: Job,
    fire_at: datetime,
    state: RunState,
    now: datetime,
    owner: str | None,
    lease: datetime | None,
) -> dict[str, Any]:
    terminal = state in TERMINAL_STATES
    return {
        "id": new_id(),
        "job_id": job.id,
        "session_key": job.session_key,
        "fire_at": fire_at,
        "state": state.value,
        "owner": None if terminal else owner,
        "lease_expires_at": None if terminal else lease,
        "claimed_at": now,
        "queued_at": None,
        "deferred_at": None,
        "started_at": None,
        "finished_at": now if terminal else None,
        "prompt_ref": None,
        "prompt": None,
        "prompt_vars": None,
        "output": None,
        "error": None,
        "error_details": None,
        "message_id": None,
        "usage": None,
    }


class SqlStore:
    """Jobs and runs in one SQL database, behind a narrow async interface.

    SQLite: one writer connection (every write transaction is `BEGIN IMMEDIATE`, so writers
    queue in-process instead of failing with "database is locked"), WAL, a busy timeout for
    other processes, and a small pool of readers.
    """

    def __init__(self, url: str, *, busy_timeout_ms: int = 10_000, echo: bool = False) -> None:
        self.url = url
        self.dialect = sa.engine.make_url(url).get_backend_name()
        self.skip_locked = self.dialect == "postgresql"
        self._busy_timeout_ms = busy_timeout_ms
        self._echo = echo
        self._writer: AsyncEngine | None = None
        self._reader: AsyncEngine | None = None

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, then create or upgrade the schema (Alembic)."""
        if self._writer is not None:
            return
        if self.dialect == "sqlite":
            db_path = sa.engine.make_url(self.url).database
            if not db_path or db_path == ":memory:":
                raise ValueError("the SQLite store needs a file path, not an in-memory database")
            Path(db_path).parent.mkdir(parents=True, exist_ok=True)
            self._writer = self._sqlite_engine(pool_size=1, begin="BEGIN IMMEDIATE")
            self._reader = self._sqlite_engine(pool_size=4, begin="BEGIN")
        else:
            self._writer = create_async_engine(self.url, echo=self._echo, pool_size=5)
            self._reader = self._writer
        async with self._tx() as conn:
            await conn.run_sync(upgrade_connection)

    def _sqlite_engine(self, *, pool_size: int, begin: str) -> AsyncEngine:
        engine = create_async_engine(
            self.url, echo=self._echo, pool_size=pool_size, max_overflow=0, pool_timeout=60
        )
        busy = self._busy_timeout_ms

        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Take transaction control from the driver so that we choose the BEGIN kind.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout = {busy}")
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.execute("PRAGMA foreign_keys = ON")
            cur.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql(begin)

        return engine

    async def close(self) -> None:
        for engine in {id(e): e for e in (self._writer, self._reader) if e is not None}.values():
            await engine.dispose()
        self._writer = self._reader = None

    @asynccontextmanager
    async def _tx(self) -> AsyncIterator[AsyncConnection]:
        if self._writer is None:
            raise RuntimeError("store is not open")
        async with self._writer.begin() as conn:
            yield conn

    @asynccontextmanager
    async def _read(self) -> AsyncIterator[AsyncConnection]:
        if self._reader is None:
            raise RuntimeError("store is not open")
        async with self._reader.connect() as conn:
            yield conn

    async def schema_revision(self) -> str | None:
        """The Alembic revision the database is at."""
        async with self._read() as conn:
            return await conn.run_sync(current_revision)

    def _insert(self, table: sa.Table) -> Any:
        return (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(table)

    # -- jobs ------------------------------------------------------------------------------

    async def insert_jobs(self, armed: Sequence[ArmedJob], now: datetime) -> list[Job]:
        """Insert jobs in one transaction; an idempotency-key duplicate returns the stored job."""
        if not armed:
            return []
        values = [_job_values(a, now) for a in armed]
        stmt = self._insert(jobs).on_conflict_do_nothing().returning(jobs.c.id)
        async with self._tx() as conn:
            inserted = {r.id for r in await conn.execute(stmt, values)}
            out: list[Job] = []
            for value in values:
                if value["id"] in inserted:
                    out.append(_job(value))
                    continue
                row = (
                    await conn.execute(
                        sa.select(jobs).where(
                            sa.func.coalesce(jobs.c.session_key, "")
                            == (value["session_key"] or ""),
                            jobs.c.idempotency_key == value["idempotency_key"],
                        )
                    )
                ).first()
                if row is None:  # a conflict other than the idempotency key
                    raise IntegrityError("insert job", value["id"], Exception("duplicate job id"))
                out.append(_job(row))
        return out

    async def get_job(self, job_id: str) -> Job:
        async with self._read() as conn:
            row = (await conn.execute(sa.select(jobs).where(jobs.c.id == job_id))).first()
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
        query = sa.select(jobs).order_by(jobs.c.id)
        if session_key is not None:
            query = query.where(jobs.c.session_key == session_key)
        if kind is not None:
            query = query.where(jobs.c.kind == kind.value)
        if enabled is not None:
            query = query.where(jobs.c.enabled == enabled)
        if limit is not None:
            query = query.limit(limit)
        async with self._read() as conn:
            return [_job(r) for r in await conn.execute(query)]

    async def count_jobs(self) -> int:
        async with self._read() as conn:
            return int(
                (await conn.execute(sa.select(sa.func.count()).select_from(jobs))).scalar_one()
            )

    async def update_job(
        self,
        job_id: str,
        changes: Mapping[str, Any],
        now: datetime,
        *,
        expected_version: int,
    ) -> Job:
        """Compare-and-set update of raw job columns (the caller computed them from a read)."""
        values = dict(changes)
        if "spec" in values and not isinstance(values["spec"], dict):
            values["spec"] = spec_to_data(values["spec"])
        if "policy" in values:
            values.update(_policy_values(values.pop("policy")))
        values["updated_at"] = now
        values["version"] = jobs.c.version + 1
        async with self._tx() as conn:
            result = await conn.execute(
                jobs.update()
                .where(jobs.c.id == job_id, jobs.c.version == expected_version)
                .values(values)
                .returning(*jobs.c)
            )
            row = result.first()
            if row is None:
                current = (
                    await conn.execute(sa.select(jobs.c.version).where(jobs.c.id == job_id))
                ).scalar_one_or_none()
                if current is None:
                    raise JobNotFoundError(job_id)
                raise VersionConflictError(job_id, expected_version, current)
        return _job(row)

    async def delete_job(self, job_id: str, *, allow_system: bool = False) -> Job:
        async with self._tx() as conn:
            row = (await conn.execute(sa.select(jobs).where(jobs.c.id == job_id))).first()
            if row is None:
                raise JobNotFoundError(job_id)
            job = _job(row)
            if job.kind is JobKind.SYSTEM_EVENT and not allow_system:
                raise ProtectedJobError(f"job {job_id!r} is a system job and cannot be deleted")
            await conn.execute(jobs.delete().where(jobs.c.id == job_id))
        return job

    # -- engine ------------------------------------------------------------------------------

    async def next_due_at(self) -> datetime | None:
        """The earliest `next_run_at` of any armed job (one indexed query)."""
        async with self._read() as conn:
            value = (await conn.execute(sa.select(sa.func.min(jobs.c.next_run_at)))).scalar_one()
        return value  # type: ignore[no-any-return]

    async def claim_due(
        self,
        now: datetime,
        *,
        owner: str,
        lease_until: datetime,
        limit: int,
        planner: Planner,
    ) -> tuple[list[ClaimedFire], int]:
        """Claim the fires of up to `limit` due jobs in one transaction.

        Each job's state (next fire, remaining runs) advances in the same transaction, under a
        version compare-and-set; fire uniqueness `(job_id, fire_at)` makes a second claim of the
        same fire lose. Returns the claimed fires and the number of due jobs examined.
        """
        query = (
            sa.select(jobs)
            .where(jobs.c.next_run_at <= now)
            .order_by(jobs.c.next_run_at)
            .limit(limit)
        )
        if self.skip_locked:
            query = query.with_for_update(skip_locked=True)
        async with self._tx() as conn:
            rows = (await conn.execute(query)).all()
            if not rows:
                return [], 0
            counts = await self._active_counts(conn, [r.id for r in rows])
            job_updates: list[dict[str, Any]] = []
            run_rows: list[dict[str, Any]] = []
            claimed_meta: dict[str, tuple[Job, datetime]] = {}
            for row in rows:
                try:
                    job = _job(row)
                    active, waiting = counts.get(job.id, (0, 0))
                    plan = planner(job, now, active, waiting)
                except Exception as exc:
                    # One unreadable job must not stop every other job from firing.
                    log.exception("cannot plan job; pausing it", extra={"job_id": row.id})
                    await conn.execute(
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
                    row = _run_values(advanced, fire_at, RunState.CLAIMED, now, owner, lease_until)
                    claimed_meta[row["id"]] = (advanced, fire_at)
                    run_rows.append(row)
                for i, fire_at in enumerate(plan.missed):
                    row = _run_values(advanced, fire_at, RunState.MISSED, now, None, None)
                    row["error"] = "missed: the engine was not running when this fire was due"
                    noted = plan.unrecorded_missed or plan.uncounted_missed
                    if noted and i == len(plan.missed) - 1:
                        row["error_details"] = {
                            "unrecorded_missed_fires": plan.unrecorded_missed,
                            "more_uncounted": plan.uncounted_missed,
                        }
                    run_rows.append(row)
                for fire_at in plan.skipped:
                    row = _run_values(advanced, fire_at, RunState.SKIPPED, now, None, None)
                    row["error"] = (
                        "skipped: the previous fire of this job was still queued or running"
                    )
                    run_rows.append(row)
            won = await self._cas_update_jobs(conn, job_updates)
            run_rows = [r for r in run_rows if r["job_id"] in won]
            claimed: list[ClaimedFire] = []
            if run_rows:
                stmt = self._insert(runs).on_conflict_do_nothing().returning(runs.c.id)
                inserted = {r.id for r in await conn.execute(stmt, run_rows)}
                for run_id in inserted:
                    if run_id in claimed_meta:
                        job, fire_at = claimed_meta[run_id]
                        claimed.append(ClaimedFire(run_id=run_id, job=job, fire_at=fire_at))
        claimed.sort(key=lambda c: (c.fire_at, c.run_id))
        return claimed, len(rows)

    async def _active_counts(
        self, conn: AsyncConnection, job_ids: Sequence[str]
    ) -> dict[str, tuple[int, int]]:
        waiting = sa.func.sum(sa.case((runs.c.state.in_(WAITING), 1), else_=0))
        out: dict[str, tuple[int, int]] = {}
        for chunk in _chunks(job_ids):
            result = await conn.execute(
                sa.select(runs.c.job_id, sa.func.count(), waiting)
                .where(runs.c.job_id.in_(chunk), runs.c.state.in_(ACTIVE))
                .group_by(runs.c.job_id)
            )
            for job_id, active, wait in result:
                out[job_id] = (int(active), int(wait or 0))
        return out

    async def _cas_update_jobs(
        self, conn: AsyncConnection, updates: Sequence[dict[str, Any]]
    ) -> set[str]:
        """Apply version-checked job updates; return the ids whose update won."""
        if not updates:
            return set()
        columns = [k for k in updates[0] if not k.startswith("b_")]
        stmt = (
            jobs.update()
            .where(jobs.c.id == sa.bindparam("b_id"), jobs.c.version == sa.bindparam("b_version"))
            .values({c: sa.bindparam(c) for c in columns})
        )
        result = await conn.execute(stmt, list(updates))
        if result.rowcount == len(updates):
            return {u["b_id"] for u in updates}
        # Some lost (rare): find the winners one by one.
        won: set[str] = set()
        for update in updates:
            check = await conn.execute(sa.select(jobs.c.version).where(jobs.c.id == update["b_id"]))
            if check.scalar_one_or_none() == update["version"]:
                won.add(update["b_id"])
        return won

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
        if not transitions and not outcomes:
            return
        merged: dict[str, dict[str, Any]] = {}
        for t in transitions:
            row = merged.get(t.run_id)
            if row is None:
                row = merged[t.run_id] = {"b_id": t.run_id, **dict.fromkeys(_MERGED_NULLS)}
            row["state"] = t.state.value
            row["clear_owner"] = t.state in TERMINAL_STATES
            row[_STATE_TIME.get(t.state, "finished_at")] = t.at
            for col in _RUN_FIELDS:
                value = getattr(t, col)
                if value is not None:
                    row[col] = value
        async with self._tx() as conn:
            if merged:
                await conn.execute(_TRANSITION_STMT, list(merged.values()))
            if outcomes:
                if finisher is None:
                    raise ValueError("outcomes need a finisher")
                await self._apply_outcomes(conn, outcomes, finisher)

    async def _apply_outcomes(
        self, conn: AsyncConnection, outcomes: Sequence[JobOutcome], finisher: Finisher
    ) -> None:
        ids = list({o.job_id for o in outcomes})
        current: dict[str, Job] = {}
        for chunk in _chunks(ids):
            for row in await conn.execute(sa.select(jobs).where(jobs.c.id.in_(chunk))):
                current[row.id] = _job(row)
        deletes: list[dict[str, Any]] = []
        for outcome in outcomes:  # in finish order: later outcomes see earlier ones
            job = current.get(outcome.job_id)
            if job is None:
                continue  # deleted while its fire ran
            values = finisher(job, outcome)
            if values.pop("delete", False):
                deletes.append({"b_id": job.id})
                del current[job.id]
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
            await conn.execute(stmt, updates)
        if deletes:
            await conn.execute(jobs.delete().where(jobs.c.id == sa.bindparam("b_id")), deletes)

    async def renew_leases(self, owner: str, until: datetime) -> int:
        async with self._tx() as conn:
            result = await conn.execute(
                runs.update()
                .where(runs.c.owner == owner, runs.c.state.in_(ACTIVE))
                .values(lease_expires_at=until)
            )
        return int(result.rowcount)

    async def reap(self, now: datetime, owner: str, is_dead: Callable[[str], bool]) -> list[Run]:
        """Mark `interrupted` the active runs of owners that are gone (lease expired or dead).

        Such a fire may have started its turn, so it is never run again silently. Runs that a
        graceful stop released (owner NULL) are left for `adopt_released`.
        """
        async with self._tx() as conn:
            rows = (
                await conn.execute(
                    sa.select(runs).where(
                        runs.c.state.in_(ACTIVE), runs.c.owner.is_not(None), runs.c.owner != owner
                    )
                )
            ).all()
            gone = [
                _run(r)
                for r in rows
                if (r.lease_expires_at is not None and r.lease_expires_at <= now)
                or is_dead(r.owner)
            ]
            if not gone:
                return []
            error = (
                "interrupted: the process running this fire stopped before it finished; not re-run"
            )
            await conn.execute(
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
                [{"b_id": r.id, "details": {"owner": r.owner, "was": r.state.value}} for r in gone],
            )
            await conn.execute(
                jobs.update()
                .where(jobs.c.id == sa.bindparam("b_id"))
                .values(
                    last_status=RunState.INTERRUPTED.value,
                    last_run_at=now,
                    lease_owner=None,
                    lease_expires_at=None,
                ),
                [{"b_id": job_id} for job_id in {r.job_id for r in gone}],
            )
        return [
            Run(
                **{
                    **{f: getattr(r, f) for f in r.__dataclass_fields__},
                    "state": RunState.INTERRUPTED,
                }
            )
            for r in gone
        ]

    async def earliest_foreign_lease(self, owner: str) -> datetime | None:
        """When the next lease of another owner's active run expires (to reap it then)."""
        async with self._read() as conn:
            value = (
                await conn.execute(
                    sa.select(sa.func.min(runs.c.lease_expires_at)).where(
                        runs.c.state.in_(ACTIVE), runs.c.owner.is_not(None), runs.c.owner != owner
                    )
                )
            ).scalar_one()
        return value  # type: ignore[no-any-return]

    async def release(self, owner: str, run_ids: Sequence[str]) -> int:
        """Give back runs that never started (graceful stop), for the next engine to adopt."""
        released = 0
        async with self._tx() as conn:
            for chunk in _chunks(list(run_ids)):
                result = await conn.execute(
                    runs.update()
                    .where(runs.c.id.in_(chunk), runs.c.owner == owner, runs.c.state.in_(WAITING))
                    .values(owner=None, lease_expires_at=None)
                )
                released += int(result.rowcount)
        return released

    async def adopt_released(
        self, owner: str, lease_until: datetime, now: datetime
    ) -> list[ClaimedFire]:
        """Take over runs released by a graceful stop; cancel those whose job is gone."""
        async with self._tx() as conn:
            rows = (
                await conn.execute(
                    sa.select(runs).where(runs.c.owner.is_(None), runs.c.state.in_(WAITING))
                )
            ).all()
            if not rows:
                return []
            job_rows: dict[str, Job] = {}
            for chunk in _chunks(list({r.job_id for r in rows})):
                for jr in await conn.execute(sa.select(jobs).where(jobs.c.id.in_(chunk))):
                    job_rows[jr.id] = _job(jr)
            adopted = [r for r in rows if r.job_id in job_rows]
            orphaned = [r for r in rows if r.job_id not in job_rows]
            if adopted:
                await conn.execute(
                    runs.update()
                    .where(runs.c.id == sa.bindparam("b_id"), runs.c.owner.is_(None))
                    .values(owner=owner, lease_expires_at=lease_until),
                    [{"b_id": r.id} for r in adopted],
                )
            if orphaned:
                await conn.execute(
                    runs.update()
                    .where(runs.c.id == sa.bindparam("b_id"))
                    .values(
                        state=RunState.CANCELLED.value,
                        finished_at=now,
                        error="cancelled: the job was deleted before this fire ran",
                    ),
                    [{"b_id": r.id} for r in orphaned],
                )
        return sorted(
            (ClaimedFire(run_id=r.id, job=job_rows[r.job_id], fire_at=r.fire_at) for r in adopted),
            key=lambda c: (c.fire_at, c.run_id),
        )

    async def prune_runs(
        self, now: datetime, *, keep_per_job: int, max_age: timedelta, job_ids: Iterable[str] = ()
    ) -> int:
        """Delete terminal runs older than `max_age`, and beyond the newest `keep_per_job`."""
        removed = 0
        async with self._tx() as conn:
            result = await conn.execute(
                runs.delete().where(runs.c.state.in_(TERMINAL), runs.c.finished_at < now - max_age)
            )
            removed += int(result.rowcount)
            for job_id in job_ids:
                keep = (
                    sa.select(runs.c.id)
                    .where(runs.c.job_id == job_id)
                    .order_by(runs.c.fire_at.desc())
                    .limit(keep_per_job)
                    .scalar_subquery()
                )
                result = await conn.execute(
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
        async with self._read() as conn:
            row = (await conn.execute(sa.select(runs).where(runs.c.id == run_id))).first()
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
        query = sa.select(runs).order_by(runs.c.fire_at.desc(), runs.c.id.desc())
        if job_id is not None:
            query = query.where(runs.c.job_id == job_id)
        if session_key is not None:
            query = query.where(runs.c.session_key == session_key)
        if states is not None:
            query = query.where(runs.c.state.in_([s.value for s in states]))
        if limit is not None:
            query = query.limit(limit)
        async with self._read() as conn:
            return [_run(r) for r in await conn.execute(query)]

    async def count_runs(self, *, states: Iterable[RunState] | None = None) -> int:
        query = sa.select(sa.func.count()).select_from(runs)
        if states is not None:
            query = query.where(runs.c.state.in_([s.value for s in states]))
        async with self._read() as conn:
            return int((await conn.execute(query)).scalar_one())


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
