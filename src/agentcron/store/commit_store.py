"""The group commit of the SQL store: apply a journal batch (turn starts and finishes, run ends)."""

from __future__ import annotations

import logging
import operator
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.domain.budgets import Budget, Spend, add_run, newly_reached, spend_at
from agentcron.domain.jobs import Job, JobKind, RecallState
from agentcron.domain.states import TERMINAL_STATES
from agentcron.store.bulk import executemany, pipelined
from agentcron.store.interface import Finisher
from agentcron.store.job_store import JobsMixin
from agentcron.store.rows import (
    _RUN_FIELDS,
    _STAMP_STMT,
    _STATE_TIME,
    FINISH_COLUMNS,
    _chunks,
    _job,
    _transition_stmt,
    job_with,
    usage_numbers,
)
from agentcron.store.schema import jobs, sessions
from agentcron.store.session_store import session_values
from agentcron.store.turn_writes import TurnWrites
from agentcron.store.writes import (
    InsertJobs,
    JobOutcome,
    RunEnd,
    Transition,
    TurnFinish,
    TurnFinished,
    TurnStart,
    TurnStarted,
    Write,
    WriteResult,
)

log = logging.getLogger(__name__)
# A transition's optional fields in _RUN_FIELDS' order, read in one call per transition.
_run_fields = operator.attrgetter(*_RUN_FIELDS)


