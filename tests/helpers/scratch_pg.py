"""Scratch PostgreSQL databases for the tests, made ahead and dropped behind in one thread.

Each test still gets a fresh database of its own (CREATE DATABASE from template1, dropped WITH
(FORCE) after it), but a test waits for neither statement: they were most of a PostgreSQL
test's set-up and tear-down. The thread keeps `ahead` databases ready; a test that finds none
waits for the next one (made first, before any pending drop). `close()` drops what is left.
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from collections.abc import Callable
from typing import Protocol

PREFIX = "agentcron_test_"
TAKE_TIMEOUT_S = 60.0


class Admin(Protocol):
    """An autocommit connection to the server's maintenance database (psycopg's)."""

    def execute(self, query: str) -> object: ...

    def close(self) -> None: ...


class ScratchDatabases:
    """Fresh databases made ahead and dropped behind by one thread (started at the first take)."""

    def __init__(self, connect: Callable[[], Admin], ahead: int = 2) -> None:
        self._connect = connect
        self._ahead = ahead
        self._cond = threading.Condition()
        self._ready: deque[str] = deque()
        self._doomed: deque[str] = deque()
        self._waiting = 0
        self._closing = False
        self._error: BaseException | None = None
        self._failed_drops: list[str] = []
        self._thread: threading.Thread | None = None

    def take(self, timeout: float = TAKE_TIMEOUT_S) -> str:
        """The name of a fresh database, now the caller's; RuntimeError if none can be made."""
        with self._cond:
            if self._closing:
                raise RuntimeError("the scratch databases are closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="scratch-pg", daemon=True)
                self._thread.start()
            self._waiting += 1
            self._cond.notify_all()
            try:
                ok = self._cond.wait_for(lambda: self._ready or self._error, timeout)
            finally:
                self._waiting -= 1
            if self._ready:
                name = self._ready.popleft()
                self._cond.notify_all()  # make the next one
                return name
            if not ok:
                raise RuntimeError(f"no scratch database made within {timeout}s")
            raise RuntimeError(f"could not make a scratch database: {self._error}")

    def give_back(self, name: str) -> None:
        """Drop `name` (WITH FORCE), behind the caller's back."""
        with self._cond:
            self._doomed.append(name)
            self._cond.notify_all()

    def close(self, timeout: float = TAKE_TIMEOUT_S) -> list[str]:
        """Drop every database still ready or pending, stop the thread; the failures, as lines."""
        with self._cond:
            self._closing = True
            self._doomed.extend(self._ready)
            self._ready.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                self._failed_drops.append(f"the drops did not end within {timeout}s")
        return self._failed_drops

    def _next(self) -> tuple[str, str] | None:
        """The next statement (what, database) to run, or None to stop; holds the lock."""
        while True:
            short = not self._closing and len(self._ready) < self._ahead
            wanted = self._waiting > 0 and not self._ready
            # a test waiting comes first; otherwise drops go before making more ahead
            if self._error is None and (wanted or (short and not self._doomed)):
                return "create", f"{PREFIX}{uuid.uuid4().hex[:12]}"
            if self._doomed:
                return "drop", self._doomed.popleft()
            if self._closing:
                return None
            self._cond.wait()

    def _work(self) -> None:
        admin: Admin | None = None
        try:
            while True:
                with self._cond:
                    job = self._next()
                if job is None:
                    return
                what, name = job
                if admin is None:
                    try:
                        admin = self._connect()
                    except Exception as exc:
                        self._failed(what, name, exc)
                        continue
                try:
                    if what == "create":
                        admin.execute(f'CREATE DATABASE "{name}"')
                    else:
                        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                except Exception as exc:
                    admin.close()
                    admin = None  # a new connection for the next statement
                    self._failed(what, name, exc)
                    continue
                if what == "create":
                    with self._cond:  # made while closing: dropped with the rest
                        (self._doomed if self._closing else self._ready).append(name)
                        self._cond.notify_all()
        finally:
            if admin is not None:
                admin.close()

    def _failed(self, what: str, name: str, exc: Exception) -> None:
        with self._cond:
            if what == "create":
                self._error = exc
            else:
                self._failed_drops.append(f"DROP DATABASE {name}: {exc}")
            self._cond.notify_all()
