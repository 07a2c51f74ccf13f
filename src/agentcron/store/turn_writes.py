"""The turn part of one group commit: starts and finishes against the session rows read once
for the batch, written as a few executemany statements.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from agentcron.domain.sessions import Entry, Message, Session
from agentcron.domain.states import TurnState
from agentcron.store.bulk import executemany
from agentcron.store.rows import _message, _session
from agentcron.store.schema import messages, sessions, turns
from agentcron.store.session_store import _message_values
from agentcron.store.signals import Topic, announce
from agentcron.store.turn_store import OPEN_TURN, WAITING_TURN
from agentcron.store.writes import Remember, TurnFinish, TurnStart

_START_TURN = (
    turns.update()
    .where(
        turns.c.id == sa.bindparam("b_id"),
        turns.c.state.in_([sa.literal_column(f"'{s}'") for s in WAITING_TURN]),
    )
    .values(
        state=TurnState.RUNNING.value,
        started_at=sa.bindparam("started_at", type_=turns.c.started_at.type),
        # a unified-mode fire starts in the thread it is delivered to (else: unchanged)
        session_key=sa.bindparam("b_session"),
    )
)
_FINISH_TURN = (
    turns.update()
    .where(
        turns.c.id == sa.bindparam("b_id"),
        turns.c.state.in_([sa.literal_column(f"'{s}'") for s in OPEN_TURN]),
    )
    .values(
        {
            c: sa.bindparam(c, type_=turns.c[c].type)
            for c in (
                "state",
                "finished_at",
                "error",
                "error_details",
                "usage",
                "input_tokens",
                "output_tokens",
                "cost_usd",
                "reply_message_id",
            )
        }
    )
)
_SESSION_STATE = (
    sessions.update()
    .where(sessions.c.session_key == sa.bindparam("b_key"))
    .values(
        {
            c: sa.bindparam(c, type_=sessions.c[c].type)
            for c in ("turn_owner", "turn_id", "turn_lease_expires_at", "last_seq", "updated_at")
        }
    )
)
_USAGE = ("input_tokens", "output_tokens", "cost_usd")
# Built once: building a statement costs more than running it on the hot path.
_SESSIONS_IN = sa.select(sessions).where(
    sessions.c.session_key.in_(sa.bindparam("keys", expanding=True))
)
_SESSIONS_FOR_UPDATE = _SESSIONS_IN.with_for_update()
_INSERT_MESSAGES = messages.insert()


def _held_until(row: dict[str, Any], owner: str, at: datetime) -> datetime | None:
    """Until when another owner's live lease holds the session row (None: it is free)."""
    holder, until = row["turn_owner"], row["turn_lease_expires_at"]
    if holder is not None and holder != owner and until is not None and until > at:
        return until  # type: ignore[no-any-return]
    return None


def _holds(row: dict[str, Any], owner: str, turn_id: str) -> bool:
    """The session row's lease is this owner's, for this turn."""
    return bool(row["turn_owner"] == owner and row["turn_id"] == turn_id)


