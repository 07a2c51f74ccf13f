"""Durable delivery records of outbound channels: one per (channel, message), pending -> done."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Row

from agentcron.domain.attachments import without_bytes
from agentcron.domain.deliveries import Delivery, DeliveryCursor, DeliveryState
from agentcron.store.database import Database
from agentcron.store.errors import DeliveryNotFailedError, DeliveryNotFoundError
from agentcron.store.schema import deliveries


def _delivery(row: Row[Any] | Mapping[str, Any]) -> Delivery:
    m = row._mapping if isinstance(row, Row) else row
    return Delivery(
        channel=m["channel"],
        message_id=m["message_id"],
        session_key=m["session_key"],
        state=DeliveryState(m["state"]),
        payload=m["payload"] or {},
        attempts=m["attempts"],
        last_error=m["last_error"],
        next_attempt_at=m["next_attempt_at"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        delivered_at=m["delivered_at"],
        result=m["result"],
        external_id=m["external_id"],
        retried_at=m["retried_at"],
    )


def _key(channel: str, message_id: str) -> sa.ColumnElement[bool]:
    return sa.and_(deliveries.c.channel == channel, deliveries.c.message_id == message_id)


def _select(conn: Connection, channel: str, message_id: str) -> Row[Any] | None:
    return conn.execute(sa.select(deliveries).where(_key(channel, message_id))).first()


class DeliveryStore:
    """The delivery records part of the store; shares the database of its SqlStore.

    Every state change is a compare-and-set on a pending record, so two processes that both
    resume the same pending delivery never send it at the same time.
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    def _insert(self) -> Any:
        return (postgresql.insert if self._db.dialect == "postgresql" else sqlite.insert)(
            deliveries
        )

    async def enqueue(
        self,
        channel: str,
        message_id: str,
        session_key: str,
        payload: dict[str, Any],
        now: datetime,
    ) -> tuple[Delivery, bool]:
        """Record a pending delivery; an existing record is returned as it is.

        Returns (record, created): `created` is False when the message was already recorded
        on this channel (delivered, failed, or pending from an earlier attempt).
        """
        return await self._insert_new(channel, message_id, session_key, payload, now)

    async def record_failed(
        self,
        channel: str,
        message_id: str,
        session_key: str,
        payload: dict[str, Any],
        *,
        error: str,
        now: datetime,
    ) -> tuple[Delivery, bool]:
        """Record a delivery that failed before any attempt (an unroutable reply: no such
        channel, a chat it may not serve), with the reason; an existing record is returned as
        it is (`created` False).
        """
        return await self._insert_new(channel, message_id, session_key, payload, now, failed=error)

    async def _insert_new(
        self,
        channel: str,
        message_id: str,
        session_key: str,
        payload: dict[str, Any],
        now: datetime,
        *,
        failed: str | None = None,
    ) -> tuple[Delivery, bool]:
        state = DeliveryState.PENDING if failed is None else DeliveryState.FAILED
        values: dict[str, Any] = {
            "channel": channel,
            "message_id": message_id,
            "session_key": session_key,
            "state": state.value,
            "payload": payload,
            "attempts": 0,
            "last_error": failed,
            "next_attempt_at": now if failed is None else None,
            "created_at": now,
            "updated_at": now,
            "delivered_at": None,
            "result": None,
            "external_id": None,
            "retried_at": None,
        }
        # RETURNING, not rowcount: drivers disagree on rowcount for ON CONFLICT DO NOTHING.
        stmt = (
            self._insert()
            .values(values)
            .on_conflict_do_nothing()
            .returning(deliveries.c.message_id)
        )

        def op(conn: Connection) -> tuple[Delivery, bool]:
            created = conn.execute(stmt).first() is not None
            row = _select(conn, channel, message_id)
            if row is None:  # inserted or already there, in this transaction: cannot be
                raise DeliveryNotFoundError(channel, message_id)
            return _delivery(row), created

        return await self._db.write(op)

    async def get(self, channel: str, message_id: str) -> Delivery:
        row = await self._db.read(lambda conn: _select(conn, channel, message_id))
        if row is None:
            raise DeliveryNotFoundError(channel, message_id)
        return _delivery(row)

    async def begin_attempt(
        self,
        channel: str,
        message_id: str,
        *,
        attempts: int,
        now: datetime,
        lease: timedelta | None = None,
    ) -> Delivery | None:
        """Count one more attempt if the record is still pending at `attempts` tries.

        None when it is no longer ours to send: delivered, failed, or another process
        started an attempt since the caller read it. With a `lease`, the attempt marks the
        record in flight (no `next_attempt_at` until it fails or settles) and is taken only
        when no attempt is in flight, or the one in flight began more than `lease` ago (its
        process is taken for dead): a process that read the record before another's attempt
        began cannot start one beside it.
        """
        conditions = [
            _key(channel, message_id),
            deliveries.c.state == DeliveryState.PENDING.value,
            deliveries.c.attempts == attempts,
        ]
        values: dict[str, Any] = {"attempts": attempts + 1, "updated_at": now}
        if lease is not None:
            began = sa.bindparam("began", now - lease, type_=deliveries.c.updated_at.type)
            conditions.append(
                sa.or_(deliveries.c.next_attempt_at.is_not(None), deliveries.c.updated_at <= began)
            )
            values["next_attempt_at"] = None

        def op(conn: Connection) -> Delivery | None:
            result = conn.execute(deliveries.update().where(*conditions).values(values))
            if not result.rowcount:
                return None
            row = _select(conn, channel, message_id)
            return None if row is None else _delivery(row)

        return await self._db.write(op)

    async def mark_delivered(
        self,
        channel: str,
        message_id: str,
        now: datetime,
        *,
        result: dict[str, Any] | None = None,
        external_id: str | None = None,
    ) -> bool:
        """Pending -> delivered, with what the far end answered (`result`; None keeps what
        `save_progress` left) and its id of the message. False if the record was not pending.
        """
        values: dict[str, Any] = {"result": result} if result is not None else {}
        if external_id is not None:
            values["external_id"] = external_id
        return await self._settle(
            channel,
            message_id,
            state=DeliveryState.DELIVERED.value,
            delivered_at=now,
            next_attempt_at=None,
            last_error=None,
            updated_at=now,
            **values,
        )

    async def save_progress(
        self, channel: str, message_id: str, result: dict[str, Any], now: datetime
    ) -> bool:
        """Keep what an attempt in flight achieved so far (say, the parts of a long message
        already sent), so a later attempt, in any process, goes on from there. False if the
        record is no longer pending.
        """
        return await self._settle(channel, message_id, result=result, updated_at=now)

    async def mark_retry(
        self, channel: str, message_id: str, *, error: str, next_attempt_at: datetime, now: datetime
    ) -> bool:
        """Stay pending after a failed attempt; the next one is planned for `next_attempt_at`."""
        return await self._settle(
            channel,
            message_id,
            last_error=error,
            next_attempt_at=next_attempt_at,
            updated_at=now,
        )

    async def mark_failed(
        self, channel: str, message_id: str, *, error: str, now: datetime
    ) -> bool:
        """Pending -> failed (a permanent error or no attempts left): never retried."""
        return await self._settle(
            channel,
            message_id,
            state=DeliveryState.FAILED.value,
            last_error=error,
            next_attempt_at=None,
            updated_at=now,
        )

    async def retry(self, channel: str, message_id: str, *, now: datetime) -> Delivery:
        """Failed -> pending again, due now, its deadline counted from now (`retried_at`);
        its attempts count on. DeliveryNotFoundError: no such record; DeliveryNotFailedError:
        it is delivered or still pending (compare-and-set on the failed state, so two who ask
        at once re-send it once).
        """

        def op(conn: Connection) -> Delivery:
            result = conn.execute(
                deliveries.update()
                .where(_key(channel, message_id), deliveries.c.state == DeliveryState.FAILED.value)
                .values(
                    state=DeliveryState.PENDING.value,
                    next_attempt_at=now,
                    updated_at=now,
                    retried_at=now,
                )
            )
            row = _select(conn, channel, message_id)
            if row is None:
                raise DeliveryNotFoundError(channel, message_id)
            if not result.rowcount:
                raise DeliveryNotFailedError(channel, message_id, row._mapping["state"])
            return _delivery(row)

        return await self._db.write(op)

    async def _settle(self, channel: str, message_id: str, **values: Any) -> bool:
        def op(conn: Connection) -> bool:
            changes = dict(values)
            # Delivered: a file's bytes are not needed any more. A failed record keeps them, so
            # that a re-send (`retry`) carries the file; they go with the record's pruning.
            if values.get("state") == DeliveryState.DELIVERED.value:
                payload = conn.execute(
                    sa.select(deliveries.c.payload).where(_key(channel, message_id))
                ).scalar_one_or_none()
                stripped = without_bytes(payload) if isinstance(payload, dict) else None
                if stripped is not None:
                    changes["payload"] = stripped
            result = conn.execute(
                deliveries.update()
                .where(_key(channel, message_id), deliveries.c.state == DeliveryState.PENDING.value)
                .values(changes)
            )
            if result.rowcount:
                return True
            if _select(conn, channel, message_id) is None:
                raise DeliveryNotFoundError(channel, message_id)
            return False

        return await self._db.write(op)

    async def unanswered(
        self,
        channel: str,
        *,
        prefix: str,
        answer_prefix: str,
        since: datetime,
        limit: int = 200,
    ) -> list[Delivery]:
        """Records of `channel` created at or after `since` whose id starts with `prefix`,
        not failed, for which the channel has no record `answer_prefix` + the rest of the id:
        a follow-up nobody recorded (an approval request whose decision no process sent).
        Oldest first, at most `limit`.
        """
        d, answer = deliveries, deliveries.alias("answer")
        answer_id = sa.literal(answer_prefix, sa.Text).concat(
            sa.func.substr(d.c.message_id, len(prefix) + 1)
        )
        query = (
            sa.select(d)
            .where(
                d.c.channel == channel,
                d.c.message_id.startswith(prefix, autoescape=True),
                d.c.state != DeliveryState.FAILED.value,
                d.c.created_at >= sa.bindparam("since", since, type_=d.c.created_at.type),
                ~sa.exists().where(
                    answer.c.channel == d.c.channel, answer.c.message_id == answer_id
                ),
            )
            .order_by(d.c.created_at, d.c.message_id)
            .limit(limit)
        )
        return await self._db.read(lambda conn: [_delivery(r) for r in conn.execute(query)])

    async def stalled(
        self, channel: str, *, now: datetime, idle_for: timedelta, limit: int = 100
    ) -> list[Delivery]:
        """Pending records of `channel` nobody has touched for `idle_for`, and whose next
        attempt (if one is planned) was due that long ago: the process that recorded them
        stopped or died. Oldest first, at most `limit`.
        """
        d = deliveries
        before = now - idle_for
        query = (
            sa.select(d)
            .where(
                d.c.channel == channel,
                d.c.state == DeliveryState.PENDING.value,
                d.c.updated_at <= sa.bindparam("before", before, type_=d.c.updated_at.type),
                sa.or_(
                    d.c.next_attempt_at.is_(None),
                    d.c.next_attempt_at
                    <= sa.bindparam("due", before, type_=d.c.next_attempt_at.type),
                ),
            )
            .order_by(d.c.created_at, d.c.message_id)
            .limit(limit)
        )
        return await self._db.read(lambda conn: [_delivery(r) for r in conn.execute(query)])

    async def pending(self, channel: str, *, limit: int | None = None) -> list[Delivery]:
        """The channel's pending deliveries, oldest first (what a restart resumes)."""
        return await self.list_deliveries(channel=channel, state=DeliveryState.PENDING, limit=limit)

    async def list_deliveries(
        self,
        *,
        channel: str | None = None,
        state: DeliveryState | None = None,
        session_key: str | None = None,
        limit: int | None = None,
    ) -> list[Delivery]:
        query = sa.select(deliveries).order_by(deliveries.c.created_at, deliveries.c.message_id)
        if channel is not None:
            query = query.where(deliveries.c.channel == channel)
        if state is not None:
            query = query.where(deliveries.c.state == DeliveryState(state).value)
        if session_key is not None:
            query = query.where(deliveries.c.session_key == session_key)
        if limit is not None:
            query = query.limit(limit)
        return await self._db.read(lambda conn: [_delivery(r) for r in conn.execute(query)])

    async def page(
        self,
        *,
        session_key: str | None = None,
        state: DeliveryState | None = None,
        channel: str | None = None,
        limit: int = 50,
        before: DeliveryCursor | None = None,
    ) -> list[Delivery]:
        """Delivery records newest first (created_at, then channel and message id), at most
        `limit`, after the position `before` (the last record of the previous page): keyset
        pagination, served by the (session_key, created_at) and (created_at) indexes.
        """
        d = deliveries
        query = (
            sa.select(d)
            .order_by(d.c.created_at.desc(), d.c.channel.desc(), d.c.message_id.desc())
            .limit(limit)
        )
        if session_key is not None:
            query = query.where(d.c.session_key == session_key)
        if state is not None:
            query = query.where(d.c.state == DeliveryState(state).value)
        if channel is not None:
            query = query.where(d.c.channel == channel)
        if before is not None:
            at = sa.bindparam("before_at", before.created_at, type_=d.c.created_at.type)
            query = query.where(
                sa.or_(
                    d.c.created_at < at,
                    sa.and_(
                        d.c.created_at == at,
                        sa.tuple_(d.c.channel, d.c.message_id)
                        < sa.tuple_(sa.literal(before.channel), sa.literal(before.message_id)),
                    ),
                )
            )
        return await self._db.read(lambda conn: [_delivery(r) for r in conn.execute(query)])
