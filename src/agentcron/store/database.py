"""Connections and transactions: each transaction runs whole on a database thread (one hop)."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import stat
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from ulid import ULID

from agentcron.errors import AgentcronError
from agentcron.store.errors import StoreUnavailableError
from agentcron.store.signals import drop_announced, send_announced

T = TypeVar("T")
log = logging.getLogger(__name__)

# PostgreSQL connections fail in seconds, not minutes, when the network does: a connect
# timeout, TCP keepalive on idle connections and a bound on unacknowledged data. A client
# cut off mid-transaction must not hold its row locks for long either.
PG_CONNECT_ARGS: dict[str, Any] = {
    "connect_timeout": 5,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 15_000,  # ms
    "options": "-c idle_in_transaction_session_timeout=60000",
}
LOCK_WAIT_S = 60.0  # how long a write waits out a SQLite lock held by another process
_LOCK_RETRY_S = (0.05, 1.0)  # first and longest pause between tries
_DOUBT_RETRY_S = (0.1, 5.0)

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

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_ms: int = 10_000,
        readers: int = 2,
        lock_wait_s: float = LOCK_WAIT_S,
    ) -> None:
        self.url = sync_url(url)
        self.lock_wait_s = lock_wait_s
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
            # One connection per database thread (the writer and each reader) stays open:
            # a smaller pool made a busy reader open and close a connection per query.
            # The readers' connections are pinged when taken (a reader's failure is its
            # caller's error). The writer's is not: a ping is one more round trip per
            # transaction, and a write on a connection that died meanwhile fails as an
            # outage before anything is committed (the connection is dropped, the write is
            # tried again on a new one: the journal, the engine's tick).
            self._write_engine = sa.create_engine(
                self.url,
                pool_size=1,
                max_overflow=1,
                connect_args=dict(PG_CONNECT_ARGS),
            )
            self._read_engine = sa.create_engine(
                self.url,
                pool_size=self._readers,
                max_overflow=2,
                pool_pre_ping=True,
                connect_args=dict(PG_CONNECT_ARGS),
            )
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
        """Run `op` inside one write transaction (committed when it returns).

        A SQLite lock held by another process past the busy timeout is waited out for up to
        `lock_wait_s`; a connection fault raises `StoreUnavailableError` (nothing committed);
        a PostgreSQL commit whose answer was lost is settled by asking the server whether the
        transaction committed (see `_settle`), so a caller never re-applies a committed write.
        """
        engine, _, pool, _ = self._require()
        loop = asyncio.get_running_loop()
        give_up = time.monotonic() + self.lock_wait_s
        pause = _LOCK_RETRY_S[0]
        while True:
            try:
                return await loop.run_in_executor(pool, _transaction, engine, op, self.origin)
            except _InDoubt as doubt:
                return await self._settle(doubt.xid, doubt.result, doubt.__cause__)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                if not _is_locked(exc):
                    raise StoreUnavailableError(reason=first_line(exc)) from exc
                if time.monotonic() + pause > give_up:
                    raise StoreUnavailableError(
                        f"the database stayed locked by another process for "
                        f"{self.lock_wait_s:g} s; try again",
                        reason=first_line(exc),
                    ) from exc
            await asyncio.sleep(pause)  # another process holds the write lock: wait it out
            pause = min(pause * 2, _LOCK_RETRY_S[1])

    async def _settle(self, xid: str, result: T, cause: BaseException | None) -> T:
        """The COMMIT of transaction `xid` was sent but its answer was lost: it may have
        committed. Ask the server (`pg_xact_status`) until it can say: committed -> the
        write's result stands; aborted -> `StoreUnavailableError` (nothing was written, safe to
        try again). Waits while the server cannot be reached.
        """
        log.warning(
            "a commit's answer was lost (%s); asking the database whether it landed",
            first_line(cause),
        )
        pause = _DOUBT_RETRY_S[0]
        while True:
            try:
                status = await self.read(
                    lambda conn: conn.execute(
                        sa.text("SELECT pg_xact_status(CAST(:xid AS xid8))"), {"xid": xid}
                    ).scalar()
                )
            except StoreUnavailableError:
                status = None
            if status == "committed":
                return result
            if status == "aborted":
                raise StoreUnavailableError(reason=first_line(cause)) from cause
            # in progress (the server has not seen the cut yet) or unreachable: look again
            await asyncio.sleep(pause)
            pause = min(pause * 2, _DOUBT_RETRY_S[1])

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

        try:
            return await asyncio.get_running_loop().run_in_executor(pool, run)
        except Exception as exc:
            if is_transient(exc):
                raise StoreUnavailableError(reason=first_line(exc)) from exc
            raise


class _InDoubt(AgentcronError):  # an internal signal: it never leaves this module
    """A PostgreSQL COMMIT failed on the connection: the transaction may have committed."""

    def __init__(self, xid: str, result: Any) -> None:
        super().__init__(xid)
        self.xid, self.result = xid, result


_XID = sa.text("SELECT pg_current_xact_id_if_assigned()::text")


def _transaction(engine: Engine, op: Callable[[Connection], T], origin: str) -> T:
    """One write transaction on the writer thread. On PostgreSQL the transaction's id is read
    before COMMIT (one short statement; NULL when it wrote nothing), so that a COMMIT whose
    answer is lost can be settled instead of guessed.
    """
    with engine.connect() as conn:
        tx = conn.begin()
        try:
            result = op(conn)
            # Changes the op announced go out with its commit (PostgreSQL).
            send_announced(conn, origin)
            xid = conn.execute(_XID).scalar() if conn.dialect.name == "postgresql" else None
        except BaseException:
            tx.rollback()
            raise
        finally:
            drop_announced(conn)
        try:
            tx.commit()
        except Exception as exc:
            if xid is not None and is_transient(exc):
                raise _InDoubt(str(xid), result) from exc
            raise
        return result


_LOCKED = ("database is locked", "database is busy", "database table is locked")


def _is_locked(exc: BaseException) -> bool:
    """SQLite's answer when another connection holds the lock past the busy timeout."""
    orig = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    return isinstance(orig, sqlite3.OperationalError) and any(m in str(orig) for m in _LOCKED)


def is_transient(exc: BaseException) -> bool:
    """A fault of the connection, not of the request: the database is unreachable or the
    connection was lost (nothing committed), or SQLite is locked by another process. Trying
    the same transaction again later is safe. A refusal (a constraint, a bad statement) is not.
    """
    if isinstance(exc, StoreUnavailableError | sa.exc.TimeoutError | sa.exc.DisconnectionError):
        return True
    if isinstance(exc, sa.exc.DBAPIError):
        if exc.connection_invalidated or _is_locked(exc):
            return True
        if isinstance(exc.orig, sqlite3.Error):
            return False  # any other SQLite error is a real one (no such table, corrupt, ...)
        return isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError)
    return _is_locked(exc)


def first_line(exc: BaseException | None) -> str:
    """An error in one log line: the driver's first line, without SQLAlchemy's background."""
    if exc is None:
        return "unknown"
    orig = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    text = str(orig).strip()
    return f"{type(orig).__name__}: {text.splitlines()[0] if text else ''}"
