"""Scratch PostgreSQL databases for the tests, made ahead and dropped behind in one thread.

Each test still gets a database of its own (dropped WITH (FORCE) after it), but waits for
neither statement: they were most of a PostgreSQL test's set-up and tear-down. Two kinds:
`fresh` (CREATE DATABASE from template1: empty) and `migrated` (a copy of a template database
that `prepare` gave agentcron's schema once, the first time one is asked for). The thread keeps
`ahead` databases ready of each kind asked for so far; a test that finds none waits for the
next one (made first, before any pending drop). `close()` drops what is left, the template too.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter, deque
from collections.abc import Callable
from typing import Literal, Protocol

PREFIX = "agentcron_test_"
TAKE_TIMEOUT_S = 60.0

Kind = Literal["fresh", "migrated"]
KINDS: tuple[Kind, ...] = ("fresh", "migrated")


class Admin(Protocol):
    """An autocommit connection to the server's maintenance database (psycopg's)."""

    def execute(self, query: str) -> object: ...

    def close(self) -> None: ...


def _new_name() -> str:
    return f"{PREFIX}{uuid.uuid4().hex[:12]}"


class ScratchDatabases:
    """Databases made ahead and dropped behind by one thread (started at the first take)."""

    def __init__(
        self,
        connect: Callable[[], Admin],
        prepare: Callable[[str], None] | None = None,
        ahead: int = 2,
    ) -> None:
        self._connect = connect
        self._prepare = prepare  # gives the template database (by name) the schema
        self._ahead = ahead
        self._cond = threading.Condition()
        self._ready: dict[Kind, deque[str]] = {kind: deque() for kind in KINDS}
        self._asked: set[Kind] = set()
        self._waiting: Counter[Kind] = Counter()
        self._doomed: deque[str] = deque()
        self._template: str | None = None
        self._closing = False
        self._error: BaseException | None = None
        self._failed_drops: list[str] = []
        self._thread: threading.Thread | None = None

    def take(self, kind: Kind = "fresh", timeout: float = TAKE_TIMEOUT_S) -> str:
        """The name of a database of `kind`, now the caller's; RuntimeError if none can be made."""
        if kind == "migrated" and self._prepare is None:
            raise ValueError("no `prepare`: only fresh databases")
        ready = self._ready[kind]
        with self._cond:
            if self._closing:
                raise RuntimeError("the scratch databases are closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="scratch-pg", daemon=True)
                self._thread.start()
            self._asked.add(kind)
            self._waiting[kind] += 1
            self._cond.notify_all()
            try:
                ok = self._cond.wait_for(lambda: ready or self._error, timeout)
            finally:
                self._waiting[kind] -= 1
            if ready:
                name = ready.popleft()
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
        """Drop every database still ready or pending and the template, stop the thread; the
        failures, as lines.
        """
        with self._cond:
            self._closing = True
            for ready in self._ready.values():
                self._doomed.extend(ready)
                ready.clear()
            if self._template is not None:
                self._doomed.append(self._template)
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                self._failed_drops.append(f"the drops did not end within {timeout}s")
        return self._failed_drops

    def _next(self) -> tuple[str, Kind | None, str] | None:
        """The next job (what, kind, database), or None to stop; holds the lock."""
        while True:
            if self._error is None and not self._closing:
                # a test waiting comes first; then drops; then databases made ahead
                for kind in KINDS:
                    if self._waiting[kind] and not self._ready[kind]:
                        return "create", kind, _new_name()
            if self._doomed:
                return "drop", None, self._doomed.popleft()
            if self._error is None and not self._closing:
                for kind in KINDS:
                    if kind in self._asked and len(self._ready[kind]) < self._ahead:
                        return "create", kind, _new_name()
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
                what, kind, name = job
                try:
                    if admin is None:
                        admin = self._connect()
                    if what == "drop":
                        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                        continue
                    if kind == "fresh":
                        admin.execute(f'CREATE DATABASE "{name}"')
                    else:
                        admin.execute(
                            f'CREATE DATABASE "{name}" TEMPLATE "{self._made_template(admin)}"'
                        )
                except Exception as exc:
                    if admin is not None:
                        admin.close()
                        admin = None  # a new connection for the next statement
                    self._failed(what, name, exc)
                    continue
                with self._cond:  # made while closing: dropped with the rest
                    (self._doomed if self._closing else self._ready[kind or "fresh"]).append(name)
                    self._cond.notify_all()
        finally:
            if admin is not None:
                admin.close()

    def _made_template(self, admin: Admin) -> str:
        """The template database of the `migrated` kind, made and prepared the first time."""
        if self._template is None:
            if self._prepare is None:  # (take() refuses the kind without it)
                raise ValueError("no `prepare`")
            name = _new_name()
            admin.execute(f'CREATE DATABASE "{name}"')
            with self._cond:
                self._template = name  # dropped at close, prepared or not
            self._prepare(name)
        return self._template

    def _failed(self, what: str, name: str, exc: Exception) -> None:
        with self._cond:
            if what == "create":
                self._error = exc
            else:
                self._failed_drops.append(f"DROP DATABASE {name}: {exc}")
            self._cond.notify_all()
