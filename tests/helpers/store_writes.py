"""Writes only tests make: a session's turn lease set by hand (as a process that is gone left
it) and runs moved by hand. The product takes, renews and lets go of a lease only inside its
group commit (`TurnStart` / `TurnFinish`) and `renew_held`, so this SQL lives here, not in
the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.domain.jobs import Job
from agentcron.store import SqlStore, Transition
from agentcron.store.schema import sessions
from agentcron.store.signals import Topic, announce
from agentcron.store.writes import JobFinish, JobOutcome, RunEnd


async def take_turn_lease(
    store: SqlStore, key: str, owner: str, turn_id: str, now: datetime, until: datetime
) -> datetime | None:
    """Give session `key`'s turn lease to `owner` for `turn_id` until `until` when it is free
    (no holder, the same owner, or expired at `now`): None; else when the holder's lease ends.
    """

    def op(conn: Connection) -> datetime | None:
        free = sa.or_(
            sessions.c.turn_owner.is_(None),
            sessions.c.turn_owner == owner,
            sessions.c.turn_lease_expires_at <= now,
        )
        result = conn.execute(
            sessions.update()
            .where(sessions.c.session_key == key, free)
            .values(turn_owner=owner, turn_id=turn_id, turn_lease_expires_at=until)
        )
        if result.rowcount:
            return None
        held: datetime | None = conn.execute(
            sa.select(sessions.c.turn_lease_expires_at).where(sessions.c.session_key == key)
        ).scalar_one()
        return held

    return await store._db.write(op)


async def renew_turn_lease(store: SqlStore, key: str, owner: str, until: datetime) -> bool:
    """Extend `owner`'s turn lease of session `key` to `until`; False when it does not hold it."""
    stmt = (
        sessions.update()
        .where(sessions.c.session_key == key, sessions.c.turn_owner == owner)
        .values(turn_lease_expires_at=until)
    )
    return await store._db.write(lambda conn: bool(conn.execute(stmt).rowcount))


async def release_turn_lease(store: SqlStore, key: str, owner: str) -> None:
    """Let go of `owner`'s turn lease of session `key` (nothing when another holds it), and
    say so to other processes as the product does (a turn may wait for the session).
    """
    stmt = (
        sessions.update()
        .where(sessions.c.session_key == key, sessions.c.turn_owner == owner)
        .values(turn_owner=None, turn_id=None, turn_lease_expires_at=None)
    )

    def op(conn: Connection) -> None:
        if conn.execute(stmt).rowcount:
            announce(conn, Topic.SESSIONS, [key])

    await store._db.write(op)


def _no_outcomes(job: Job, outcome: JobOutcome) -> JobFinish:
    raise AssertionError(f"record_runs got no outcomes, yet {job.id} has one: {outcome}")


async def record_runs(store: SqlStore, transitions: Sequence[Transition]) -> None:
    """Move runs by hand through the store's group commit (`apply`, as the journal does), in
    one transaction: several transitions of one run collapse into one update; a terminal
    state is final.
    """
    await store.apply([RunEnd(t) for t in transitions], _no_outcomes)
