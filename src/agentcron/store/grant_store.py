"""Standing approvals of jobs (`job_grants`): made and revoked by a person, read by the
approval broker when a scheduled run's call needs approval.
"""

from __future__ import annotations

import builtins

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.domain.grants import Grant
from agentcron.store.database import Database
from agentcron.store.rows import _grant, _grant_values
from agentcron.store.schema import job_grants, jobs, runs, turns


class GrantStore:
    """The grants part of the store (`GrantRecords`); shares its SqlStore's database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def insert(self, grant: Grant) -> bool:
        """Store `grant` if its job exists (read in the same transaction); False if not."""
        values = _grant_values(grant)

        def op(conn: Connection) -> bool:
            found = conn.execute(sa.select(jobs.c.id).where(jobs.c.id == grant.job_id)).first()
            if found is None:
                return False
            conn.execute(job_grants.insert().values(values))
            return True

        return await self._db.write(op)

    async def list(self, job_id: str) -> builtins.list[Grant] | None:
        """The job's grants, oldest first (expired ones too, until revoked); None when there
        is no such job.
        """
        g = job_grants
        query = sa.select(g).where(g.c.job_id == job_id).order_by(g.c.created_at, g.c.id)
        job = sa.select(jobs.c.id).where(jobs.c.id == job_id)

        def op(conn: Connection) -> builtins.list[Grant] | None:
            found = [_grant(r) for r in conn.execute(query)]
            if not found and conn.execute(job).first() is None:
                return None
            return found

        return await self._db.read(op)

    async def delete(self, job_id: str, grant_id: str) -> Grant | None:
        """Revoke: delete the grant of this job; None when there is none."""
        g = job_grants
        stmt = g.delete().where(g.c.id == grant_id, g.c.job_id == job_id).returning(*g.c)

        def op(conn: Connection) -> Grant | None:
            row = conn.execute(stmt).first()
            return None if row is None else _grant(row)

        return await self._db.write(op)

    async def job_of(self, turn_id: str) -> str | None:
        """The job whose scheduled run `turn_id` is: a bound fire's turn (its `run_id`) or an
        isolated run (the run itself); None for a message's turn or an unknown id.
        """
        of_turn = (
            sa.select(runs.c.job_id)
            .select_from(turns.join(runs, runs.c.id == turns.c.run_id))
            .where(turns.c.id == turn_id)
        )
        of_run = sa.select(runs.c.job_id).where(runs.c.id == turn_id)

        def op(conn: Connection) -> str | None:
            found = conn.execute(of_turn).scalar()
            if found is None:
                found = conn.execute(of_run).scalar()
            return None if found is None else str(found)

        return await self._db.read(op)