class GroupCommitMixin(JobsMixin):
    """One transaction per journal batch (`GroupCommit`), and the job bookkeeping of outcomes."""

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
        keys.update(
            w.lease_key for w in writes if isinstance(w, TurnStart | TurnFinish) and w.lease_key
        )
        lanes = {w.lease_key: w.at for w in writes if isinstance(w, TurnStart) and w.lease_key}
        if lanes:  # a lane's own session (unified mode's) holds the lease even once deleted
            executemany(
                conn, self._insert_sessions, [session_values(k, at) for k, at in lanes.items()]
            )
        saves = [
            (r, w.run.at) for w in writes if isinstance(w, RunEnd) and (r := w.remember) is not None
        ]
        if saves:  # delivery jobs' own sessions (`cron:{job_id}`), created on first use
            new = {
                r.session_key: session_values(
                    r.session_key, at, channel=r.channel, chat_id=r.chat_id
                )
                for r, at in saves
            }
            executemany(conn, self._insert_sessions, list(new.values()))
            keys.update(new)
        staged = TurnWrites(conn, keys)
        # run transitions, each with the reply it ends with (a turn's closing entry), if any
        transitions: list[tuple[Transition, str | None]] = []
        outcomes: list[JobOutcome] = []
        results: list[WriteResult] = []
        for w in writes:
            if isinstance(w, TurnStart):
                message, session, busy, at = staged.start(w)
                if message is not None and w.run is not None:
                    transitions.append((w.run if at == w.run.at else replace(w.run, at=at), None))
                results.append(TurnStarted(message, session, busy))
            elif isinstance(w, TurnFinish):
                message = staged.finish(w)
                if w.run is not None:
                    # the run ends with this reply (or none): its own message_id does not count
                    run = w.run if w.run.message_id is None else replace(w.run, message_id=None)
                    transitions.append((run, None if message is None else message.id))
                if w.outcome is not None:
                    outcomes.append(w.outcome)
                results.append(TurnFinished(message))
            elif isinstance(w, InsertJobs):
                results.append(self._insert_jobs_write(conn, w))
            else:
                transitions.append((w.run, None))
                if w.outcome is not None:
                    outcomes.append(w.outcome)
                if w.remember is not None:
                    staged.remember(w.remember, w.run.at)
                results.append(TurnFinished(None))
        with pipelined(conn):  # writes only: their answers are not read
            staged.flush()
            self._record_transitions(conn, transitions)
        deleted, reached = (
            self._apply_outcomes(conn, outcomes, finisher) if outcomes else (set(), {})
        )
        # Only the ends of fires whose session has a budget cost a read and a write more.
        of_sessions = [o for o in outcomes if o.session_budgeted and o.session_key]
        session_reached = self._apply_session_spend(conn, of_sessions) if of_sessions else {}
        if deleted or reached or session_reached:
            for i, w in enumerate(writes):
                outcome = w.outcome if isinstance(w, TurnFinish | RunEnd) else None
                if outcome is None:
                    continue
                gone, why = outcome.job_id in deleted, reached.pop(outcome.job_id, None)
                of_session = session_reached.get(id(outcome))
                if gone or why is not None or of_session is not None:
                    message = getattr(results[i], "message", None)
                    results[i] = TurnFinished(message, gone, why, of_session)
        return results

    def _apply_session_spend(
        self, conn: Connection, outcomes: Sequence[JobOutcome]
    ) -> dict[int, str]:
        """Add the runs' use to their sessions' running figures (sessions that still have a
        budget), in finish order. Returns,
        by `id(outcome)`, why a run reached a cap of its session's budget (newly).
        """
        keys = sorted({o.session_key for o in outcomes if o.session_key})
        found = {
            row.session_key: (Budget.of(row.budget), Spend.of(row.spend))
            for row in conn.execute(
                sa.select(sessions.c.session_key, sessions.c.budget, sessions.c.spend).where(
                    sessions.c.session_key.in_(keys)
                )
            )
        }
        reached: dict[int, str] = {}
        figures: dict[str, Spend] = {}
        for outcome in sorted(outcomes, key=lambda o: o.finished_at):
            key = outcome.session_key or ""
            budget, spend = found.get(key, (None, None))
            if budget is None:
                continue  # its budget was removed while the fire ran
            before = spend_at(figures.get(key, spend), outcome.finished_at)
            after = add_run(before, outcome.finished_at, outcome.tokens, outcome.cost_usd)
            figures[key] = after
            why = newly_reached(budget, before, after, outcome.tokens, outcome.cost_usd)
            if why is not None:
                reached[id(outcome)] = why
        if figures:
            conn.execute(
                sessions.update()
                .where(sessions.c.session_key == sa.bindparam("b_key"))
                .values(spend=sa.bindparam("b_spend")),
                [{"b_key": k, "b_spend": s.as_dict()} for k, s in figures.items()],
            )
        return reached

    def _record_transitions(
        self, conn: Connection, transitions: Sequence[tuple[Transition, str | None]]
    ) -> None:
        """Apply run transitions (each with the id of the reply it ends with, or None)
        inside the batch's transaction. Several transitions of one run collapse into one row
        update that keeps every state's timestamp. Only an active run moves: a terminal state
        is final.
        """
        if not transitions:
            return
        merged: dict[str, dict[str, Any]] = {}
        for t, reply in transitions:
            row = merged.get(t.run_id)
            if row is None:
                row = merged[t.run_id] = {"b_id": t.run_id}
            row["state"] = t.state.value
            if t.state in TERMINAL_STATES:
                row["owner"] = row["lease_expires_at"] = None
            row[_STATE_TIME.get(t.state, "finished_at")] = t.at
            for col, value in zip(_RUN_FIELDS, _run_fields(t), strict=True):
                if value is not None:
                    row[col] = value
            if reply is not None:
                row["message_id"] = reply
            if t.usage:
                row.update(usage_numbers(t.usage))
        # One statement per shape of change (the columns it sets): a burst has two or three
        # shapes (running with its prompt; ended with its output), each one executemany.
        shapes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for row in merged.values():
            shapes.setdefault(tuple(sorted(row)), []).append(row)
        for columns, rows in shapes.items():
            executemany(conn, _transition_stmt(columns), rows)

    def _apply_outcomes(
        self, conn: Connection, outcomes: Sequence[JobOutcome], finisher: Finisher
    ) -> tuple[set[str], dict[str, str]]:
        """Apply job outcomes; returns the ids of jobs removed (finished one-shots), and the
        jobs paused at a cap of their budget with why.
        """
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
            return set(), {}
        current: dict[str, Job] = {}
        for chunk in _chunks(ids):
            for row in conn.execute(sa.select(jobs).where(jobs.c.id.in_(chunk))):
                current[row.id] = _job(row)
        deletes: list[dict[str, Any]] = []
        fired: list[tuple[Job, RecallState, datetime]] = []
        reached: dict[str, str] = {}
        for job_id in ids:
            for outcome in by_job[job_id]:  # in finish order: later outcomes see earlier ones
                job = current.get(job_id)
                if job is None:
                    break  # deleted while its fire ran
                change = finisher(job, outcome)
                values = change.values
                if change.budget_reached is not None:
                    reached[job.id] = change.budget_reached
                if change.delete:
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
            values["spend"] = None if job.spend is None else job.spend.as_dict()
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
        return {d["b_id"] for d in deletes}, reached
