"""Sessions, their transcripts, turns and session leases (SQL for the sessions layer)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from agentcron.store.database import Database
from agentcron.store.errors import SessionNotFoundError, TurnNotFoundError
from agentcron.store.ids import new_id
from agentcron.store.models import Message, Session, Turn, TurnState
from agentcron.store.schema import messages, sessions, turns

_TURN_FIELDS = frozenset(
    {"state", "started_at", "finished_at", "error", "error_details", "usage", "reply_message_id"}
)


def _session(row: Row[Any]) -> Session:
    m = row._mapping
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
        source=m["source"],
        state=TurnState(m["state"]),
        run_id=m["run_id"],
        content=m["content"],
        created_at=m["created_at"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        error=m["error"],
        error_details=m["error_details"],
        usage=m["usage"],
        reply_message_id=m["reply_message_id"],
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
        default_channel, _, default_chat = key.partition(":")

        def op(conn: Connection) -> Session:
            row = conn.execute(sa.select(sessions).where(sessions.c.session_key == key)).first()
            if row is None:
                conn.execute(
                    sessions.insert().values(
                        session_key=key,
                        channel=channel or default_channel or "api",
                        chat_id=chat_id if chat_id is not None else default_chat,
                        channel_meta=channel_meta,
                        title=title,
                        tz=tz,
                        created_at=now,
                        updated_at=now,
                    )
                )
                row = conn.execute(sa.select(sessions).where(sessions.c.session_key == key)).one()
            return _session(row)

        return await self._db.write(op)

    async def get_session(self, key: str) -> Session:
        def op(conn: Connection) -> Row[Any] | None:
            return conn.execute(sa.select(sessions).where(sessions.c.session_key == key)).first()

        row = await self._db.read(op)
        if row is None:
            raise SessionNotFoundError(key)
        return _session(row)

    async def list_sessions(self, *, limit: int | None = None) -> list[Session]:
        query = sa.select(sessions).order_by(sessions.c.updated_at.desc())
        if limit is not None:
            query = query.limit(limit)
        return await self._db.read(lambda conn: [_session(r) for r in conn.execute(query)])

    async def delete_session(self, key: str) -> None:
        """Delete a session with its transcript and turns."""

        def op(conn: Connection) -> int:
            # Explicit deletes: SQLite enforces ON DELETE CASCADE only with foreign keys on,
            # and a connection made by another tool may not have it.
            conn.execute(messages.delete().where(messages.c.session_key == key))
            conn.execute(turns.delete().where(turns.c.session_key == key))
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

        def op(conn: Connection) -> Message:
            seq = conn.execute(
                sa.select(sa.func.coalesce(sa.func.max(messages.c.seq), 0)).where(
                    messages.c.session_key == session_key
                )
            ).scalar_one()
            values = {
                "id": new_id(),
                "session_key": session_key,
                "seq": int(seq) + 1,
                "role": role,
                "content": content,
                "meta": meta or {},
                "created_at": now,
            }
            conn.execute(messages.insert().values(values))
            conn.execute(
                sessions.update()
                .where(sessions.c.session_key == session_key)
                .values(updated_at=now)
            )
            return _message(values)

        return await self._db.write(op)

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
    ) -> Turn:
        values: dict[str, Any] = {
            "id": turn_id or new_id(),
            "session_key": session_key,
            "source": source,
            "state": state.value,
            "run_id": run_id,
            "content": content,
            "created_at": now,
            "started_at": None,
            "finished_at": None,
            "error": None,
            "error_details": None,
            "usage": None,
            "input_tokens": None,
            "output_tokens": None,
            "cost_usd": None,
            "reply_message_id": None,
        }
        await self._db.write(lambda conn: conn.execute(turns.insert().values(values)))
        return _turn(values)

    async def update_turn(self, turn_id: str, **fields: Any) -> None:
        unknown = set(fields) - _TURN_FIELDS
        if unknown:
            raise ValueError(f"cannot update turn fields {sorted(unknown)}")
        if isinstance(fields.get("state"), TurnState):
            fields["state"] = fields["state"].value
        if fields.get("usage"):
            usage = fields["usage"]
            fields.update({c: usage.get(c) for c in ("input_tokens", "output_tokens", "cost_usd")})
        await self._db.write(
            lambda conn: conn.execute(turns.update().where(turns.c.id == turn_id).values(fields))
        )

    async def get_turn(self, turn_id: str) -> Turn:
        row = await self._db.read(
            lambda conn: conn.execute(sa.select(turns).where(turns.c.id == turn_id)).first()
        )
        if row is None:
            raise TurnNotFoundError(turn_id)
        return _turn(row)

    async def interrupt_open_turns(self, now: datetime, session_keys: list[str] | None) -> int:
        """Close turns left open by a stopped process (their runs are settled by the engine)."""
        query = turns.update().where(
            turns.c.state.in_([TurnState.QUEUED.value, TurnState.RUNNING.value])
        )
        if session_keys is not None:
            query = query.where(turns.c.session_key.in_(session_keys))
        query = query.values(
            state=TurnState.INTERRUPTED.value,
            finished_at=now,
            error="interrupted: the process running this turn stopped",
        )
        return await self._db.write(lambda conn: int(conn.execute(query).rowcount))

    # -- session leases ----------------------------------------------------------------------

    async def acquire_turn_lease(
        self, key: str, owner: str, turn_id: str, now: datetime, until: datetime
    ) -> datetime | None:
        """Take the session for one turn. None on success; else when the holder's lease ends."""

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
            held = conn.execute(
                sa.select(sessions.c.turn_lease_expires_at).where(sessions.c.session_key == key)
            ).scalar_one_or_none()
            if held is None:
                raise SessionNotFoundError(key)
            return held  # type: ignore[no-any-return]

        return await self._db.write(op)

    async def release_turn_lease(self, key: str, owner: str) -> None:
        await self._db.write(
            lambda conn: conn.execute(
                sessions.update()
                .where(sessions.c.session_key == key, sessions.c.turn_owner == owner)
                .values(turn_owner=None, turn_id=None, turn_lease_expires_at=None)
            )
        )
