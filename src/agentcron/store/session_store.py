"""Sessions and their transcripts (SQL for the sessions layer; turns are in `turn_store`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from agentcron.domain.budgets import Budget, Spend
from agentcron.domain.sessions import Entry, MemoryScope, Message, Role, Session, Turn
from agentcron.domain.states import TurnState
from agentcron.store.errors import SessionNotFoundError
from agentcron.store.ids import new_id
from agentcron.store.rows import _message, _session, _turn
from agentcron.store.schema import messages, recall_history, sessions, turns
from agentcron.store.turn_store import TurnStore, turn_values

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
    runner_url: str | None = None,
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
        "runner_url": runner_url,
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
    runner_url: str | None = None,
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
                    runner_url=runner_url,
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
    # `updated_at` never moves back: an entry stamped before the session's last change (an
    # interrupted notice stamped at the recovery, which closed a turn claimed ahead at its
    # later time) must not let the next turn's start slip before that change
    # (`TurnWrites.start` stamps max(start, updated_at)).
    latest = sa.case(
        (sessions.c.updated_at > now, sessions.c.updated_at),
        else_=sa.literal(now, sessions.c.updated_at.type),
    )
    seq = conn.execute(
        sessions.update()
        .where(sessions.c.session_key == key)
        .values(last_seq=sessions.c.last_seq + 1, updated_at=latest)
        .returning(sessions.c.last_seq)
    ).scalar_one_or_none()
    if seq is None:
        raise SessionNotFoundError(key)
    values = _message_values(key, int(seq), entry, now)
    conn.execute(messages.insert().values(values))
    return _message(values)


class SessionStore(TurnStore):
    """The sessions part of the store (sessions, transcripts; turn records from `TurnStore`);
    shares the database of its SqlStore."""

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
        runner_url: str | None = None,
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
                runner_url=runner_url,
            )
        )

    async def get_session(self, key: str) -> Session:
        def op(conn: Connection) -> Row[Any] | None:
            return conn.execute(sa.select(sessions).where(sessions.c.session_key == key)).first()

        row = await self._db.read(op)
        if row is None:
            raise SessionNotFoundError(key)
        return _session(row)

    async def set_session_budget(
        self, key: str, budget: Budget | None, spend: Spend | None
    ) -> Session:
        def op(conn: Connection) -> Row[Any] | None:
            changed = conn.execute(
                sessions.update()
                .where(sessions.c.session_key == key)
                .values(
                    budget=None if budget is None else budget.as_dict(),
                    spend=None if spend is None else spend.as_dict(),
                    budget_noticed=None,
                )
                .returning(*sessions.c)
            )
            return changed.first()

        row = await self._db.write(op)
        if row is None:
            raise SessionNotFoundError(key)
        return _session(row)

    async def list_sessions(
        self,
        *,
        limit: int | None = None,
        before: tuple[datetime, str] | None = None,
        search: str | None = None,
    ) -> list[Session]:
        """Sessions, most recently updated first (ties by key, last first): after the one
        whose `(updated_at, key)` is `before` (the page before), those whose title or key
        holds `search` (case-insensitive), at most `limit`.
        """
        s = sessions
        query = sa.select(s).order_by(s.c.updated_at.desc(), s.c.session_key.desc())
        if before is not None:
            at, key = before
            query = query.where(
                s.c.updated_at <= at,  # a range of the index (the OR alone is not, to PostgreSQL)
                sa.or_(s.c.updated_at < at, sa.and_(s.c.updated_at == at, s.c.session_key < key)),
            )
        if search:
            pattern = "%" + _escape_like(search.lower()) + "%"
            query = query.where(
                sa.or_(
                    sa.func.lower(s.c.title).like(pattern, escape="\\"),
                    sa.func.lower(s.c.session_key).like(pattern, escape="\\"),
                )
            )
        if limit is not None:
            query = query.limit(limit)
        return await self._db.read(lambda conn: [_session(r) for r in conn.execute(query)])

    async def set_quiet_hours(self, key: str, hours: str | None, now: datetime) -> Session:
        """Set (None: clear) the session's quiet hours; SessionNotFoundError: no session."""

        def op(conn: Connection) -> Row[Any] | None:
            return conn.execute(
                sessions.update()
                .where(sessions.c.session_key == key)
                .values(quiet_hours=hours, updated_at=now)
                .returning(*sessions.c)
            ).first()

        row = await self._db.write(op)
        if row is None:
            raise SessionNotFoundError(key)
        return _session(row)

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
        role: Role,
        content: str,
        now: datetime,
        meta: dict[str, Any] | None = None,
    ) -> Message:
        """Append one entry to the session's transcript (append-only, ordered by seq)."""
        entry = Entry(Role(role), content, meta or {})  # a plain "user" works too
        return await self._db.write(lambda conn: _append_op(conn, session_key, entry, now))

    async def get_message(self, message_id: str) -> Message | None:
        row = await self._db.read(
            lambda conn: conn.execute(
                sa.select(messages).where(messages.c.id == message_id)
            ).first()
        )
        return None if row is None else _message(row)

    async def list_messages(
        self,
        session_key: str,
        *,
        after: int | None = None,
        limit: int | None = None,
        before: int | None = None,
    ) -> list[Message]:
        """Transcript entries in order; `after` is a seq (exclusive). With `before` (a seq,
        exclusive), the newest `limit` entries below it, in order (reading back).
        """
        query = sa.select(messages).where(messages.c.session_key == session_key)
        # A seq is a 32-bit integer: a bound past it is not bound as one (PostgreSQL refuses).
        if after is not None:
            if after >= _MAX_SEQ:
                return []
            query = query.where(messages.c.seq > after)
        if before is not None:
            if before <= _MAX_SEQ:
                query = query.where(messages.c.seq < before)
            query = query.order_by(messages.c.seq.desc())
        else:
            query = query.order_by(messages.c.seq)
        if limit is not None:
            query = query.limit(limit)
        found = await self._db.read(lambda conn: [_message(r) for r in conn.execute(query)])
        if before is not None:
            found.reverse()
        return found

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
        query = (
            sa.select(m)
            .join(s, s.c.session_key == m.c.session_key)
            .where(
                _in_scope(s.c.session_key, scope),
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

    async def last_talked(self, scope: MemoryScope) -> str | None:
        """The session of `scope` with the newest user turn (where a person last talked), by
        the turns' creation time; None when there is none.
        """
        query = (
            sa.select(turns.c.session_key)
            .where(turns.c.source == "user", _in_scope(turns.c.session_key, scope))
            .order_by(turns.c.created_at.desc(), turns.c.id.desc())
            .limit(1)
        )
        return await self._db.read(lambda conn: conn.execute(query).scalar_one_or_none())

    # -- turns -----------------------------------------------------------------------------

    async def open_turn(
        self,
        session_key: str,
        source: str,
        content: str,
        now: datetime,
        *,
        owner: str,
        state: TurnState = TurnState.QUEUED,
        title: str | None = None,
    ) -> Turn:
        """One transaction: ensure the session (and give it `title` if it has none), then a
        new turn record (a fire's turn record is written by its claim, `claim_due`).
        """

        def op(conn: Connection) -> Turn:
            _ensure_session_op(conn, session_key, now)
            if title is not None:
                conn.execute(
                    sessions.update()
                    .where(sessions.c.session_key == session_key, sessions.c.title.is_(None))
                    .values(title=title)
                )
            values = turn_values(session_key, source, content, now, state, None, owner)
            conn.execute(turns.insert().values(values))
            return _turn(values)

        return await self._db.write(op)


_MAX_SEQ = 2**31 - 1  # the largest `messages.seq` (sa.Integer)


def _escape_like(text: str) -> str:
    """`text` matched literally by LIKE (escape character `\\`)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _in_scope(key: sa.ColumnElement[str], scope: MemoryScope) -> sa.ColumnElement[bool]:
    """`key` is one of the scope's sessions (listed, or under one of its prefixes)."""
    found: list[sa.ColumnElement[bool]] = [
        sa.func.substr(key, 1, len(p)) == p for p in scope.prefixes
    ]
    if scope.keys:
        found.append(key.in_(scope.keys))
    return sa.or_(*found)
