"""Durable approval records of gated tool calls: pending -> approved | denied | expired.

Every decision is a compare-and-set on a pending row, so of two processes (or replicas) that
decide the same approval, one lands and the other finds it already decided.
"""

from __future__ import annotations

import builtins
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.domain.approvals import Approval, ApprovalState
from agentcron.domain.states import RunState, TurnState
from agentcron.store.database import Database
from agentcron.store.rows import _approval, _approval_values
from agentcron.store.schema import approvals, runs, turns
from agentcron.store.signals import Topic, announce

_PENDING = ApprovalState.PENDING.value


def _select(conn: Connection, approval_id: str) -> Approval | None:
    row = conn.execute(sa.select(approvals).where(approvals.c.id == approval_id)).first()
    return None if row is None else _approval(row)


class ApprovalStore:
    """The approvals part of the store (`ApprovalRecords`); shares its SqlStore's database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def insert(self, approval: Approval) -> Approval:
        values = _approval_values(approval)
        await self._db.write(lambda conn: conn.execute(approvals.insert().values(values)))
        return approval

    async def update_if_pending(self, approval: Approval) -> Approval | None:
        """Write `approval`'s decision if the stored row is still pending; None otherwise."""
        values = {
            "state": approval.state.value,
            "decision": approval.decision,
            "decided_by": approval.decided_by,
            "decided_at": approval.decided_at,
        }

        stmt = (
            approvals.update()
            .where(approvals.c.id == approval.id, approvals.c.state == _PENDING)
            .values(values)
            .returning(*approvals.c)
        )

        def op(conn: Connection) -> Approval | None:
            row = conn.execute(stmt).first()
            if row is None:
                return None
            announce(conn, Topic.APPROVALS, [approval.id])  # a call may wait in another process
            return _approval(row)

        return await self._db.write(op)

    async def get(self, approval_id: str) -> Approval | None:
        return await self._db.read(lambda conn: _select(conn, approval_id))

    async def list(
        self,
        session_key: str | None = None,
        *,
        pending_only: bool = True,
        limit: int = 500,
        after: tuple[datetime, str] | None = None,
    ) -> builtins.list[Approval]:
        """Pending approvals oldest first (after the one whose `(requested_at, id)` is
        `after`), or all: the newest `limit`, oldest first.
        """
        a = approvals
        query = sa.select(a)
        if session_key is not None:
            query = query.where(a.c.session_key == session_key)
        if pending_only:
            query = query.where(a.c.state == _PENDING).order_by(a.c.requested_at, a.c.id)
            if after is not None:
                at, approval_id = after
                query = query.where(
                    a.c.requested_at >= at,  # a range of the index, with the tie broken below
                    sa.or_(
                        a.c.requested_at > at,
                        sa.and_(a.c.requested_at == at, a.c.id > approval_id),
                    ),
                )
            query = query.limit(limit)
            return await self._db.read(lambda conn: [_approval(r) for r in conn.execute(query)])
        # the newest `limit`, shown oldest first
        query = query.order_by(a.c.requested_at.desc(), a.c.id.desc()).limit(limit)
        found = await self._db.read(lambda conn: [_approval(r) for r in conn.execute(query)])
        return found[::-1]

    async def list_newest(
        self,
        session_key: str | None = None,
        *,
        limit: int = 500,
        after: tuple[datetime, str] | None = None,
    ) -> builtins.list[Approval]:
        """Pending approvals oldest first (after the one whose `(requested_at, id)` is
        `after`), or all: the newest `limit`, oldest first.
        """
        a = approvals
        query = sa.select(a).order_by(a.c.requested_at.desc(), a.c.id.desc()).limit(limit)
        if session_key is not None:
            query = query.where(a.c.session_key == session_key)
        if after is not None:
            at, approval_id = after
            query = query.where(
                a.c.requested_at <= at,  # a range of the index, with the tie broken below
                sa.or_(
                    a.c.requested_at < at, sa.and_(a.c.requested_at == at, a.c.id < approval_id)
                ),
            )
        return await self._db.read(lambda conn: [_approval(r) for r in conn.execute(query)])

    async def waiting_of_job(self, job_id: str) -> Approval | None:
        """The oldest pending approval a scheduled run of the job waits for, or None."""
        a = approvals
        query = (
            sa.select(a)
            .where(a.c.job_id == job_id, a.c.state == _PENDING)
            .order_by(a.c.requested_at, a.c.id)
            .limit(1)
        )

        def op(conn: Connection) -> Approval | None:
            row = conn.execute(query).first()
            return None if row is None else _approval(row)

        return await self._db.read(op)

    async def mark_reminded(self, approval_id: str, at: datetime) -> Approval | None:
        """Note that a person was reminded of the pending approval, once: None when it was
        reminded already or is not pending any more (compare-and-set).
        """
        a = approvals
        stmt = (
            a.update()
            .where(a.c.id == approval_id, a.c.state == _PENDING, a.c.reminded_at.is_(None))
            .values(reminded_at=at)
            .returning(*a.c)
        )

        def op(conn: Connection) -> Approval | None:
            row = conn.execute(stmt).first()
            return None if row is None else _approval(row)

        return await self._db.write(op)

    async def expire_orphaned(
        self, at: datetime, by: str, *, turnless: bool = True
    ) -> builtins.list[Approval]:
        """Expire the pending approvals no turn waits for any more: its turn (or, for an
        isolated run, its run) is not running: it ended, was interrupted or deleted. With
        `turnless`, also those that name no turn. One indexed read when there are none.
        """
        a = approvals
        running_turn = sa.select(turns.c.id).where(
            turns.c.id == a.c.turn_id, turns.c.state == TurnState.RUNNING.value
        )
        running_run = sa.select(runs.c.id).where(
            runs.c.id == a.c.turn_id, runs.c.state == RunState.RUNNING.value
        )
        orphaned = sa.and_(
            a.c.state == _PENDING,
            sa.not_(sa.exists(running_turn)),
            sa.not_(sa.exists(running_run)),
        )
        if not turnless:
            orphaned = sa.and_(orphaned, a.c.turn_id.is_not(None))
        found = sa.select(a.c.id).where(orphaned)
        ids = await self._db.read(lambda conn: list(conn.execute(found).scalars()))
        if not ids:
            return []
        return await self._expire(sa.and_(a.c.id.in_(ids), orphaned), at, by)

    async def expire_session(
        self, session_key: str, at: datetime, by: str
    ) -> builtins.list[Approval]:
        """Expire the pending approvals of one session (it is being deleted)."""
        a = approvals
        return await self._expire(
            sa.and_(a.c.session_key == session_key, a.c.state == _PENDING), at, by
        )

    async def _expire(
        self, where: sa.ColumnElement[bool], at: datetime, by: str
    ) -> builtins.list[Approval]:
        """Expire (decision deny, by `by`, at `at`) the pending rows `where` selects; returns
        them oldest first.
        """
        a = approvals
        values = {
            "state": ApprovalState.EXPIRED.value,
            "decision": "deny",
            "decided_by": by,
            "decided_at": at,
        }
        stmt = a.update().where(where, a.c.state == _PENDING).values(values).returning(*a.c)

        def op(conn: Connection) -> builtins.list[Approval]:
            found = [_approval(r) for r in conn.execute(stmt)]
            if found:
                announce(conn, Topic.APPROVALS, [f.id for f in found])
            return sorted(found, key=lambda f: (f.requested_at, f.id))

        return await self._db.write(op)

    async def prune(self, before: datetime) -> int:
        """Delete decided approvals decided before `before` (pending ones stay)."""
        stmt = approvals.delete().where(
            approvals.c.state != _PENDING, approvals.c.decided_at < before
        )
        return await self._db.write(lambda conn: conn.execute(stmt).rowcount or 0)
