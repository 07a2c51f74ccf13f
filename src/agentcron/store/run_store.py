"""The run records of the SQL store: read, list, count, usage totals."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.domain.runs import Run
from agentcron.domain.states import RunState
from agentcron.store.errors import (
    RunNotFoundError,
)
from agentcron.store.rows import USAGE_COLUMNS, _run
from agentcron.store.schema import runs, turns
from agentcron.store.sql_base import SqlBase

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
