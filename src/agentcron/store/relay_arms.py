"""The relay's arms, changed one agent at a time across processes: each change is one transaction.

An arm is an unbound job named `arm:{agent}:{job_id}`. Provision, cancel and re-arm read an
agent's arms and change them; two relay processes on one database must not interleave that
read and that write, so each runs whole in one write transaction that first takes the agent's
lock: on PostgreSQL `pg_advisory_xact_lock(namespace, hashtext(agent))`, on SQLite the file's
write lock, which every write transaction takes at `BEGIN IMMEDIATE`. Either is held only for
the few statements of the transaction (never across network I/O) and is freed by the database
when the transaction ends, also when its holder dies (its connection closes): a `kill -9`'d
relay never wedges an agent, and no lease or clock is involved.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.domain.jobs import Job, JobKind
from agentcron.domain.states import ACTIVE_STATES
from agentcron.store.rows import _job, _job_values, _stored_job
from agentcron.store.schema import jobs, runs
from agentcron.store.writes import ArmedJob

if TYPE_CHECKING:
    from agentcron.store.interface import RelayArmLedger
    from agentcron.store.sql_base import SqlBase

ARM_PREFIX = "arm:"
# The first key of the two-key advisory lock: the relay's locks never meet another user's
# single-key (bigint) locks, and a hashtext collision of two agents only serializes them.
_LOCK_NAMESPACE = 0x72656C79  # "rely"


def arm_name(agent: str, job_id: str) -> str:
    return f"{ARM_PREFIX}{agent}:{job_id}"


@dataclass(frozen=True, slots=True)
class ArmChange:
    """What one provision or cancel did: the arm kept as it was (the same fire again), the
    arm created, and the arms removed.
    """

    kept: Job | None = None
    created: Job | None = None
    removed: list[Job] = field(default_factory=list)


class RelayArmStore:
    """Read and change the arms of one agent under its lock (see the module docstring)."""

    def __init__(self, base: SqlBase) -> None:
        self._db = base._db
        self._dialect = base.dialect

    def _lock(self, conn: Connection, agent: str) -> None:
        if self._dialect == "postgresql":
            conn.execute(
                sa.select(sa.func.pg_advisory_xact_lock(_LOCK_NAMESPACE, sa.func.hashtext(agent)))
            )
        # SQLite: the transaction began with BEGIN IMMEDIATE, it holds the file's write lock.

    @staticmethod
    def _select(agent: str, job_id: str | None) -> sa.Select[tuple[object, ...]]:
        query = sa.select(jobs).where(
            jobs.c.kind == JobKind.AGENT_TURN.value, jobs.c.session_key.is_(None)
        )
        if job_id is not None:
            return query.where(jobs.c.name == arm_name(agent, job_id)).order_by(jobs.c.id)
        prefix = arm_name(agent, "")
        # substr, not LIKE: a job id may hold '%' or '_'.
        return query.where(sa.func.substr(jobs.c.name, 1, len(prefix)) == prefix).order_by(
            jobs.c.id
        )

    async def arms(self, agent: str, job_id: str | None = None) -> list[Job]:
        """The arms of `agent` (of its `job_id` only, when given), oldest first."""
        query = self._select(agent, job_id)
        return await self._db.read(lambda conn: [_job(r) for r in conn.execute(query)])

    async def all_arms(self) -> list[Job]:
        """Every agent's arms."""
        query = sa.select(jobs).where(
            jobs.c.kind == JobKind.AGENT_TURN.value,
            jobs.c.session_key.is_(None),
            sa.func.substr(jobs.c.name, 1, len(ARM_PREFIX)) == ARM_PREFIX,
        )
        return await self._db.read(lambda conn: [_job(r) for r in conn.execute(query)])

    async def replace(
        self,
        agent: str,
        job_id: str,
        armed: ArmedJob | None,
        now: datetime,
        *,
        same: Callable[[Job], bool] = lambda job: False,
    ) -> ArmChange:
        """Under the agent's lock: when an arm of `job_id` is `same` (the same fire again) keep
        it and change nothing; else remove every arm of `job_id` and insert `armed` (none:
        a cancel).
        """

        def op(conn: Connection) -> ArmChange:
            self._lock(conn, agent)
            found = [_job(r) for r in conn.execute(self._select(agent, job_id))]
            if armed is not None:
                for job in found:
                    if same(job):
                        return ArmChange(kept=job)
            if found:
                conn.execute(jobs.delete().where(jobs.c.id.in_([j.id for j in found])))
            created = None
            if armed is not None:
                values = _job_values(armed, now)
                conn.execute(jobs.insert().values(values))
                created = _stored_job(armed, values)
            return ArmChange(created=created, removed=found)

        return await self._db.write(op)

    async def rearm_cut(self, agent: str, arm_id: str, armed: ArmedJob, now: datetime) -> bool:
        """Under the agent's lock: when the arm `arm_id` still has fired (no next fire) and no
        run of it is active any more (its delivery was cut by a stop), replace it by `armed`.
        False when it changed meanwhile (delivered, re-provisioned, cancelled, adopted).
        """

        def op(conn: Connection) -> bool:
            self._lock(conn, agent)
            row = conn.execute(sa.select(jobs).where(jobs.c.id == arm_id)).first()
            if row is None or _job(row).next_fire_at is not None:
                return False
            active = conn.execute(
                sa.select(runs.c.id)
                .where(
                    runs.c.job_id == arm_id,
                    runs.c.state.in_([s.value for s in ACTIVE_STATES]),
                )
                .limit(1)
            ).first()
            if active is not None:
                return False
            conn.execute(jobs.delete().where(jobs.c.id == arm_id))
            conn.execute(jobs.insert().values(_job_values(armed, now)))
            return True

        return await self._db.write(op)


def relay_arm_ledger(store: SqlBase) -> RelayArmLedger:
    """The relay's arm ledger over `store`'s database (what `AgentCron.store` is)."""
    return RelayArmStore(store)
