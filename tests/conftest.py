"""Shared fixtures: a fake clock, store backends for the contract tests, and AgentCron factories;
the `postgres` marker and its gate (without a server: skip, or fail when the run requires it);
the `long` marker (deselected unless AGENTCRON_LONG_TESTS=1).

The databases of `store_url` and `cron_url` start with agentcron's schema, copied from one that
agentcron created (from its migrations, on an empty database) once this session; a test marked
`fresh_db` gets an empty one instead, its first open creates the schema.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentcron.agent.runner import Trigger
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.store.sql import SqlStore, sqlite_url
from agentcron.testing import FakeClock
from tests.helpers.long import LONG_MARKER, long_tests_on, split_long
from tests.helpers.order import slow_files_first
from tests.helpers.postgres import (
    Verdict,
    pg_address,
    pg_admin_url,
    pg_answers,
    pg_required,
    postgres_verdict,
)
from tests.helpers.scratch_pg import Admin, Kind, ScratchDatabases

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)

# Every store contract test runs on each backend. PostgreSQL is used for real: a server on
# 127.0.0.1:5432 (trust auth, user postgres; override with AGENTCRON_TEST_PG).
BACKENDS = ["sqlite", "postgresql"]
PG_ADMIN_URL = pg_admin_url()

# The test being set up or run (pytest runs one at a time here): `_scratch_pg_database` checks
# that it carries the `postgres` marker, so a PostgreSQL test cannot miss the gate unnoticed.
_current_test: pytest.Item | None = None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `postgres` every test parametrized with the backend "postgresql" (`store_url`,
    `cron_backend` and the like); tests that make a PostgreSQL database otherwise say so
    themselves with `@pytest.mark.postgres`. Deselect the `long` tests unless
    AGENTCRON_LONG_TESTS=1 (a smaller instance of each of their properties runs by default).
    Put the files holding slow or browser tests first.
    """
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "postgresql" in callspec.params.values():
            item.add_marker(pytest.mark.postgres)
    is_long = [item.get_closest_marker(LONG_MARKER) is not None for item in items]
    kept, dropped = split_long(items, is_long, long_tests_on())
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    # Files of slow and browser tests first: the parallel run hands out whole files in this
    # order, and a long one handed out last would keep one worker busy alone at the end.
    items[:] = slow_files_first(
        kept,
        lambda item: str(item.path),
        lambda item: any(item.get_closest_marker(m) for m in ("slow", "e2e")),
    )