class TurnWrites:
    """The turn part of one group commit: starts and finishes applied in the order given,
    against the session rows read once for the whole batch, then written as a few
    executemany statements (whatever the batch size).
    """

    def __init__(self, conn: Connection, keys: set[str]) -> None:
        self._conn = conn
        self._sessions: dict[str, dict[str, Any]] = {}
        query = _SESSIONS_FOR_UPDATE if conn.dialect.name == "postgresql" else _SESSIONS_IN
        ordered = sorted(keys)
        for start in range(0, len(ordered), 500):
            result = conn.execute(query, {"keys": ordered[start : start + 500]})
            columns = tuple(result.keys())  # once: a row's own mapping lists them per call
            for row in result:
                values = dict(zip(columns, row, strict=True))
                self._sessions[values["session_key"]] = values
        self._touched: set[str] = set()
        self._messages: list[dict[str, Any]] = []
        self._starts: list[dict[str, Any]] = []
        self._finishes: list[dict[str, Any]] = []
        self._freed: list[str] = []  # sessions whose lease this batch lets go

    def _append(self, row: dict[str, Any], key: str, entry: Entry, now: datetime) -> Message:
        row["last_seq"] += 1
        if row["updated_at"] is None or now > row["updated_at"]:
            # Never back (see `_append_op`): a start is stamped no earlier than this.
            row["updated_at"] = now
        values = _message_values(key, row["last_seq"], entry, now)
        self._messages.append(values)
        self._touched.add(key)
        return _message(values)

    def start(
        self, w: TurnStart
    ) -> tuple[Message | None, Session | None, datetime | None, datetime]:
        """(opening entry, session, None, started at) when the turn began; (None, None, until,
        _) when another owner's lease holds the session; (None, None, None, _) when the
        session is gone.

        A turn starts no earlier than the session's last entry: the start was stamped when it
        was submitted, and the turn it waited for (perhaps in another process) may have ended
        after that, while this start waited for the group commit that takes the lease. So the
        stored turns of a session never overlap, whoever ran them.
        """
        row = self._sessions.get(w.session_key)
        if row is None:
            return None, None, None, w.at
        # With `lease_key`, that session's lease too (a missing one holds nothing).
        lane = None if w.lease_key is None else self._sessions.get(w.lease_key)
        held = [r for r in (row, lane) if r is not None]
        busy = [_held_until(r, w.owner, w.at) for r in held]
        if any(busy):
            return None, None, max(u for u in busy if u is not None), w.at
        at = w.at
        last = row["updated_at"]
        if last is not None and last > at:
            at = last
        for r in held:
            r.update(turn_owner=w.owner, turn_id=w.turn_id, turn_lease_expires_at=w.lease_until)
        if self._freed:  # let go and taken again in this batch (back-to-back turns): held
            self._freed = [k for k in self._freed if k not in (w.session_key, w.lease_key)]
        if lane is not None and w.lease_key is not None:
            self._touched.add(w.lease_key)
        message = self._append(row, w.session_key, w.entry, at)
        self._starts.append({"b_id": w.turn_id, "started_at": at, "b_session": w.session_key})
        return message, _session(row), None, at

    def remember(self, w: Remember, now: datetime) -> list[Message]:
        """Append an isolated run's exchange to its own session (created before this batch
        by the caller); nothing if that session is gone.
        """
        row = self._sessions.get(w.session_key)
        if row is None:
            return []
        return [self._append(row, w.session_key, entry, now) for entry in w.entries]

    def finish(self, w: TurnFinish) -> Message | None:
        row = self._sessions.get(w.session_key)
        message = None
        if row is not None:
            holds = _holds(row, w.owner, w.turn_id)
            if w.entry is not None and (holds or self._open(w.turn_id)):
                for entry in w.before:
                    self._append(row, w.session_key, entry, w.at)
                message = self._append(row, w.session_key, w.entry, w.at)
            if holds:
                row.update(turn_owner=None, turn_id=None, turn_lease_expires_at=None)
                self._touched.add(w.session_key)
                self._freed.append(w.session_key)
        lane = None if w.lease_key is None else self._sessions.get(w.lease_key)
        if lane is not None and w.lease_key is not None and _holds(lane, w.owner, w.turn_id):
            lane.update(turn_owner=None, turn_id=None, turn_lease_expires_at=None)
            self._touched.add(w.lease_key)
            self._freed.append(w.lease_key)
        usage = w.usage or {}
        self._finishes.append(
            {
                "b_id": w.turn_id,
                "state": w.state.value,
                "finished_at": w.at,
                "error": w.error,
                "error_details": w.error_details,
                "usage": w.usage,
                **{c: usage.get(c) for c in _USAGE},
                "reply_message_id": None if message is None else message.id,
            }
        )
        return message

    def _open(self, turn_id: str) -> bool:
        """The turn is not closed yet (read only for a turn that no longer holds its session:
        another process's recovery may have closed it, with its own notice, meanwhile).
        """
        state = self._conn.execute(
            sa.select(turns.c.state).where(turns.c.id == turn_id)
        ).scalar_one_or_none()
        return state in OPEN_TURN

    def flush(self) -> None:
        conn = self._conn
        if self._messages:
            executemany(conn, _INSERT_MESSAGES, self._messages)
        if self._touched:
            executemany(
                conn,
                _SESSION_STATE,
                [
                    {
                        "b_key": key,
                        **{
                            c: self._sessions[key][c]
                            for c in (
                                "turn_owner",
                                "turn_id",
                                "turn_lease_expires_at",
                                "last_seq",
                                "updated_at",
                            )
                        },
                    }
                    for key in sorted(self._touched)
                ],
            )
        if self._starts:
            executemany(conn, _START_TURN, self._starts)
        if self._finishes:
            executemany(conn, _FINISH_TURN, self._finishes)
        if self._freed:  # a turn of another process may wait for one of these sessions
            announce(conn, Topic.SESSIONS, self._freed)
