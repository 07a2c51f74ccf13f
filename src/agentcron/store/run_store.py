"""The run records of the SQL store: read, list, count, usage totals."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.domain.jobs import Job
from agentcron.domain.runs import Run, UsageRow
from agentcron.domain.states import RunState
from agentcron.schedule import next_fire
from agentcron.store.errors import (
    ConflictError,
    JobNotFoundError,
    ManualRunPendingError,
    RunNotFoundError,
)
from agentcron.store.ids import new_id
from agentcron.store.rows import ACTIVE, USAGE_COLUMNS, _job, _run, _run_values
from agentcron.store.schema import jobs, runs, trigger_events, turns
from agentcron.store.signals import Topic, announce
from agentcron.store.sql_base import SqlBase

_TICK = timedelta(microseconds=1)
# A manual run's instant taken by another run of its job: one tick earlier (never later: a
# fire in the future waits for its time).
_FIRE_AT_TRIES = 8

log = logging.getLogger(__name__)


class RunsMixin(SqlBase):
    """Run records and usage totals."""

    async def get_run(self, run_id: str) -> Run:
        return await self._db.read(lambda conn: self._get_run_op(conn, run_id))

    def _get_run_op(self, conn: Connection, run_id: str) -> Run:
        row = (conn.execute(sa.select(runs).where(runs.c.id == run_id))).first()
        if row is None:
            raise RunNotFoundError(run_id)
        return _run(row)

    async def insert_manual_run(self, job_id: str, now: datetime) -> Run:
        """A person's "run now" of the job: a run record, unclaimed (`claimed`, no owner),
        marked manual, announced (`Topic.RUNS`) for the engine that adopts released fires to
        take it through the same path as a scheduled one. The job itself is not changed.
        """
        return await self._db.write(lambda conn: self._insert_manual_run_op(conn, job_id, now))

    def _insert_manual_run_op(self, conn: Connection, job_id: str, now: datetime) -> Run:
        job = self._job_for_run_op(conn, job_id)

        def refuse_second() -> None:
            pending = self._pending_manual_op(conn, job_id)
            if pending is not None:
                raise ManualRunPendingError(job_id, pending)

        values = self._insert_unclaimed_op(conn, job, now, {"manual": True}, refuse_second)
        return self._get_run_op(conn, values["id"])

    async def insert_event_run(
        self, job_id: str, event_id: str, event: str, now: datetime, keep_until: datetime
    ) -> tuple[Run | None, str, bool]:
        """An event posted to the job's trigger: an unclaimed run of the job carrying the event,
        announced like a manual run's, unless the job's trigger saw `event_id` before (kept
        until `keep_until`). The seen id's insert decides, in one transaction with the run's:
        of two deliveries of one id, in any processes, one fires. Returns (the run, its id,
        whether the id was seen before: then the run is the first delivery's, None when no
        longer kept, and nothing is written).
        """
        return await self._db.write(
            lambda conn: self._insert_event_run_op(conn, job_id, event_id, event, now, keep_until)
        )

    def _insert_event_run_op(
        self,
        conn: Connection,
        job_id: str,
        event_id: str,
        event: str,
        now: datetime,
        keep_until: datetime,
    ) -> tuple[Run | None, str, bool]:
        job = self._job_for_run_op(conn, job_id)
        run_id = new_id()
        seen = conn.execute(
            self._insert(trigger_events)
            .values(
                job_id=job_id,
                event_id=event_id,
                run_id=run_id,
                received_at=now,
                expires_at=keep_until,
            )
            .on_conflict_do_nothing()
            .returning(trigger_events.c.run_id)
        ).first()
        if seen is None:  # a delivery of this id came first (committed, or this waited on it)
            first = conn.execute(
                sa.select(trigger_events.c.run_id).where(
                    trigger_events.c.job_id == job_id, trigger_events.c.event_id == event_id
                )
            ).scalar_one()
            row = conn.execute(sa.select(runs).where(runs.c.id == first)).first()
            return (None if row is None else _run(row)), first, True
        extra = {"id": run_id, "event_id": event_id, "event": event}
        self._insert_unclaimed_op(conn, job, now, extra, lambda: None)
        return self._get_run_op(conn, run_id), run_id, False

    def _job_for_run_op(self, conn: Connection, job_id: str) -> Job:
        row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).first()
        if row is None:
            raise JobNotFoundError(job_id)
        return _job(row)

    def _insert_unclaimed_op(
        self,
        conn: Connection,
        job: Job,
        now: datetime,
        extra: dict[str, Any],
        check: Callable[[], None],
    ) -> dict[str, Any]:
        """An unclaimed run of `job` (`claimed`, no owner) at `now`, or a tick earlier where
        that instant is taken or the schedule's; announced (`Topic.RUNS`). `check` runs before
        each try (it may refuse).
        """
        fire_at = now
        for _ in range(_FIRE_AT_TRIES):
            check()
            # Never on an instant of the schedule: `(job_id, fire_at)` is unique, and a
            # scheduled fire that lands on an unclaimed run's instant would be lost.
            if next_fire(job.spec, fire_at - _TICK) == fire_at:
                fire_at -= _TICK
                continue
            values = _run_values(job, fire_at, RunState.CLAIMED, now, None, None) | extra
            if conn.execute(self._insert_runs, values).first() is not None:
                announce(conn, Topic.RUNS)
                return values
            fire_at -= _TICK  # lost to a run at that instant, or to a manual run just begun
        raise ConflictError(
            f"job {job.id!r}: no free instant for a run now (its runs hold the last "
            f"{_FIRE_AT_TRIES} microseconds); try again"
        )

    def _pending_manual_op(self, conn: Connection, job_id: str) -> str | None:
        return conn.execute(
            sa.select(runs.c.id).where(
                runs.c.job_id == job_id, runs.c.manual.is_(True), runs.c.state.in_(ACTIVE)
            )
        ).scalar_one_or_none()

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
        """Runs, newest fire first (ties by id, newest first): those fired at or after
        `since`, after the run whose `(fire_at, id)` is `before` (the page before).
        """
        return await self._db.read(
            lambda conn: self._list_runs_op(
                conn,
                job_id=job_id,
                session_key=session_key,
                states=states,
                since=since,
                before=before,
                limit=limit,
            )
        )

    def _list_runs_op(
        self,
        conn: Connection,
        *,
        job_id: str | None = None,
        session_key: str | None = None,
        states: Iterable[RunState] | None = None,
        since: datetime | None = None,
        before: tuple[datetime, str] | None = None,
        limit: int | None = 100,
    ) -> list[Run]:
        query = sa.select(runs).order_by(runs.c.fire_at.desc(), runs.c.id.desc())
        if job_id is not None:
            query = query.where(runs.c.job_id == job_id)
        if session_key is not None:
            query = query.where(runs.c.session_key == session_key)
        if states is not None:
            query = query.where(runs.c.state.in_([s.value for s in states]))
        if since is not None:
            query = query.where(runs.c.fire_at >= since)
        if before is not None:
            at, run_id = before
            query = query.where(
                runs.c.fire_at <= at,  # a range of the index (the OR alone is not, to PostgreSQL)
                sa.or_(runs.c.fire_at < at, sa.and_(runs.c.fire_at == at, runs.c.id < run_id)),
            )
        if limit is not None:
            query = query.limit(limit)
        return [_run(r) for r in conn.execute(query)]

    async def has_runs(self, job_id: str) -> bool:
        """Whether any run of `job_id` is kept (a deleted job's history outlives it)."""
        query = sa.select(runs.c.id).where(runs.c.job_id == job_id).limit(1)
        return await self._db.read(lambda conn: conn.execute(query).first() is not None)

    async def usage_rows(
        self,
        *,
        since: datetime,
        until: datetime,
        session_key: str | None = None,
        job_id: str | None = None,
    ) -> list[UsageRow]:
        """What ran in `[since, until)`, one row each, for the usage per day: every turn
        (user and scheduled, by when it opened; a scheduled one with its run's job) and every
        run that ran without a turn (an isolated run, by its fire time), with their tokens
        and cost. `job_id` keeps the scheduled ones of that job only.
        """
        return await self._db.read(
            lambda conn: self._usage_rows_op(conn, since, until, session_key, job_id)
        )

    def _usage_rows_op(
        self,
        conn: Connection,
        since: datetime,
        until: datetime,
        session_key: str | None,
        job_id: str | None,
    ) -> list[UsageRow]:
        found: list[UsageRow] = []
        of_turns = (
            sa.select(
                turns.c.created_at,
                turns.c.session_key,
                runs.c.job_id,
                runs.c.job_name,
                turns.c.input_tokens,
                turns.c.output_tokens,
                turns.c.cost_usd,
            )
            .select_from(turns.outerjoin(runs, runs.c.id == turns.c.run_id))
            .where(turns.c.created_at >= since, turns.c.created_at < until)
        )
        isolated = sa.select(
            runs.c.fire_at,
            runs.c.session_key,
            runs.c.job_id,
            runs.c.job_name,
            runs.c.input_tokens,
            runs.c.output_tokens,
            runs.c.cost_usd,
        ).where(
            runs.c.fire_at >= since,
            runs.c.fire_at < until,
            runs.c.started_at.is_not(None),
            ~sa.exists().where(turns.c.run_id == runs.c.id),
        )
        if session_key is not None:
            of_turns = of_turns.where(turns.c.session_key == session_key)
            isolated = isolated.where(runs.c.session_key == session_key)
        if job_id is not None:
            of_turns = of_turns.where(runs.c.job_id == job_id)
            isolated = isolated.where(runs.c.job_id == job_id)
        for query, turn in ((of_turns, True), (isolated, False)):
            for at, key, job, name, tokens_in, tokens_out, cost in conn.execute(query):
                found.append(
                    UsageRow(
                        at=at,
                        session_key=key or f"cron:{job}",
                        job_id=job,
                        job_name=name,
                        turn=turn,
                        input_tokens=tokens_in,
                        output_tokens=tokens_out,
                        cost_usd=cost,
                    )
                )
        return found

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
