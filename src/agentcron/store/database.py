"""Connections and transactions: each transaction runs whole on a database thread (one hop)."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from ulid import ULID

from agentcron.store.signals import drop_announced, send_announced

T = TypeVar("T")

# SQLAlchemy's asyncio adapters hop to a driver thread for every statement, fetch and commit
# (~0.2 ms each here, a claim took ~6 ms); running the whole transaction as plain synchronous
# Core code on a database thread costs one hop per transaction. Measured in bench/.


def sync_url(url: str) -> sa.URL:
    """The synchronous driver URL for `url` (`sqlite+aiosqlite` -> `sqlite`)."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return parsed.set(drivername="sqlite")
    if parsed.get_backend_name() == "postgresql":
        return parsed.set(drivername="postgresql+psycopg")
    return parsed


def owner_only_file(path: Path) -> None:
    """Create the SQLite file (and a missing directory, 0700) readable by its owner only
    (0600) before SQLite opens it: its -wal and -shm files take the same mode. An existing
    database readable by others is tightened too (it holds every conversation).
    """
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            mode = stat.S_IMODE(name.stat().st_mode)
            if mode & 0o077:
                name.chmod(mode & 0o700)
        except OSError:  # absent, or not ours to change
            continue


class Database:
    """One writer thread (writes never contend in-process) and a few reader threads."""

    def __init__(self, url: str, *, busy_timeout_ms: int = 10_000, readers: int = 2) -> None:
        self.url = sync_url(url)
        self.dialect = self.url.get_backend_name()
        self._busy_timeout_ms = busy_timeout_ms
        self._readers = readers
        self._write_engine: Engine | None = None
        self._read_engine: Engine | None = None
        self._write_pool: ThreadPoolExecutor | None = None
        self._read_pool: ThreadPoolExecutor | None = None
        # This process's name in the change notices it sends (it ignores its own).
        self.origin = str(ULID())

    def open(self) -> None:
        if self._write_engine is not None:
            return
        if self.dialect == "sqlite":
            path = self.url.database
            if not path or path == ":memory:":
                raise ValueError("the SQLite store needs a file path, not an in-memory database")
            owner_only_file(Path(path).expanduser())
            self._write_engine = self._sqlite_engine(pool_size=1, begin="BEGIN IMMEDIATE")
            # Readers run each statement in autocommit: a WAL snapshot per statement, with
            # no BEGIN / ROLLBACK round trips.
            self._read_engine = self._sqlite_engine(pool_size=self._readers, begin=None)
        else:
            self._write_engine = sa.create_engine(self.url, pool_size=2, pool_pre_ping=True)
            self._read_engine = self._write_engine
        self._write_pool = ThreadPoolExecutor(1, thread_name_prefix="agentcron-db-write")
        self._read_pool = ThreadPoolExecutor(self._readers, thread_name_prefix="agentcron-db-read")

    def _sqlite_engine(self, *, pool_size: int, begin: str | None) -> Engine:
        engine = sa.create_engine(
            self.url,
            pool_size=pool_size,
            max_overflow=0,
            pool_timeout=60,
            pool_reset_on_return="rollback" if begin else None,
            connect_args={"check_same_thread": False},
        )
        busy = self._busy_timeout_ms

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Take transaction control from the driver so that we choose the BEGIN kind.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout = {busy}")
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.execute("PRAGMA foreign_keys = ON")
            cur.close()

        if begin is not None:

            @event.listens_for(engine, "begin")
            def _on_begin(conn: Any) -> None:
                conn.exec_driver_sql(begin)

        return engine

    def close(self) -> None:
        for pool in (self._write_pool, self._read_pool):
            if pool is not None:
                pool.shutdown(wait=True)
        for engine in {id(e): e for e in (self._write_engine, self._read_engine) if e}.values():
            engine.dispose()
        self._write_engine = self._read_engine = None
        self._write_pool = self._read_pool = None

    @property
    def is_open(self) -> bool:
        return self._write_engine is not None

    def _require(self) -> tuple[Engine, Engine, ThreadPoolExecutor, ThreadPoolExecutor]:
        if (
            self._write_engine is None
            or self._read_engine is None
            or self._write_pool is None
            or self._read_pool is None
        ):
            raise RuntimeError("store is not open")
        return self._write_engine, self._read_engine, self._write_pool, self._read_pool

    async def write(self, op: Callable[[Connection], T]) -> T:
        """Run `op` inside one write transaction (committed when it returns)."""
        engine, _, pool, _ = self._require()

        def run() -> T:
            with engine.begin() as conn:
                try:
                    result = op(conn)
                    # Changes the op announced go out with its commit (PostgreSQL).
                    send_announced(conn, self.origin)
                finally:
                    drop_announced(conn)
                return result

        return await asyncio.get_running_loop().run_in_executor(pool, run)

    async def data_version(self) -> int | None:
        """SQLite's change counter as the writer connection sees it: it moves when another
        process commits (this process's own writes go through that connection). None on
        PostgreSQL (its changes are announced).
        """
        if self.dialect != "sqlite":
            return None
        engine, _, pool, _ = self._require()

        def run() -> int:
            raw = engine.raw_connection()
            try:
                cur = raw.cursor()
                cur.execute("PRAGMA data_version")
                row = cur.fetchone()
                cur.close()
                return int(row[0]) if row else 0
            finally:
                raw.close()

        return await asyncio.get_running_loop().run_in_executor(pool, run)

    async def read(self, op: Callable[[Connection], T]) -> T:
        """Run `op` on a reader connection."""
        _, engine, _, pool = self._require()

        def run() -> T:
            with engine.connect() as conn:
                return op(conn)

        return await asyncio.get_running_loop().run_in_executor(pool, run)
