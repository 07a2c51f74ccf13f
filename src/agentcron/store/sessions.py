"""Sessions, their transcripts, turns and session leases (SQL for the sessions layer)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from agentcron.store.database import Database
from agentcron.store.errors import SessionNotFoundError, TurnNotFoundError
from agentcron.store.ids import new_id
from agentcron.store.models import (
    ACTIVE_STATES,
    DIED_MID_TURN,
    Entry,
    JobKind,
    MemoryScope,
    Message,
    RunState,
    Session,
    Turn,
    TurnSource,
    TurnState,
)
from agentcron.store.schema import jobs, messages, recall_history, runs, sessions, turns

WAITING_TURN = (TurnState.QUEUED.value, TurnState.DEFERRED.value)
_WAITING_TURN = WAITING_TURN
OPEN_TURN = (*_WAITING_TURN, TurnState.RUNNING.value)
_OPEN_TURN = OPEN_TURN


@dataclass(frozen=True, slots=True)
class TurnRecovery:
    """What `recover_turns` settled: turns to run here, and turns that were cut off."""

    adopted: list[Turn]  # waiting user/hook turns of a process that is gone: now ours
    interrupted: list[Turn]  # running turns of a process that is gone: closed as interrupted


def _run_is_open(conn: Connection, run_id: str) -> bool:
    state = conn.execute(sa.select(runs.c.state).where(runs.c.id == run_id)).scalar_one_or_none()
    return state is not None and RunState(state) in ACTIVE_STATES


def _session(row: Row[Any] | Mapping[str, Any]) -> Session:
    m = row._mapping if isinstance(row, Row) else row
    return Session(
        key=m["session_key"],
        channel=m["channel"],
        chat_id=m["chat_id"],
        channel_meta=m["channel_meta"],
        title=m["title"],
        tz=m["tz"],
        turn_owner=m["turn_owner"],
        turn_id=m["turn_id"],
        turn_lease_expires_at=m["turn_lease_expires_at"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
    )


def _message(row: Row[Any] | Mapping[str, Any]) -> Message:
    m = row._mapping if isinstance(row, Row) else row
    return Message(
        id=m["id"],
        session_key=m["session_key"],
        seq=m["seq"],
        role=m["role"],
        content=m["content"],
        meta=m["meta"] or {},
        created_at=m["created_at"],
    )


def _turn(row: Row[Any] | Mapping[str, Any]) -> Turn:
    m = row._mapping if isinstance(row, Row) else row
    return Turn(
        id=m["id"],
        session_key=m["session_key"],
        source=TurnSource(m["source"]),
        state=TurnState(m["state"]),
        run_id=m["run_id"],
        content=m["content"],
        created_at=m["created_at"],
        started_at=m.get("started_at"),
        finished_at=m.get("finished_at"),
        error=m.get("error"),
        error_details=m.get("error_details"),
        usage=m.get("usage"),
        reply_message_id=m.get("reply_message_id"),
        owner=m.get("owner"),
    )


# -- operations inside one transaction (composed by the SessionStore methods) -------------------


def session_values(
    key: str,
    now: datetime,
    *,
    channel: str | None = None,
    chat_id: str | None = None,
    channel_meta: dict[str, Any] | None = None,
    title: str | None = None,
    tz: str = "UTC",
) -> dict[str, Any]:
    """A new session row; channel and chat id default to the two halves of `channel:chat_id`."""
    default_channel, _, default_chat = key.partition(":")
    return {
        "session_key": key,
        "channel": channel or default_channel or "api",
        "chat_id": chat_id if chat_id is not None else default_chat,
        "channel_meta": channel_meta,
        "title": title,
        "tz": tz,
        "last_seq": 0,
        "created_at": now,
        "updated_at": now,
    }


def _ensure_session_op(
    conn: Connection,
    key: str,
    now: datetime,
    *,
    channel: str | None = None,
    chat_id: str | None = None,
    channel_meta: dict[str, Any] | None = None,
    title: str | None = None,
    tz: str = "UTC",
) -> Session:
    row = conn.execute(sa.select(sessions).where(sessions.c.session_key == key)).first()
    if row is None:
        conn.execute(
            sessions.insert().values(
                session_values(
                    key,
                    now,
                    channel=channel,
                    chat_id=chat_id,
                    channel_meta=channel_meta,
                    title=title,
                    tz=tz,
                )
            )
        )
        row = conn.execute(sa.select(sessions).where(sessions.c.session_key == key)).one()
    return _session(row)


def _message_values(key: str, seq: int, entry: Entry, now: datetime) -> dict[str, Any]:
    return {
        "id": new_id(),
        "session_key": key,
        "seq": seq,
        "role": entry.role,
        "content": entry.content,
        "meta": entry.meta,
        "created_at": now,
    }


def _append_op(conn: Connection, key: str, entry: Entry, now: datetime) -> Message:
    # The counter on the session row gives the seq (and locks the row on PostgreSQL).
    seq = conn.execute(
        sessions.update()
        .where(sessions.c.session_key == key)
        .values(last_seq=sessions.c.last_seq + 1, updated_at=now)
        .returning(sessions.c.last_seq)
    ).scalar_one_or_none()
    if seq is None:
        raise SessionNotFoundError(key)
    values = _message_values(key, int(seq), entry, now)
    conn.execute(messages.insert().values(values))
    return _message(values)


def turn_values(
    session_key: str,
    source: str,
    content: str,
    now: datetime,
    state: TurnState,
    run_id: str | None,
    owner: str | None,
    turn_id: str | None = None,
) -> dict[str, Any]:
    return {
        "id": turn_id or new_id(),
        "session_key": session_key,
        "source": source,
        "state": state.value,
        "run_id": run_id,
        "content": content,
        "created_at": now,
        "owner": owner,
    }


def _take_fire_turn_op(conn: Connection, run_id: str, owner: str, state: TurnState) -> Turn | None:
    result = conn.execute(
        turns.update()
        .where(turns.c.run_id == run_id, turns.c.state.in_(_WAITING_TURN))
        .values(owner=owner, state=state.value)
    )
    if not result.rowcount:
        return None
    row = conn.execute(sa.select(turns).where(turns.c.run_id == run_id)).first()
    return None if row is None else _turn(row)


def _acquire_op(
    conn: Connection, key: str, owner: str, turn_id: str, now: datetime, until: datetime
) -> datetime | None:
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
    held = conn.execute(
        sa.select(sessions.c.turn_lease_expires_at).where(sessions.c.session_key == key)
    ).scalar_one_or_none()
    if held is None:
        raise SessionNotFoundError(key)
    return held  # type: ignore[no-any-return]


def _release_op(conn: Connection, key: str, owner: str) -> None:
    conn.execute(
        sessions.update()
        .where(sessions.c.session_key == key, sessions.c.turn_owner == owner)
        .values(turn_owner=None, turn_id=None, turn_lease_expires_at=None)
    )


class SessionStore:
    """The sessions part of the store; shares the database of its SqlStore."""

    def __init__(self, db: Database) -> None:
        self._db = db

    # -- sessions --------------------------------------------------------------------------

    async def ensure_session(
        self,
        key: str,
        now: datetime,
        *,
        channel: str | None = None,
        chat_id: str | None = None,
        channel_meta: dict[str, Any] | None = None,
        title: str | None = None,
        tz: str = "UTC",
    ) -> Session:
        """Return session `key`, creating it (channel and chat id from `channel:chat_id`)."""
        return await self._db.write(
            lambda conn: _ensure_session_op(
                conn,
                key,
                now,
                channel=channel,
                chat_id=chat_id,
                channel_meta=channel_meta,
                title=title,
                tz=tz,
            )
        )

    async def get_session(self, key: str) -> Session:
        def op(conn: Connection) -> Row[Any] | None:
            return conn.execute(sa.select(sessions).where(sessions.c.session_key == key)).first()

        row = await self._db.read(op)
        if row is None:
            raise SessionNotFoundError(key)
        return _session(row)

    async def list_sessions(self, *, limit: int | None = None) -> list[Session]:
        query = sa.select(sessions).order_by(
            sessions.c.updated_at.desc(), sessions.c.created_at.desc(), sessions.c.session_key
        )
        if limit is not None:
            query = query.limit(limit)
        return await self._db.read(lambda conn: [_session(r) for r in conn.execute(query)])

    async def job_summary(self) -> dict[str, dict[str, int]]:
        """Per session: its enabled automations and pending recalls (for sidebars; one query)."""
        query = (
            sa.select(jobs.c.session_key, jobs.c.kind, sa.func.count())
            .where(jobs.c.session_key.is_not(None), jobs.c.enabled.is_(sa.true()))
            .group_by(jobs.c.session_key, jobs.c.kind)
        )
        summary: dict[str, dict[str, int]] = {}
        for key, kind, count in await self._db.read(lambda conn: conn.execute(query).all()):
            entry = summary.setdefault(key, {"automations": 0, "recalls": 0})
            if kind == JobKind.RECALL.value:
                entry["recalls"] += int(count)
            elif kind == JobKind.AGENT_TURN.value:
                entry["automations"] += int(count)
        return summary

    async def delete_session(self, key: str) -> None:
        """Delete a session with its transcript and turns."""

        def op(conn: Connection) -> int:
            # Explicit deletes: SQLite enforces ON DELETE CASCADE only with foreign keys on,
            # and a connection made by another tool may not have it.
            conn.execute(messages.delete().where(messages.c.session_key == key))
            conn.execute(turns.delete().where(turns.c.session_key == key))
            conn.execute(recall_history.delete().where(recall_history.c.session_key == key))
            return int(
                conn.execute(sessions.delete().where(sessions.c.session_key == key)).rowcount
            )

        if not await self._db.write(op):
            raise SessionNotFoundError(key)

    # -- transcript ------------------------------------------------------------------------

    async def append_message(
        self,
        session_key: str,
        role: str,
        content: str,
        now: datetime,
        meta: dict[str, Any] | None = None,
    ) -> Message:
        """Append one entry to the session's transcript (append-only, ordered by seq)."""
        entry = Entry(role, content, meta or {})
        return await self._db.write(lambda conn: _append_op(conn, session_key, entry, now))

    async def get_message(self, message_id: str) -> Message | None:
        row = await self._db.read(
            lambda conn: conn.execute(
                sa.select(messages).where(messages.c.id == message_id)
            ).first()
        )
        return None if row is None else _message(row)

    async def list_messages(
        self, session_key: str, *, after: int | None = None, limit: int | None = None
    ) -> list[Message]:
        """Transcript entries in order; `after` is a seq (exclusive)."""
        query = (
            sa.select(messages)
            .where(messages.c.session_key == session_key)
            .order_by(messages.c.seq)
        )
        if after is not None:
            query = query.where(messages.c.seq > after)
        if limit is not None:
            query = query.limit(limit)
        return await self._db.read(lambda conn: [_message(r) for r in conn.execute(query)])

    # -- turns -----------------------------------------------------------------------------

    async def create_turn(
        self,
        session_key: str,
        source: str,
        content: str,
        now: datetime,
        *,
        state: TurnState = TurnState.QUEUED,
        run_id: str | None = None,
        turn_id: str | None = None,
        owner: str | None = None,
    ) -> Turn:
        values = turn_values(session_key, source, content, now, state, run_id, owner, turn_id)
        await self._db.write(lambda conn: conn.execute(turns.insert().values(values)))
        return _turn(values)

    async def open_turn(
        self,
        session_key: str,
        source: str,
        content: str,
        now: datetime,
        *,
        owner: str,
        state: TurnState = TurnState.QUEUED,
        run_id: str | None = None,
        title: str | None = None,
    ) -> Turn:
        """One transaction: ensure the session (and give it `title` if it has none), then the
        turn record (for a fire adopted after a restart, the waiting turn it left, taken over;
        else a new one).
        """

        def op(conn: Connection) -> Turn:
            _ensure_session_op(conn, session_key, now)
            if title is not None:
                conn.execute(
                    sessions.update()
                    .where(sessions.c.session_key == session_key, sessions.c.title.is_(None))
                    .values(title=title)
                )
            if run_id is not None:
                taken = _take_fire_turn_op(conn, run_id, owner, state)
                if taken is not None:
                    return taken
            values = turn_values(session_key, source, content, now, state, run_id, owner)
            conn.execute(turns.insert().values(values))
            return _turn(values)

        return await self._db.write(op)

    async def history(self, session_key: str, *, before: int, limit: int) -> list[Message]:
        """The newest `limit` transcript entries with seq below `before`, oldest first (one
        indexed read, whatever the transcript's length).
        """
        query = (
            sa.select(messages)
            .where(messages.c.session_key == session_key, messages.c.seq < before)
            .order_by(messages.c.seq.desc())
            .limit(limit)
        )
        rows = await self._db.read(lambda conn: [_message(r) for r in conn.execute(query)])
        rows.reverse()
        return rows

    async def history_across(
        self, scope: MemoryScope, session_key: str, *, before: int, limit: int
    ) -> list[Message]:
        """The memory of a turn of `session_key` whose opening entry is `before`, when several
        sessions share one memory (`scope`): the newest `limit` entries of those sessions as
        one timeline, oldest first. From `session_key` the entries with seq below `before`;
        from the others those written no later than that opening entry. One read that
        looks at most `limit` entries of each session in the scope (by the (session, seq)
        index), whatever the transcripts' lengths.
        """
        m, s = messages, sessions
        anchor = (
            sa.select(m.c.created_at)
            .where(m.c.session_key == session_key, m.c.seq == before)
            .scalar_subquery()
        )
        in_scope: list[sa.ColumnElement[bool]] = [
            sa.func.substr(s.c.session_key, 1, len(p)) == p for p in scope.prefixes
        ]
        if scope.keys:
            in_scope.append(s.c.session_key.in_(scope.keys))
        query = (
            sa.select(m)
            .join(s, s.c.session_key == m.c.session_key)
            .where(
                sa.or_(*in_scope),
                sa.or_(
                    sa.and_(
                        m.c.session_key == session_key,
                        m.c.seq < before,
                        m.c.seq >= before - limit,
                    ),
                    sa.and_(
                        m.c.session_key != session_key,
                        m.c.seq > s.c.last_seq - limit,
                        m.c.created_at <= anchor,
                    ),
                ),
            )
            .order_by(m.c.created_at.desc(), m.c.session_key.desc(), m.c.seq.desc())
            .limit(limit)
        )
        rows = await self._db.read(lambda conn: [_message(r) for r in conn.execute(query)])
        rows.reverse()
        return rows

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
                    turns.c.state.in_(_WAITING_TURN),
                )
                .values(owner=None)
            )
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
          session's turn lease no longer belongs to it and has expired.
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
                    turns.c.state.in_(_OPEN_TURN),
                    sa.or_(turns.c.owner.is_(None), turns.c.owner != owner),
                )
                .order_by(turns.c.created_at, turns.c.id)
            ).all()
            adopted: list[Turn] = []
            interrupted: list[Turn] = []
            for row in rows:
                turn = _turn(row)
                gone = turn.owner is None or is_dead(turn.owner)
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
                        .where(turns.c.id == turn.id)
                        .values(
                            state=TurnState.CANCELLED.value,
                            finished_at=now,
                            error="cancelled: its fire ended without running this turn",
                        )
                    )
                elif turn.owner is not None:
                    conn.execute(turns.update().where(turns.c.id == turn.id).values(owner=None))
            if adopted:
                conn.execute(
                    turns.update()
                    .where(turns.c.id.in_([t.id for t in adopted]))
                    .values(owner=owner)
                )
            # Leases of owners that are gone are free at once: a lease taken just before its
            # process died would otherwise hold the session until it expires.
            held = conn.execute(
                sa.select(
                    sessions.c.session_key, sessions.c.turn_owner, sessions.c.turn_lease_expires_at
                ).where(sessions.c.turn_owner.is_not(None), sessions.c.turn_owner != owner)
            ).all()
            stale = [
                key
                for key, holder, until in held
                if is_dead(holder) or (until is not None and until <= now)
            ]
            for start in range(0, len(stale), 500):
                conn.execute(
                    sessions.update()
                    .where(sessions.c.session_key.in_(stale[start : start + 500]))
                    .values(turn_owner=None, turn_id=None, turn_lease_expires_at=None)
                )
            if interrupted:
                conn.execute(
                    turns.update()
                    .where(turns.c.id.in_([t.id for t in interrupted]))
                    .values(state=TurnState.INTERRUPTED.value, finished_at=now, error=DIED_MID_TURN)
                )
                # A cut-off turn's session lease is free at once, not when it would expire.
                conn.execute(
                    sessions.update()
                    .where(sessions.c.turn_id.in_([t.id for t in interrupted]))
                    .values(turn_owner=None, turn_id=None, turn_lease_expires_at=None)
                )
            return TurnRecovery(adopted, interrupted)

        return await self._db.write(op)

    # -- session leases ----------------------------------------------------------------------

    async def acquire_turn_lease(
        self, key: str, owner: str, turn_id: str, now: datetime, until: datetime
    ) -> datetime | None:
        """Take the session for one turn. None on success; else when the holder's lease ends."""
        return await self._db.write(lambda conn: _acquire_op(conn, key, owner, turn_id, now, until))

    async def renew_turn_lease(self, key: str, owner: str, until: datetime) -> bool:
        """Extend the session's turn lease while a long turn runs; False if it was lost."""

        def op(conn: Connection) -> bool:
            result = conn.execute(
                sessions.update()
                .where(sessions.c.session_key == key, sessions.c.turn_owner == owner)
                .values(turn_lease_expires_at=until)
            )
            return bool(result.rowcount)

        return await self._db.write(op)

    async def release_turn_lease(self, key: str, owner: str) -> None:
        await self._db.write(lambda conn: _release_op(conn, key, owner))
