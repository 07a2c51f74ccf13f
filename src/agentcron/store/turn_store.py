"""Turn records, and the recovery of turns (and session turn leases) whose process is gone."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.domain.sessions import Turn
from agentcron.domain.states import ACTIVE_STATES, DIED_MID_TURN, RunState, TurnState
from agentcron.store.database import Database
from agentcron.store.errors import TurnNotFoundError
from agentcron.store.ids import new_id
from agentcron.store.rows import _turn
from agentcron.store.schema import runs, sessions, turns
from agentcron.store.signals import Topic, announce

WAITING_TURN = (TurnState.QUEUED.value, TurnState.DEFERRED.value)
OPEN_TURN = (*WAITING_TURN, TurnState.RUNNING.value)


@dataclass(frozen=True, slots=True)
class TurnRecovery:
    """What `recover_turns` settled: turns to run here, and turns that were cut off."""

    adopted: list[Turn]  # waiting user/hook turns of a process that is gone: now ours
    interrupted: list[Turn]  # running turns of a process that is gone: closed as interrupted


def _run_is_open(conn: Connection, run_id: str) -> bool:
    state = conn.execute(sa.select(runs.c.state).where(runs.c.id == run_id)).scalar_one_or_none()
    return state is not None and RunState(state) in ACTIVE_STATES


def _adopt_where(gone_owners: set[str]) -> sa.ColumnElement[bool]:
    """A waiting turn still as recovery found it: not started, and not taken by anyone else."""
    owner_gone: sa.ColumnElement[bool] = turns.c.owner.is_(None)
    if gone_owners:
        owner_gone = sa.or_(owner_gone, turns.c.owner.in_(sorted(gone_owners)))
    return sa.and_(turns.c.state.in_(WAITING_TURN), owner_gone)


def _claimed(
    conn: Connection, found: list[Turn], where: sa.ColumnElement[bool], **values: Any
) -> list[Turn]:
    """Apply `values` to the turns of `found` that still match `where`; those it changed."""
    if not found:
        return []
    done: set[str] = set()
    ids = [t.id for t in found]
    for start in range(0, len(ids), 500):
        result = conn.execute(
            turns.update()
            .where(turns.c.id.in_(ids[start : start + 500]), where)
            .values(**values)
            .returning(turns.c.id)
        )
        done.update(result.scalars())
    return [t for t in found if t.id in done]


def _interrupt(conn: Connection, found: list[Turn], now: datetime) -> list[Turn]:
    """Close the turns of `found` that are still running as interrupted (a compare-and-set,
    like `_claimed`); those it closed.

    The stored turns of a session never overlap, and a cut turn's times stay true:

    - it ends at `now` (the recovery: its process was gone by then), but never before it
      began: a fire claimed ahead is stamped at its time, which a recovery may precede when
      its process died while waiting for it;
    - never after a later turn of its session began: its lease was let go before it was
      closed (`settle_orphans`, or the lease ran out), so another turn may have taken the
      session meanwhile, and this one had stopped by then;
    - its session's `updated_at` is moved up to that end: a start made before the recovery
      and committed after it (its stamp is older than `now`: it waited for its group commit)
      is stamped no earlier (`TurnWrites.start` stamps max(start, updated_at)).
    """
    if not found:
        return []
    keys = sorted({t.session_key for t in found})
    if conn.dialect.name == "postgresql":
        # The sessions' rows first: a start committing meanwhile in one of them is then
        # visible to the read of later starts below, or waits for this transaction (its
        # group commit reads the row FOR UPDATE) and sees the moved `updated_at`.
        for start in range(0, len(keys), 500):
            conn.execute(
                sa.select(sessions.c.session_key)
                .where(sessions.c.session_key.in_(keys[start : start + 500]))
                .order_by(sessions.c.session_key)
                .with_for_update()
            )
    done: list[Turn] = []
    for turn in found:
        ended = _ended_at(conn, turn, now)
        result = conn.execute(
            turns.update()
            .where(turns.c.id == turn.id, turns.c.state == TurnState.RUNNING.value)
            .values(state=TurnState.INTERRUPTED.value, finished_at=ended, error=DIED_MID_TURN)
        )
        if not result.rowcount:
            continue  # closed meanwhile (by another replica's recovery, or its late finish)
        conn.execute(
            sessions.update()
            .where(sessions.c.session_key == turn.session_key, sessions.c.updated_at < ended)
            .values(updated_at=ended)
        )
        done.append(turn)
    return done


def _ended_at(conn: Connection, turn: Turn, now: datetime) -> datetime:
    """When a running turn cut off by the recovery at `now` is stored as ended (see
    `_interrupt`): `now`, or the start of the next turn of its session if that came first,
    and never before its own start.
    """
    began = turn.started_at
    if began is None:
        return now
    later: datetime | None = conn.execute(
        sa.select(sa.func.min(turns.c.started_at)).where(
            turns.c.session_key == turn.session_key,
            turns.c.id != turn.id,
            turns.c.started_at >= began,
        )
    ).scalar_one()
    ended = now if later is None or later > now else later
    return max(ended, began)


# -- operations inside one transaction (composed by the store methods) -------------------


def turn_values(
    session_key: str,
    source: str,
    content: str,
    now: datetime,
    state: TurnState,
    run_id: str | None,
    owner: str | None,
) -> dict[str, Any]:
    return {
        "id": new_id(),
        "session_key": session_key,
        "source": source,
        "state": state.value,
        "run_id": run_id,
        "content": content,
        "created_at": now,
        "owner": owner,
    }


class TurnStore:
    """The turns part of the sessions store: turn records and their recovery (a session's turn
    lease is taken and let go by the group commit, `turn_writes`, renewed by `renew_held`)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def set_turn_reply(self, turn_id: str, message_id: str) -> None:
        """Point a turn at its closing entry (written outside the turn's own end write)."""
        stmt = turns.update().where(turns.c.id == turn_id).values(reply_message_id=message_id)
        await self._db.write(lambda conn: conn.execute(stmt))

    async def get_turn(self, turn_id: str) -> Turn:
        row = await self._db.read(
            lambda conn: conn.execute(sa.select(turns).where(turns.c.id == turn_id)).first()
        )
        if row is None:
            raise TurnNotFoundError(turn_id)
        return _turn(row)

    async def list_turns(self, session_key: str, *, limit: int | None = None) -> list[Turn]:
        """The session's turns, oldest first."""
        query = (
            sa.select(turns)
            .where(turns.c.session_key == session_key)
            .order_by(turns.c.created_at, turns.c.id)
        )
        if limit is not None:
            query = query.limit(limit)
        return await self._db.read(lambda conn: [_turn(r) for r in conn.execute(query)])

    async def release_turns(self, turn_ids: list[str], owner: str) -> int:
        """Give waiting turns back (graceful stop): the next process to start adopts them."""
        if not turn_ids:
            return 0

        def op(conn: Connection) -> int:
            result = conn.execute(
                turns.update()
                .where(
                    turns.c.id.in_(turn_ids),
                    turns.c.owner == owner,
                    turns.c.state.in_(WAITING_TURN),
                )
                .values(owner=None)
            )
            if result.rowcount:
                announce(conn, Topic.RUNS)  # handed back: another process may adopt them
            return int(result.rowcount)

        return await self._db.write(op)

    async def recover_turns(
        self, now: datetime, owner: str, is_dead: Callable[[str], bool]
    ) -> TurnRecovery:
        """Settle the open turns of processes that are gone (released, or certainly dead).

        - a waiting user/hook turn is adopted by `owner` (it never started: nothing is lost);
        - a waiting fire turn whose run is still open is released for the run's adopter to
          continue; one whose run already ended is cancelled;
        - a running turn is marked interrupted (never re-run): its owner is gone, or the
          session's turn lease no longer belongs to it and has expired. It ends at `now`, or
          where the session's next turn began if that was earlier, never before it began
          (`_interrupt`): the stored turns of a session never overlap.
        """

        def op(conn: Connection) -> TurnRecovery:
            rows = conn.execute(
                sa.select(
                    turns,
                    sessions.c.turn_id.label("lease_turn"),
                    sessions.c.turn_lease_expires_at.label("lease_until"),
                )
                .join(sessions, sessions.c.session_key == turns.c.session_key)
                .where(
                    turns.c.state.in_(OPEN_TURN),
                    sa.or_(turns.c.owner.is_(None), turns.c.owner != owner),
                )
                .order_by(turns.c.created_at, turns.c.id)
            ).all()
            adopted: list[Turn] = []
            interrupted: list[Turn] = []
            gone_owners: set[str] = set()
            for row in rows:
                turn = _turn(row)
                gone = turn.owner is None or is_dead(turn.owner)
                if gone and turn.owner is not None:
                    gone_owners.add(turn.owner)
                if turn.state is TurnState.RUNNING:
                    lease_lost = row.lease_turn != turn.id or (
                        row.lease_until is not None and row.lease_until <= now
                    )
                    if gone or lease_lost:
                        interrupted.append(turn)
                    continue
                if not gone:
                    continue
                if turn.run_id is None:
                    adopted.append(turn)
                elif not _run_is_open(conn, turn.run_id):
                    conn.execute(
                        turns.update()
                        .where(turns.c.id == turn.id, turns.c.state.in_(WAITING_TURN))
                        .values(
                            state=TurnState.CANCELLED.value,
                            finished_at=now,
                            error="cancelled: its fire ended without running this turn",
                        )
                    )
                elif turn.owner is not None:
                    conn.execute(
                        turns.update()
                        .where(turns.c.id == turn.id, turns.c.owner == turn.owner)
                        .values(owner=None)
                    )
            # Every change below is a compare-and-set: when two replicas recover at once, each
            # turn is adopted or interrupted by one of them, and only that one returns it (and
            # so posts its notice, or runs it).
            adopted = _claimed(conn, adopted, _adopt_where(gone_owners), owner=owner)
            # Leases of owners that are gone are free at once: a lease taken just before its
            # process died would otherwise hold the session until it expires.
            freed: list[str] = []
            held = conn.execute(
                sa.select(
                    sessions.c.session_key,
                    sessions.c.turn_owner,
                    sessions.c.turn_id,
                    sessions.c.turn_lease_expires_at,
                ).where(sessions.c.turn_owner.is_not(None), sessions.c.turn_owner != owner)
            ).all()
            for key, holder, turn_id, until in held:
                if not (is_dead(holder) or (until is not None and until <= now)):
                    continue
                # Only the lease as it was read: not one renewed or taken since.
                same = [sessions.c.turn_owner == holder]
                same.append(
                    sessions.c.turn_id.is_(None)
                    if turn_id is None
                    else sessions.c.turn_id == turn_id
                )
                if until is not None:
                    same.append(sessions.c.turn_lease_expires_at == until)
                result = conn.execute(
                    sessions.update()
                    .where(sessions.c.session_key == key, *same)
                    .values(turn_owner=None, turn_id=None, turn_lease_expires_at=None)
                )
                if result.rowcount:
                    freed.append(key)
            interrupted = _interrupt(conn, interrupted, now)
            if interrupted:
                # A cut-off turn's session lease is free at once, not when it would expire.
                result = conn.execute(
                    sessions.update()
                    .where(sessions.c.turn_id.in_([t.id for t in interrupted]))
                    .values(turn_owner=None, turn_id=None, turn_lease_expires_at=None)
                    .returning(sessions.c.session_key)
                )
                freed.extend(result.scalars())
            if freed:  # turns waiting elsewhere for these sessions may start now
                announce(conn, Topic.SESSIONS, freed)
            return TurnRecovery(adopted, interrupted)

        return await self._db.write(op)
