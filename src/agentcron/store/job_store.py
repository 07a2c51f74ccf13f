"""The jobs of the SQL store: insert (with the job limit), read, update, delete; recall history."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.domain.jobs import Job, JobKind, Recall, RecallState
from agentcron.domain.states import RunState
from agentcron.schedule import spec_to_data
from agentcron.store.bulk import executemany
from agentcron.store.errors import (
    ConflictError,
    JobLimitError,
    JobNotFoundError,
    ProtectedJobError,
    SessionNotFoundError,
    VersionConflictError,
)
from agentcron.store.rows import (
    _chunks,
    _job,
    _job_values,
    _policy_values,
    _spec,
    _stored_job,
    recall_call_type,
)
from agentcron.store.schema import jobs, recall_history, runs, sessions
from agentcron.store.session_store import session_values
from agentcron.store.signals import Topic, announce
from agentcron.store.sql_base import SqlBase
from agentcron.store.writes import ArmedJob, InsertJobs, InSession, JobsInserted

log = logging.getLogger(__name__)


_SESSION_ZONE = sa.select(sessions.c.tz).where(sessions.c.session_key == sa.bindparam("key"))


class JobsMixin(SqlBase):
    """Jobs: CRUD under a version compare-and-set, the job limit, ended recalls."""

    def _insert_jobs_write(self, conn: Connection, write: InsertJobs) -> JobsInserted:
        """Apply an `InsertJobs` inside the group commit's transaction: its in-session job
        checked and armed first (a refusal writes none of this write's jobs), then the insert.
        """
        armed = list(write.armed)
        if write.in_session is not None:
            found = self._in_session_op(conn, write.in_session, write.at)
            if isinstance(found, Exception):
                return JobsInserted([], refused=found)
            armed.append(found)
        return JobsInserted(self._insert_jobs_op(conn, armed, write.at, max_jobs=write.max_jobs))

    def _in_session_op(
        self, conn: Connection, place: InSession, now: datetime
    ) -> ArmedJob | Exception:
        """The job of an `InSession`, or why it is refused (nothing written for it then)."""
        tz = conn.execute(_SESSION_ZONE, {"key": place.key}).scalar_one_or_none()
        if tz is None:
            return SessionNotFoundError(place.key)
        if place.shared is not None:  # created when missing, even if the job is refused next
            executemany(
                conn,
                self._insert_sessions,
                [session_values(place.shared, now, title=place.shared_title)],
            )
        try:
            return place.arm(tz)
        except Exception as exc:  # the request's own error: its caller raises it
            return exc

    def _insert_jobs_op(
        self,
        conn: Connection,
        armed: Sequence[ArmedJob],
        now: datetime,
        *,
        max_jobs: int | None = None,
    ) -> list[Job]:
        """Insert jobs inside the group commit's transaction (an `InsertJobs` write); an
        idempotency-key duplicate returns the stored job. With `max_jobs`, the insert is refused
        (JobLimitError, nothing stored) when it would leave more than that many jobs, system
        jobs and done ones not counted; duplicates add nothing.
        """
        if not armed:
            return []
        announce(conn, Topic.JOBS)  # other processes re-read the schedule when it commits
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
            .where(jobs.c.kind != JobKind.SYSTEM_EVENT.value, jobs.c.finished_at.is_(None))
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
        after: str | None = None,
    ) -> list[Job]:
        return await self._db.read(
            lambda conn: self._list_jobs_op(
                conn, session_key=session_key, kind=kind, enabled=enabled, limit=limit, after=after
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
        after: str | None = None,
    ) -> list[Job]:
        query = sa.select(jobs).order_by(jobs.c.id)
        if after is not None:
            query = query.where(jobs.c.id > after)
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
        announce(conn, Topic.JOBS)
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
        """The job's next fire moved by the agent, and the move noted on the run of the turn
        that asked (its `reschedules`), in one transaction.
        """

        def op(conn: Connection) -> Job:
            job = self._update_job_op(conn, job_id, changes, now, expected_version=expected_version)
            if run_id is not None:
                kept = conn.execute(
                    sa.select(runs.c.reschedules).where(runs.c.id == run_id)
                ).first()
                if kept is not None:
                    notes = [*(kept[0] or []), dict(note)]
                    conn.execute(runs.update().where(runs.c.id == run_id).values(reschedules=notes))
            return job

        return await self._db.write(op)

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
        announce(conn, Topic.JOBS)
        if job.kind is JobKind.RECALL:
            self._end_recalls(conn, [(job, RecallState.CANCELLED, now)])
        return job

    async def delete_finished_jobs(self, before: datetime) -> list[Job]:
        """Delete the done jobs that finished before `before`; returns them as they were."""
        return await self._db.write(lambda conn: self._delete_finished_op(conn, before))

    def _delete_finished_op(self, conn: Connection, before: datetime) -> list[Job]:
        rows = conn.execute(
            jobs.delete().where(jobs.c.finished_at < before).returning(*jobs.c)
        ).all()
        if rows:
            announce(conn, Topic.JOBS)
        return [_job(r) for r in rows]

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
                    "call_type": None if job.call_type is None else job.call_type.value,
                    "internal_comment": job.internal_comment,
                }
                for job, state, at in ended
            ],
        )

    async def jobs_per_session(self) -> dict[str, dict[str, int]]:
        """Per session: its enabled automations and pending recalls (for sidebars; one query)."""
        return await self._db.read(jobs_per_session_op)

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
                call_type=recall_call_type(r.call_type),
                internal_comment=r.internal_comment,
            )
            for r in rows
        ]


def jobs_per_session_op(conn: Connection) -> dict[str, dict[str, int]]:
    """Per session: its enabled automations and pending recalls (one query)."""
    query = (
        sa.select(jobs.c.session_key, jobs.c.kind, sa.func.count())
        .where(jobs.c.session_key.is_not(None), jobs.c.enabled.is_(sa.true()))
        .group_by(jobs.c.session_key, jobs.c.kind)
    )
    summary: dict[str, dict[str, int]] = {}
    for key, kind, count in conn.execute(query).all():
        entry = summary.setdefault(key, {"automations": 0, "recalls": 0})
        if kind == JobKind.RECALL.value:
            entry["recalls"] += int(count)
        elif kind == JobKind.AGENT_TURN.value:
            entry["automations"] += int(count)
    return summary
