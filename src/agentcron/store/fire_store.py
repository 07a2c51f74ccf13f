"""The fire ledger's claims: due fires claimed under leases, leases renewed, old runs pruned."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.domain.budgets import Spend, with_estimates
from agentcron.domain.jobs import Job, JobKind, Overlap
from agentcron.domain.runs import BudgetSkip, ClaimedFire, ClaimResult, SessionZone
from agentcron.domain.states import RunState, TurnState
from agentcron.store.bulk import executemany
from agentcron.store.interface import Planner
from agentcron.store.rows import (
    _CLAIM_UPDATE,
    _DUE,
    _DUE_LOCKED,
    _INSERT_TURNS,
    _NEXT_DUE,
    ACTIVE,
    TERMINAL,
    WAITING,
    _chunks,
    _job,
    _run_values,
    job_after_claim,
)
from agentcron.store.schema import jobs, recall_history, runs, sessions, trigger_events, turns
from agentcron.store.session_store import session_values
from agentcron.store.sql_base import SqlBase
from agentcron.store.turn_store import OPEN_TURN, turn_values

log = logging.getLogger(__name__)

# Built once: a statement built per claim is compiled (or looked up) again each time.
_SESSION_ZONES = sa.select(sessions.c.session_key, sessions.c.tz, sessions.c.quiet_hours).where(
    sessions.c.session_key.in_(sa.bindparam("keys", expanding=True))
)
_RUN_IDS = sa.select(runs.c.id).where(runs.c.id.in_(sa.bindparam("ids", expanding=True)))
_OPEN_TURN_SESSIONS = (
    sa.select(turns.c.session_key)
    .distinct()
    .where(
        turns.c.session_key.in_(sa.bindparam("keys", expanding=True)),
        turns.c.state.in_(OPEN_TURN),
    )
)


def _zones(conn: Connection, keys: Sequence[str]) -> Iterator[tuple[str, SessionZone]]:
    """The zone and quiet hours of each of `keys` that exists (one read)."""
    for key, zone, quiet in conn.execute(_SESSION_ZONES, {"keys": list(keys)}):
        yield key, SessionZone(zone, quiet)


class FireClaimsMixin(SqlBase):
    """Claiming due fires under leases, renewing the leases, pruning ended runs (the claim
    half of `FireLedger`; its recovery half is `fire_recovery.FireLedgerMixin`).
    """

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
        result = conn.execute(query, {"now": due_by, "limit": limit})
        columns = tuple(result.keys())
        rows = result.all()
        if not rows:
            return ClaimResult([], 0, conn.execute(_NEXT_DUE).scalar_one())
        # Only the skip / buffer_one policies look at a job's other active fires.
        counts = self._active_counts(conn, [r.id for r in rows if r.overlap != Overlap.DEFER.value])
        job_updates: list[dict[str, Any]] = []
        run_rows: list[dict[str, Any]] = []
        claimed_meta: dict[str, tuple[Job, datetime]] = {}
        told: list[tuple[str, Job, datetime, str, bool]] = []  # budget skips to be told
        # sessions whose budget skipped a fire: told today already (stored) or in this claim
        today = due_by.astimezone(UTC).date().isoformat()
        noticed: set[str] = {r.session_key for r in rows if r.session_budget_noticed == today}
        to_mark: list[str] = []
        # a session's figures with the estimates of the fires this claim lets run added, so
        # that several of its jobs due at once do not each take the same room
        planned: dict[str, Spend] = {}
        for row in rows:
            try:
                job = _job(row, columns)
                key = job.session_key or ""
                if job.session_budget is not None and key in planned:
                    job = replace(job, session_spend=planned[key])
                active, waiting = counts.get(job.id, (0, 0))
                plan = planner(job, due_by, active, waiting)
                if job.session_budget is not None and plan.run:
                    planned[key] = with_estimates(job.session_spend, due_by, len(plan.run))
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
            of_session = plan.session_budget
            tell = plan.budget_notice
            if of_session and plan.over_budget and job.session_key not in noticed:
                # the first fire of any of the session's jobs skipped for its budget
                noticed.add(job.session_key or "")
                to_mark.append(job.session_key or "")
                tell = True
            for i, fire_at in enumerate(plan.over_budget):
                run_row = _run_values(advanced, fire_at, RunState.SKIPPED, now, None, None)
                scope = " (session)" if of_session else ""
                run_row["error"] = f"skipped: budget{scope}: {plan.budget_reason}"[:1000]
                run_row["error_details"] = {"budget": plan.budget_reason}
                if of_session:
                    run_row["error_details"]["scope"] = "session"
                if tell and i == 0:
                    reason = plan.budget_reason or ""
                    told.append((run_row["id"], advanced, fire_at, reason, of_session))
                run_rows.append(run_row)
        won = self._cas_update_jobs(conn, job_updates)
        if to_mark:  # only when a session's budget skipped a fire it had not told
            conn.execute(
                sessions.update()
                .where(sessions.c.session_key.in_(to_mark))
                .values(budget_noticed=today)
            )
        run_rows = [r for r in run_rows if r["job_id"] in won]
        turn_for = self._open_fire_turns(conn, run_rows, claimed_meta, now, owner)
        claimed: list[ClaimedFire] = []
        inserted: set[str] = set()
        if run_rows:
            shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
            for run_row in run_rows:  # an executemany takes rows of one shape
                shapes.setdefault(tuple(run_row), []).append(run_row)
            for rows_of_shape in shapes.values():
                inserted.update(self._insert_runs_of(conn, rows_of_shape))
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
                    claimed.append(
                        ClaimedFire(
                            run_id=run_id,
                            job=job,
                            fire_at=fire_at,
                            turn_id=turn["id"],
                            deferred=turn["state"] == TurnState.DEFERRED.value,
                            session_tz=zone.tz,
                            session_quiet=zone.quiet_hours,
                        )
                    )
        due_next = conn.execute(_NEXT_DUE).scalar_one()
        claimed.sort(key=lambda c: (c.fire_at, c.run_id))
        skips = tuple(
            BudgetSkip(job, run_id, at, why, session)
            for run_id, job, at, why, session in told
            if run_id in inserted
        )
        return ClaimResult(claimed, len(rows), due_next, skips)

    def _insert_runs_of(self, conn: Connection, rows: list[dict[str, Any]]) -> set[str]:
        """Insert claimed runs (one shape); returns the ids that landed. A run whose fire is
        recorded already (`(job_id, fire_at)`) is left out; that is rare, so the count of the
        batch is read first and the ids are looked up only when it falls short.
        """
        result = executemany(conn, self._insert_claimed_runs, rows)
        ids = [r["id"] for r in rows]
        if result is not None and result.rowcount == len(rows):
            return set(ids)
        landed: set[str] = set()
        for chunk in _chunks(ids):  # new ids: one stored is one this batch inserted
            landed.update(conn.execute(_RUN_IDS, {"ids": chunk}).scalars())
        return landed

    def _open_fire_turns(
        self,
        conn: Connection,
        run_rows: list[dict[str, Any]],
        claimed_meta: dict[str, tuple[Job, datetime]],
        now: datetime,
        owner: str,
    ) -> dict[str, tuple[dict[str, Any], SessionZone]]:
        """Turn records for the session-turn fires about to be claimed (run id -> turn row,
        the session's zone and quiet hours), their sessions created where missing, and their
        run rows set `queued` — or `deferred` when the session already has a turn open (or an
        earlier fire of this batch).
        """
        bound = sorted(
            (
                r
                for r in run_rows
                if r["id"] in claimed_meta and claimed_meta[r["id"]][0].session_turn
            ),
            key=lambda r: (r["fire_at"], r["id"]),
        )
        if not bound:
            return {}
        keys = sorted({r["session_key"] for r in bound})
        tz: dict[str, SessionZone] = {}
        busy: set[str] = set()
        for chunk in _chunks(keys):
            # Read first, insert only the sessions missing: a fire's session nearly always
            # exists, and an insert that does nothing still binds a whole row per key.
            tz.update(_zones(conn, chunk))
            missing = [session_values(key, now) for key in chunk if key not in tz]
            made = executemany(conn, self._insert_sessions, missing)
            if made is not None and made.rowcount == len(missing):
                tz.update((m["session_key"], SessionZone(m["tz"])) for m in missing)
            elif missing:  # made by another process meanwhile: it keeps its own zone
                tz.update(_zones(conn, [m["session_key"] for m in missing]))
            busy.update(conn.execute(_OPEN_TURN_SESSIONS, {"keys": chunk}).scalars())
        out: dict[str, tuple[dict[str, Any], SessionZone]] = {}
        for row in bound:
            job = claimed_meta[row["id"]][0]
            key = row["session_key"]
            state = TurnState.DEFERRED if key in busy else TurnState.QUEUED
            busy.add(key)
            row["state"] = state.value
            row["deferred_at" if state is TurnState.DEFERRED else "queued_at"] = now
            source = "recall" if job.kind is JobKind.RECALL else "automation"
            turn = turn_values(key, source, job.message, now, state, row["id"], owner)
            out[row["id"]] = (turn, tz.get(key, SessionZone()))
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
        # The event ids triggers have seen, past the time they are kept.
        conn.execute(trigger_events.delete().where(trigger_events.c.expires_at < now))
        jobs_pruned = sorted(set(job_ids))
        if not jobs_pruned:
            return removed
        # One statement for every job (one executemany): a job's terminal runs older than its
        # newest `keep_per_job` runs (fire times are unique per job). Where they begin is
        # found by stepping over the kept ones on the (job_id, fire_at) index, no row read.
        rows: list[dict[str, Any]]
        if keep_per_job <= 0:
            stmt, rows = _PRUNE_JOB_ALL, [{"b_job": j} for j in jobs_pruned]
        else:
            skip = keep_per_job - 1
            stmt, rows = _PRUNE_JOB, [{"b_job": j, "b_skip": skip} for j in jobs_pruned]
        pruned = executemany(conn, stmt, rows)
        if pruned is not None and pruned.rowcount > 0:  # a count for the log line only
            removed += int(pruned.rowcount)
        return removed


_TERMINAL_LITERALS: list[sa.ColumnElement[Any]] = [
    sa.literal_column(f"'{s}'") for s in sorted(TERMINAL)
]
_PRUNE_JOB_ALL = runs.delete().where(
    runs.c.job_id == sa.bindparam("b_job"), runs.c.state.in_(_TERMINAL_LITERALS)
)
_PRUNE_JOB = runs.delete().where(
    runs.c.job_id == sa.bindparam("b_job"),
    runs.c.state.in_(_TERMINAL_LITERALS),
    runs.c.fire_at
    < (
        sa.select(runs.c.fire_at)
        .where(runs.c.job_id == sa.bindparam("b_job"))
        .order_by(runs.c.fire_at.desc())
        .limit(1)
        .offset(sa.bindparam("b_skip", type_=sa.Integer))
        .scalar_subquery()
    ),
)