@functools.cache
def _postgres_gate() -> tuple[Verdict, str]:
    """Asked once per session, at the first PostgreSQL test (a run without one never asks)."""
    host, port = pg_address(PG_ADMIN_URL)
    return postgres_verdict(pg_answers(host, port), pg_required(), f"{host}:{port}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A `postgres` test without a server skips with one line, or fails when it is required."""
    global _current_test
    _current_test = item
    if item.get_closest_marker("postgres") is None:
        return
    verdict, reason = _postgres_gate()
    if verdict == "skip":
        pytest.skip(reason)
    if verdict == "fail":
        pytest.fail(reason, pytrace=False)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "agentcron.db"


def _with_schema(request: pytest.FixtureRequest) -> bool:
    """Whether the test's database (`store_url`, `cron_url`) starts as a copy of the schema
    agentcron made once this session, not empty: unless the test is marked `fresh_db`.
    """
    return request.node.get_closest_marker("fresh_db") is None


async def _migrate(url: str) -> None:
    """Give the empty database at `url` agentcron's schema, as every start does."""
    store = SqlStore(url)
    await store.open()
    await store.close()


@pytest.fixture(scope="session")
def sqlite_schema(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file agentcron created (schema at head, no rows), copied into tests' db_path:
    creating the schema from the migrations took a large share of a test's set-up.
    """
    path = tmp_path_factory.mktemp("schema") / "agentcron.db"
    with ThreadPoolExecutor(1) as pool:  # its own event loop, away from the tests' loops
        pool.submit(asyncio.run, _migrate(sqlite_url(path))).result()
    return path


def _sqlite_database(request: pytest.FixtureRequest, path: Path) -> str:
    if _with_schema(request):
        shutil.copyfile(request.getfixturevalue("sqlite_schema"), path)
    return sqlite_url(path)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, db_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield _sqlite_database(request, db_path)
        return
    yield from _scratch_pg_database("migrated" if _with_schema(request) else "fresh")


def _scratch_pg_database(kind: Kind = "fresh") -> Iterator[str]:
    """A PostgreSQL database for one test, dropped afterwards: empty, or (`migrated`) a copy of
    the schema agentcron made once this session.
    """
    if _current_test is not None and _current_test.get_closest_marker("postgres") is None:
        pytest.fail(
            f"{_current_test.nodeid} makes a PostgreSQL database but is not marked "
            "@pytest.mark.postgres (without a server it would fail instead of skipping)",
            pytrace=False,
        )

    try:
        name = _SCRATCH.take(kind)
    except RuntimeError as exc:
        pytest.fail(f"PostgreSQL tests need a server at {PG_ADMIN_URL}: {exc}")
    try:
        yield _pg_url(name)
    finally:
        _SCRATCH.give_back(name)


def _pg_url(name: str) -> str:
    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


def _admin() -> Admin:
    import psycopg

    return psycopg.connect(PG_ADMIN_URL, autocommit=True)


# Made ahead and dropped behind in a thread (tests/helpers/scratch_pg.py); started at the first
# PostgreSQL test, closed at the end of the session. The `migrated` ones copy a template that
# agentcron gave its schema (in that thread: asyncio.run has it to itself).
_SCRATCH = ScratchDatabases(
    _admin, prepare=lambda name: asyncio.run(_migrate(_pg_url(name))), ahead=4
)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Drop the scratch databases still there; a drop that failed fails the run, said why."""
    failed = _SCRATCH.close()
    if failed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("scratch PostgreSQL databases left behind:\n" + "\n".join(failed))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[SqlStore]:
    s = SqlStore(store_url)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


class Recorder:
    """A runner that records every trigger and answers with a scripted result."""

    def __init__(self) -> None:
        self.triggers: list[Trigger] = []
        self.result: Callable[[Trigger], Awaitable[str | None]] | None = None

    async def __call__(self, trigger: Trigger) -> str | None:
        self.triggers.append(trigger)
        if self.result is not None:
            return await self.result(trigger)
        return f"done: {trigger.job_name}"

    def names(self) -> list[str]:
        return [t.job_name for t in self.triggers]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


CronFactory = Callable[..., Awaitable[AgentCron]]


@pytest.fixture
def cron_backend() -> str:
    """The backend `make_cron` uses: SQLite, unless a module overrides this fixture (the
    session-turn scenarios override it with `params=BACKENDS` to run on both).
    """
    return "sqlite"


@pytest.fixture
def cron_url(request: pytest.FixtureRequest, cron_backend: str, db_path: Path) -> Iterator[str]:
    """One database for the whole test (restarts reopen the same one), with agentcron's schema
    (empty for a test marked `fresh_db`).
    """
    if cron_backend == "sqlite":
        yield _sqlite_database(request, db_path)
        return
    yield from _scratch_pg_database("migrated" if _with_schema(request) else "fresh")


@pytest.fixture
async def make_cron(
    cron_url: str, clock: FakeClock, recorder: Recorder
) -> AsyncIterator[CronFactory]:
    """Start AgentCron instances on the test DB and fake clock; all are closed at the end."""
    started: list[AgentCron] = []

    async def factory(*, start: bool = True, **kw: object) -> AgentCron:
        """`start=False`: not started (open `cron.store` and start `cron.engine` yourself)."""
        kw.setdefault("runner", recorder)
        kw.setdefault("clock", clock)
        kw.setdefault("settings", EngineSettings())
        cron = AgentCron(url=cron_url, **kw)  # type: ignore[arg-type]
        started.append(cron)
        if start:
            await cron.start()
        return cron

    yield factory
    for cron in reversed(started):
        await cron.close(grace=1.0)
