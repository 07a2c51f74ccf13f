"""Owner liveness: one heartbeat row per process that takes leases, and the live work it holds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from agentcron.domain.runs import Run
from agentcron.store.schema import owners
from agentcron.store.sql_base import SqlBase


@dataclass(frozen=True, slots=True)
class OwnerRecord:
    """One process that takes leases, as its heartbeat row says."""

    owner: str  # host:pid:ulid, as in every lease
    host: str
    pid: int
    role: str  # engine | relay
    started_at: datetime
    heartbeat_at: datetime


@dataclass(frozen=True, slots=True)
class LiveWork:
    """What a process has a task for right now: the only runs and session leases its
    heartbeat renews; any other open run, turn or lease of its own is an orphan to settle.
    """

    runs: frozenset[str] = frozenset()
    turns: frozenset[str] = frozenset()
    sessions: frozenset[str] = frozenset()

    def __or__(self, other: LiveWork) -> LiveWork:
        return LiveWork(
            self.runs | other.runs, self.turns | other.turns, self.sessions | other.sessions
        )


@dataclass(frozen=True, slots=True)
class OrphanSettlement:
    """What `settle_orphans` did with a process's own work that no task of it holds."""

    released: int  # never-started runs handed back (owner NULL) for `adopt_released`
    interrupted: list[Run]  # runs that had started: interrupted, never re-run
    disowned: int  # open turns handed back (owner NULL) for `recover_turns` to settle
    freed: int  # session turn leases let go
    suspects: frozenset[str]  # waiting turns seen without a task: settled if still so next time


def owner_host_pid(owner: str) -> tuple[str, int]:
    """The host and pid an owner string names (`host:pid:ulid`); pid 0 when it names none."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3:
        return owner, 0
    host, pid, _ = parts
    return host, int(pid) if pid.isdigit() else 0


def _record(row: Row[Any]) -> OwnerRecord:
    return OwnerRecord(row.owner, row.host, row.pid, row.role, row.started_at, row.heartbeat_at)


class OwnersMixin(SqlBase):
    """The `OwnerRegistry` of `SqlStore`: register, heartbeat, unregister, and who is dead."""

    async def register_owner(self, owner: str, role: str, now: datetime) -> None:
        """Record `owner` as alive at `now` (a row already there is taken over and renewed)."""
        host, pid = owner_host_pid(owner)
        values = {
            "owner": owner,
            "host": host,
            "pid": pid,
            "role": role,
            "started_at": now,
            "heartbeat_at": now,
        }
        stmt = (
            self._insert(owners)
            .values(values)
            .on_conflict_do_update(index_elements=["owner"], set_={"heartbeat_at": now})
        )
        await self._db.write(lambda conn: conn.execute(stmt))

    async def heartbeat_owner(self, owner: str, now: datetime) -> bool:
        """Say `owner` is alive at `now` (one UPDATE); False when its row is gone."""
        stmt = owners.update().where(owners.c.owner == owner).values(heartbeat_at=now)
        return await self._db.write(lambda conn: bool(conn.execute(stmt).rowcount))

    async def unregister_owner(self, owner: str) -> bool:
        """Delete `owner`'s row; False when there was none."""
        stmt = owners.delete().where(owners.c.owner == owner)
        return await self._db.write(lambda conn: bool(conn.execute(stmt).rowcount))

    async def dead_owners(
        self, before: datetime, *, exclude: str | None = None
    ) -> list[OwnerRecord]:
        """The owners whose last heartbeat is older than `before` (one read on the heartbeat
        index), oldest first.
        """

        def op(conn: Connection) -> list[OwnerRecord]:
            query = sa.select(owners).where(owners.c.heartbeat_at < before)
            if exclude is not None:
                query = query.where(owners.c.owner != exclude)
            query = query.order_by(owners.c.heartbeat_at, owners.c.owner)
            return [_record(r) for r in conn.execute(query)]

        return await self._db.read(op)
