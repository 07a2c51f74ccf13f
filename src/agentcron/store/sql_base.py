"""The base of the SQL store: the database, its lifecycle and the statements every part shares."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from agentcron.store.approval_store import ApprovalStore
from agentcron.store.database import Database
from agentcron.store.delivery_store import DeliveryStore
from agentcron.store.grant_store import GrantStore
from agentcron.store.migrate import current_revision, upgrade_connection
from agentcron.store.schema import jobs, runs, sessions
from agentcron.store.session_store import SessionStore
from agentcron.store.signals import SignalHub

log = logging.getLogger(__name__)


class SqlBase:
    """The database, the sessions and deliveries stores, the shared insert statements and the
    lifecycle: what every part of `SqlStore` builds on.

    SQLite: one writer connection (every write transaction is `BEGIN IMMEDIATE`, so writers
    queue in-process instead of failing with "database is locked"), WAL, a busy timeout for
    other processes, and a small pool of readers.
    """

    def __init__(self, url: str, *, busy_timeout_ms: int = 10_000) -> None:
        self._db = Database(url, busy_timeout_ms=busy_timeout_ms)
        self.url = str(self._db.url)
        self.dialect = self._db.dialect
        self.skip_locked = self.dialect == "postgresql"
        self._insert_runs = self._insert(runs).on_conflict_do_nothing().returning(runs.c.id)
        # The same without RETURNING, for the claim's batch (`bulk.executemany`: its count
        # says whether every run landed; RETURNING would take Core's per-row path).
        self._insert_claimed_runs = self._insert(runs).on_conflict_do_nothing()
        self._insert_sessions = self._insert(sessions).on_conflict_do_nothing()
        self._insert_jobs = self._insert(jobs).on_conflict_do_nothing()
        self.sessions = SessionStore(self._db)
        self.deliveries = DeliveryStore(self._db)
        self.approvals = ApprovalStore(self._db)
        self.grants = GrantStore(self._db)
        # Other processes' changes, heard (started and stopped by the owner of the process).
        self.signals = SignalHub(
            self._db.url, origin=self._db.origin, data_version=self._db.data_version
        )

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, then create or upgrade the schema (Alembic)."""
        if self._db.is_open:
            return
        self._db.open()
        await self._db.write(upgrade_connection)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._db.close)

    async def schema_revision(self) -> str | None:
        """The Alembic revision the database is at."""
        return await self._db.read(current_revision)

    def _insert(self, table: sa.Table) -> Any:
        return (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(table)
