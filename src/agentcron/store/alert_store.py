"""The alert sweep's reads and its once-per-episode marks (service/alerts.py).

Each read returns candidates only, from an index range: late armed jobs (`ix_jobs_due`),
open runs older than a limit (`ix_runs_state_finished`: the open states' ranges), jobs with a
failure count past N (`ix_jobs_failures`), jobs whose end is near (`ix_jobs_end_at`,
`ix_jobs_remaining_runs`) and the jobs with an open episode (`ix_jobs_overdue_since`,
`ix_jobs_failing_since`). A mark is a compare-and-set on its own column, so of two replicas (or
a process and its restart) one raises an episode and one ends it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from agentcron.domain.alerts import OverdueCandidate
from agentcron.domain.jobs import Job
from agentcron.store.rows import ACTIVE, _job
from agentcron.store.schema import jobs, runs
from agentcron.store.sql_base import SqlBase

AlertColumn = Literal["overdue_since", "failing_since", "ending_warned_at"]
_COLUMNS: frozenset[str] = frozenset({"overdue_since", "failing_since", "ending_warned_at"})


class AlertsMixin(SqlBase):
    """`AlertLedger`: the candidate reads and the alert marks."""

    async def overdue_candidates(
        self, *, due_before: datetime, open_before: datetime | None, limit: int
    ) -> list[OverdueCandidate]:
        return await self._db.read(lambda conn: _overdue_op(conn, due_before, open_before, limit))

    async def alerted_jobs(self, *, limit: int) -> list[Job]:
        # Two index ranges (an OR of the two would be a scan on SQLite), joined here.
        overdue = sa.select(jobs).where(_set(jobs.c.overdue_since)).limit(limit)
        failing = sa.select(jobs).where(_set(jobs.c.failing_since)).limit(limit)

        def op(conn: Connection) -> list[Job]:
            rows = {row.id: row for row in conn.execute(overdue)}
            rows.update((row.id, row) for row in conn.execute(failing))
            return _by_id(rows.values())

        return await self._db.read(op)

    async def overdue_jobs(self, *, limit: int) -> list[Job]:
        query = sa.select(jobs).where(_set(jobs.c.overdue_since)).limit(limit)
        return await self._db.read(lambda conn: _by_id(conn.execute(query)))

    async def failing_candidates(self, *, threshold: int, limit: int) -> list[Job]:
        # The range of the failure count only (a condition on `failing_since IS NULL` would
        # tempt a planner into that index, which holds nearly every job): the few jobs past
        # N are filtered here.
        query = sa.select(jobs).where(jobs.c.consecutive_failures >= threshold).limit(limit)
        found = await self._db.read(lambda conn: _by_id(conn.execute(query)))
        return [job for job in found if job.failing_since is None]

    async def ending_candidates(
        self, *, end_before: datetime, runs_left: int, limit: int
    ) -> list[Job]:
        near = sa.or_(jobs.c.end_at <= end_before, jobs.c.remaining_runs <= runs_left)
        query = (
            sa.select(jobs)
            .where(
                near,
                jobs.c.enabled.is_(True),
                jobs.c.finished_at.is_(None),
                jobs.c.ending_warned_at.is_(None),
            )
            .limit(limit)
        )
        return await self._db.read(lambda conn: _by_id(conn.execute(query)))

    async def mark_alert(
        self,
        job_id: str,
        column: AlertColumn,
        value: datetime | None,
        *,
        expected: datetime | None,
    ) -> Job | None:
        if column not in _COLUMNS:
            raise ValueError(f"not an alert column: {column!r}")
        col = jobs.c[column]
        was = col.is_(None) if expected is None else col == expected
        statement = (
            jobs.update().where(jobs.c.id == job_id, was).values({column: value}).returning(*jobs.c)
        )

        def op(conn: Connection) -> Job | None:
            row = conn.execute(statement).first()
            return None if row is None else _job(row)

        return await self._db.write(op)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _set(column: sa.Column[Any]) -> sa.ColumnElement[bool]:
    """`column` is set, as a range an index answers on every backend (not IS NOT NULL)."""
    return column > _EPOCH


def _by_id(rows: Iterable[Row[Any]]) -> list[Job]:
    """Jobs by id, sorted here: an ORDER BY id would lead a planner to walk the primary key
    (every job) instead of the candidates' index range.
    """
    return sorted((_job(r) for r in rows), key=lambda job: job.id)


def _overdue_op(
    conn: Connection, due_before: datetime, open_before: datetime | None, limit: int
) -> list[OverdueCandidate]:
    late = conn.execute(
        sa.select(jobs)
        .where(jobs.c.next_run_at < due_before, jobs.c.enabled.is_(True))
        .order_by(jobs.c.next_run_at)
        .limit(limit)
    ).all()
    found = {row.id: OverdueCandidate(_job(row)) for row in late}
    if open_before is None:
        return list(found.values())
    oldest: dict[str, tuple[str, datetime]] = {}
    for run_id, job_id, fire_at in conn.execute(
        sa.select(runs.c.id, runs.c.job_id, runs.c.fire_at)
        .where(runs.c.state.in_(ACTIVE), runs.c.fire_at < open_before)
        .order_by(runs.c.fire_at)
        .limit(limit)
    ):
        oldest.setdefault(job_id, (run_id, fire_at))
    missing = [job_id for job_id in oldest if job_id not in found]
    if missing:
        for row in conn.execute(sa.select(jobs).where(jobs.c.id.in_(missing))):
            found[row.id] = OverdueCandidate(_job(row))
    return [
        OverdueCandidate(c.job, *oldest[job_id]) if job_id in oldest else c
        for job_id, c in found.items()
    ]
