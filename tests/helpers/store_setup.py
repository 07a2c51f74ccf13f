"""What only tests do to a SqlStore: set a session's turn lease by hand (as a process that is
gone left it), move runs by hand, insert jobs without the journal, list every owner, give a
session a long past (finished turns, their entries and runs) in one go. The product
takes, renews and lets go of a lease only inside its group commit (`TurnStart` / `TurnFinish`)
and `renew_held`, so that SQL lives here, not in the store; the rest goes through the store's
own calls (`apply`, as the journal does, and `dead_owners`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.domain.jobs import Job
from agentcron.store import SqlStore, Transition
from agentcron.store.ids import new_id
from agentcron.store.interface import GroupCommit, OwnerRegistry
from agentcron.store.owners import OwnerRecord
from agentcron.store.schema import messages, recall_history, runs, sessions, turns
from agentcron.store.signals import Topic, announce
from agentcron.store.writes import ArmedJob, InsertJobs, JobFinish, JobOutcome, JobsInserted, RunEnd


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
    raise AssertionError(f"no outcome was given, yet {job.id} has one: {outcome}")


async def record_runs(store: GroupCommit, transitions: Sequence[Transition]) -> None:
    """Move runs by hand through the store's group commit (`apply`, as the journal does), in
    one transaction: several transitions of one run collapse into one update; a terminal
    state is final.
    """
    await store.apply([RunEnd(t) for t in transitions], _no_outcomes)


async def insert_jobs(
    store: GroupCommit, armed: Sequence[ArmedJob], now: datetime, *, max_jobs: int | None = None
) -> list[Job]:
    """Insert jobs in one transaction, as the journal applies an `InsertJobs` before the engine
    runs: an idempotency-key duplicate returns the stored job; past `max_jobs` nothing is
    stored (JobLimitError).
    """
    (result,) = await store.apply([InsertJobs(armed, now, max_jobs=max_jobs)], _no_outcomes)
    if not isinstance(result, JobsInserted):
        raise TypeError(f"an InsertJobs answered {result!r}")
    return result.jobs


_NEVER = datetime(9999, 1, 1, tzinfo=UTC)


async def list_owners(store: OwnerRegistry) -> list[OwnerRecord]:
    """Every registered owner, oldest heartbeat first (all are older than the end of time)."""
    return await store.dead_owners(_NEVER)


async def grow_session(
    store: SqlStore, key: str, job_id: str, count: int, before: datetime
) -> None:
    """Give session `key` (it exists, with no entries yet) `count` finished turns of job
    `job_id` that ended before `before`, one a minute: each its trigger entry and closure, its
    turn record and its run, as the product leaves them (in one transaction, not turn by turn).
    """
    if count == 0:
        return
    entries: list[dict[str, object]] = []
    turn_rows: list[dict[str, object]] = []
    run_rows: list[dict[str, object]] = []
    for k in range(count):
        at = before - timedelta(minutes=count - k)
        done = at + timedelta(seconds=1)
        run_id, turn_id, reply = new_id(), new_id(), new_id()
        meta = {"source": "automation", "automation_run_id": run_id, "turn_id": turn_id}
        entries += [
            {"id": new_id(), "session_key": key, "seq": 2 * k + 1, "role": "user",
             "content": f"check item {k}", "meta": meta, "created_at": at},
            {"id": reply, "session_key": key, "seq": 2 * k + 2, "role": "assistant",
             "content": f"item {k} checked", "meta": meta, "created_at": done},
        ]  # fmt: skip
        turn_rows.append(
            {"id": turn_id, "session_key": key, "source": "automation", "state": "succeeded",
             "run_id": run_id, "content": f"check item {k}", "created_at": at,
             "started_at": at, "finished_at": done, "reply_message_id": reply}
        )  # fmt: skip
        run_rows.append(
            {"id": run_id, "job_id": job_id, "session_key": key, "fire_at": at,
             "state": "succeeded", "claimed_at": at, "started_at": at, "finished_at": done,
             "message_id": reply}
        )  # fmt: skip

    def op(conn: Connection) -> None:
        conn.execute(messages.insert(), entries)
        conn.execute(turns.insert(), turn_rows)
        conn.execute(runs.insert(), run_rows)
        conn.execute(
            sessions.update()
            .where(sessions.c.session_key == key)
            .values(last_seq=2 * count, updated_at=before - timedelta(seconds=1))
        )

    await store._db.write(op)


async def end_recalls(store: SqlStore, key: str, count: int, ended: datetime) -> None:
    """`count` recalls of session `key` that fired and ended at `ended` (their history rows)."""
    spec = {"kind": "at", "at": ended.isoformat(), "tz": "UTC"}
    rows = [
        {"id": new_id(), "session_key": key, "name": f"recall {i}", "message": "look again",
         "spec": spec, "state": "fired", "run_count": 1, "created_at": ended,
         "ended_at": ended}
        for i in range(count)
    ]  # fmt: skip
    await store._db.write(lambda conn: conn.execute(recall_history.insert(), rows))
