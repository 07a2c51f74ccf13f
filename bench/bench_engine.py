"""Engine benchmarks for agentcron (SQLite, PostgreSQL, HTTP) with a no-op runner; prints a
metric / measured / target / result table for whatever agentcron is first on the import path.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import resource
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine as SaEngine

import agentcron
from agentcron.agent.runner import Outcome, SessionInfo, Trigger, TurnInput
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.jobs import Job, NewJob
from agentcron.domain.states import RunState
from agentcron.engine.policies import finish_job
from agentcron.runtime.clock import SystemClock
from agentcron.schedule import AtSpec
from agentcron.store.ids import new_id
from agentcron.store.schema import jobs as jobs_table
from agentcron.store.schema import messages
from agentcron.store.schema import runs as runs_table
from agentcron.store.schema import sessions as sessions_table
from agentcron.store.schema import turns as turns_table
from agentcron.store.sql import SqlStore, sqlite_url
from agentcron.store.writes import ArmedJob, InsertJobs, JobFinish, JobOutcome
from agentcron.testing import FakeClock, wait_settled

BENCHES = (
    "create",
    "burst",
    "lateness",
    "bound",
    "txn",
    "history",
    "http",
    "pg",
    "idle",
    "million",
    "herd",
)
ALIASES = {"turns": "bound"}  # the old name of the bound-fire rows
# A fixed fake "now" keeps the burst runs independent of the wall clock.
FAKE_T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
TERMINAL = [s for s in RunState if s.terminal]
# The workloads store more jobs than the 500 a server allows by default.
UNLIMITED = EngineSettings(max_jobs=None)
DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/agentcron_bench"
PG_ENV = "AGENTCRON_BENCH_PG_URL"
RESULTS_DIR = Path(__file__).resolve().parent / "results"
# A waiting burst counts terminal runs every POLL_S at first, then every 1/200 of the time
# waited so far (at most POLL_MAX_S): the end is known to 0.5 %, and the counting query does
# not load a long burst (every 5 ms it cost the PostgreSQL burst ~20 % of its rate).
POLL_S, POLL_MAX_S = 0.005, 0.1


@dataclass(frozen=True)
class Sizes:
    create: int  # jobs created (bulk and one by one)
    create_batch: int
    burst: int  # unbound fires due at once (FakeClock)
    first: int  # fires due at once on the real clock: time to the first runner call
    first_sessions: int
    lateness: int  # fires spread over lateness_span_s (real clock)
    lateness_lead_s: float
    lateness_span_s: float
    lateness_sessions: int  # sessions the bound lateness fires are spread over
    bound: int  # bound fires due at once (FakeClock), SQLite and PostgreSQL
    bound_sessions: int
    txn: int  # bound fires due at once while transactions and statements are counted
    txn_sessions: int
    history_sessions: int
    history_messages: int  # transcript entries stored in each session beforehand
    history_fires: int
    http_jobs: int
    http_clients: int
    idle_jobs: int
    idle_s: float
    million: int
    herd: int  # bound fires due at one instant in the herd (a fresh process runs it)
    herd_sessions: int
    herd_limit_s: float  # the herd waits at most this long after its instant
    limit_s: float  # a burst waits at most this long for its fires to end
    history_limit_s: float  # the same for the burst on the sessions with history


FULL = Sizes(
    create=10_000,
    create_batch=1_000,
    burst=10_000,
    first=1_000,
    first_sessions=100,
    lateness=1_000,
    lateness_lead_s=2.0,
    lateness_span_s=10.0,
    lateness_sessions=100,
    bound=10_000,
    bound_sessions=1_000,
    txn=2_000,
    txn_sessions=200,
    history_sessions=20,
    history_messages=10_000,
    history_fires=1_000,
    http_jobs=2_000,
    http_clients=8,
    idle_jobs=100_000,
    idle_s=30.0,
    million=1_000_000,
    herd=100_000,
    herd_sessions=10_000,
    herd_limit_s=600.0,
    limit_s=90.0,
    history_limit_s=45.0,
)
QUICK = Sizes(
    create=1_000,
    create_batch=500,
    burst=1_000,
    first=200,
    first_sessions=20,
    lateness=100,
    lateness_lead_s=1.0,
    lateness_span_s=2.0,
    lateness_sessions=20,
    bound=500,
    bound_sessions=50,
    txn=300,
    txn_sessions=30,
    history_sessions=5,
    history_messages=1_000,
    history_fires=100,
    http_jobs=200,
    http_clients=8,
    idle_jobs=5_000,
    idle_s=2.0,
    million=20_000,
    herd=10_000,
    herd_sessions=1_000,
    herd_limit_s=120.0,
    limit_s=20.0,
    history_limit_s=10.0,
)


@dataclass(frozen=True)
class Row:
    metric: str
    measured: str
    target: str
    # None = informational (no target applies)
    passed: bool | None
    skipped: bool = False

    @property
    def result(self) -> str:
        if self.skipped:
            return "skip"
        return "info" if self.passed is None else ("PASS" if self.passed else "MISS")


@dataclass
class Ctx:
    """What every benchmark gets: a scratch directory, the sizes, the PostgreSQL URL."""

    tmp: Path
    sizes: Sizes
    pg_url: str
    pg_problem: str | None = None  # why PostgreSQL rows are skipped (None = usable)
    pg_checked: bool = False
    herd_profile: Path | None = None  # py-spy output for the herd's measuring process


def log(msg: str) -> None:
    # Progress goes to stderr so stdout holds only the table.
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


async def noop(trigger: Trigger) -> str:
    # Non-empty text makes the run `succeeded` (None would record `empty`).
    return "ok"


# -- the engine internals the benchmark touches (keep them here, and few) ---------------------


async def settle(cron: AgentCron, limit: float) -> None:
    """Wait until the engine is idle: asleep, nothing due, every state change recorded."""
    await wait_settled(cron.engine, limit=limit)


def wake(cron: AgentCron) -> None:
    """Make the engine read the schedule now (after a FakeClock moved)."""
    cron.engine.wake()


def engine_stats(cron: AgentCron) -> Counter[str]:
    """The engine's running counts (fires claimed, runs ended by state): the herd's progress
    without a query of its own.
    """
    return cron.engine.stats


# -- helpers ---------------------------------------------------------------------------------


def far_future() -> datetime:
    """An instant about a year ahead: jobs that exist but never come due during a benchmark."""
    return datetime.now(UTC).replace(microsecond=0) + timedelta(days=365)


def session_key(i: int, sessions: int) -> str:
    return f"api:s-{i % sessions}"


def at_jobs(instants: Sequence[datetime], prefix: str, *, sessions: int = 0) -> list[NewJob]:
    """One-shot jobs. Unbound ones (sessions=0) measure the engine (claim, isolated run,
    record); bound ones, spread over `sessions` sessions, are turns of their session as well.
    """
    return [
        NewJob(
            name=f"{prefix}-{i}",
            spec=AtSpec(at=at),
            message="bench",
            session_key=session_key(i, sessions) if sessions else None,
        )
        for i, at in enumerate(instants)
    ]


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an already sorted list."""
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


async def create_sessions(cron: AgentCron, sessions: int) -> None:
    for i in range(sessions):
        await cron.sessions.create(session_key(i, sessions))


async def create_jobs(cron: AgentCron, jobs: Sequence[NewJob], batch: int = 1_000) -> None:
    for i in range(0, len(jobs), batch):
        await cron.jobs.create_many(jobs[i : i + batch])


async def count_terminal(cron: AgentCron) -> int:
    return await cron.store.count_runs(states=TERMINAL)


async def wait_terminal(cron: AgentCron, n: int, limit: float, *, coarse: bool = False) -> int:
    """Poll the store until `n` runs are terminal or `limit` seconds passed; the count.
    `coarse` polls every POLL_MAX_S (when only the runner's timing matters).
    """
    start = time.perf_counter()
    while True:
        count = await count_terminal(cron)
        waited = time.perf_counter() - start
        if count >= n or waited > limit:
            return count
        await asyncio.sleep(POLL_MAX_S if coarse else min(POLL_MAX_S, max(POLL_S, waited / 200)))


def fmt_rate(rate: float, done: int, n: int, limit: float) -> str:
    """A rate, saying when only part of the fires ended within the time limit."""
    if done >= n:
        return f"{rate:,.0f}"
    return f"{rate:,.0f} ({done:,}/{n:,} in {limit:g} s limit)"


# -- databases -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Where:
    """Where a benchmark's database lives: a new SQLite file, or a re-created PostgreSQL db."""

    label: str
    tmp: Path
    pg_url: str | None = None

    async def fresh(self, name: str) -> dict[str, Any]:
        """AgentCron keyword arguments for an empty database called `name`."""
        if self.pg_url is None:
            return {"db": self.tmp / f"{name}.db"}
        await asyncio.to_thread(recreate_pg, self.pg_url)
        return {"url": self.pg_url}

    def sync_url(self, name: str) -> str:
        """A synchronous SQLAlchemy URL of the database `fresh(name)` made."""
        if self.pg_url is None:
            return f"sqlite:///{self.tmp / f'{name}.db'}"
        return self.pg_url


def sqlite_at(ctx: Ctx) -> Where:
    return Where("SQLite", ctx.tmp)


def pg_problem(url: str) -> str | None:
    """Why PostgreSQL at `url` cannot be used by the benchmark (None = it can)."""
    parsed = sa.make_url(url)
    if "bench" not in (parsed.database or ""):
        return f"database name {parsed.database!r} lacks 'bench' (it is dropped and re-created)"
    admin = sa.create_engine(parsed.set(database="postgres"), connect_args={"connect_timeout": 3})
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except Exception as exc:
        log(f"PostgreSQL: {type(exc).__name__}: {str(exc).splitlines()[0]}")
        return f"unreachable at {parsed.host}:{parsed.port or 5432}"
    finally:
        admin.dispose()
    return None


def recreate_pg(url: str) -> None:
    """Drop and create the benchmark's PostgreSQL database (its name must contain 'bench')."""
    parsed = sa.make_url(url)
    name = parsed.database or ""
    assert "bench" in name, name
    admin = sa.create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    finally:
        admin.dispose()


def pg_at(ctx: Ctx) -> Where | None:
    if not ctx.pg_checked:
        ctx.pg_problem, ctx.pg_checked = pg_problem(ctx.pg_url), True
        if ctx.pg_problem:
            log(f"PostgreSQL rows skipped: {ctx.pg_problem}")
    return None if ctx.pg_problem else Where("PostgreSQL", ctx.tmp, ctx.pg_url)


# -- counting transactions and statements ----------------------------------------------------


class SqlCounter:
    """Counts, on every SQLAlchemy Engine in this process (all threads), while entered:
    `begin` (a transaction starts: BEGIN IMMEDIATE on the SQLite writer, implicit on
    PostgreSQL, no SQL at all on the autocommit SQLite readers), `commit`, `rollback`, and
    `before_cursor_execute` (one per statement sent; an executemany is one call).
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._listeners: list[tuple[str, Callable[..., None]]] = [
            ("begin", lambda *_: self._hit("begin")),
            ("commit", lambda *_: self._hit("commit")),
            ("rollback", lambda *_: self._hit("rollback")),
            ("before_cursor_execute", self._statement),
        ]

    def _hit(self, name: str) -> None:
        with self._lock:
            self.counts[name] += 1

    def _statement(self, *args: Any) -> None:
        executemany = args[-1]
        self._hit("executemany" if executemany else "execute")

    def __enter__(self) -> SqlCounter:
        for name, fn in self._listeners:
            event.listen(SaEngine, name, fn)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, fn in self._listeners:
            event.remove(SaEngine, name, fn)


# -- 1. create -------------------------------------------------------------------------------


async def bench_create(ctx: Ctx) -> list[Row]:
    sizes, tmp = ctx.sizes, ctx.tmp
    n = sizes.create
    when = far_future()
    rows: list[Row] = []

    # Job objects are the caller's input: build them outside the timed region.
    bulk_input = at_jobs([when + timedelta(seconds=i) for i in range(n)], "bulk")
    async with AgentCron(db=tmp / "create_bulk.db", runner=noop, settings=UNLIMITED) as cron:
        start = time.perf_counter()
        for i in range(0, n, sizes.create_batch):
            await cron.jobs.create_many(bulk_input[i : i + sizes.create_batch])
        bulk_s = time.perf_counter() - start
        assert await cron.store.count_jobs() == n
    bulk_rate = n / bulk_s
    rows.append(
        Row(
            f"create {n:,} jobs: create_many x{sizes.create_batch:,} (jobs/s)",
            f"{bulk_rate:,.0f}",
            ">= 5,000",
            bulk_rate >= 5_000,
        )
    )
    log(f"create_many: {bulk_s:.2f} s")

    single_rate = await single_creates(sqlite_at(ctx), "create_single", n)
    rows.append(
        Row(
            f"create {n:,} bound jobs: jobs.create() one by one, SQLite (jobs/s)",
            f"{single_rate:,.0f}",
            ">= 3,000",
            single_rate >= 3_000,
        )
    )
    rows.append(await concurrent_row(sqlite_at(ctx), n))

    rows.extend(peer_create(tmp, n, when, bulk_rate=bulk_rate, single_rate=single_rate))

    pg = pg_at(ctx)
    if pg is None:
        why = f"skipped: PostgreSQL {ctx.pg_problem}"
        rows.append(Row("pg create single: jobs.create() one by one", why, "-", None, skipped=True))
        return rows
    pg_rate = await single_creates(pg, "create_single_pg", n)
    rows.append(
        Row(
            f"pg create single: create {n:,} bound jobs: jobs.create() one by one, PostgreSQL "
            "(jobs/s)",
            f"{pg_rate:,.0f}",
            ">= 1,000",
            pg_rate >= 1_000,
        )
    )
    rows.append(await concurrent_row(pg, n))
    return rows


SINGLE_SESSIONS = 100  # the sessions the one-by-one creates bind to (round robin)
CALLERS = 8  # concurrent callers of the concurrent-create rows


def create_one(cron: AgentCron, i: int, when: datetime) -> Awaitable[Job]:
    return cron.jobs.create(
        name=f"single-{i}",
        spec=AtSpec(at=when + timedelta(seconds=i)),
        message="bench",
        session_key=session_key(i, SINGLE_SESSIONS),
    )


async def single_creates(where: Where, name: str, n: int) -> float:
    """`n` bound jobs created with `cron.jobs.create` one after another (each call awaited
    before the next: no two share a transaction), engine running; jobs/s.
    """
    when = far_future()
    kwargs = await where.fresh(name)
    async with AgentCron(**kwargs, runner=noop, settings=UNLIMITED) as cron:
        await create_sessions(cron, SINGLE_SESSIONS)
        start = time.perf_counter()
        for i in range(n):
            await create_one(cron, i, when)
        elapsed = time.perf_counter() - start
        assert await cron.store.count_jobs() == n
    log(f"create one by one ({where.label}): {elapsed:.2f} s")
    return n / elapsed


async def concurrent_row(where: Where, n: int) -> Row:
    """`n` bound jobs created with `cron.jobs.create` by CALLERS concurrent callers (each one
    by one): concurrent creates share the journal's transactions. Commits are counted over
    the window (SqlCounter; the engine's own included).
    """
    when = far_future()
    kwargs = await where.fresh(f"create_concurrent_{'pg' if where.pg_url else 'sqlite'}")
    shares = [n // CALLERS + (c < n % CALLERS) for c in range(CALLERS)]
    async with AgentCron(**kwargs, runner=noop, settings=UNLIMITED) as cron:
        await create_sessions(cron, SINGLE_SESSIONS)

        async def caller(c: int) -> None:
            for k in range(shares[c]):
                await create_one(cron, c + k * CALLERS, when)

        with SqlCounter() as counter:
            start = time.perf_counter()
            await asyncio.gather(*(caller(c) for c in range(CALLERS)))
            elapsed = time.perf_counter() - start
        assert await cron.store.count_jobs() == n
    rate, commits = n / elapsed, counter.counts["commit"] / n
    log(f"create, {CALLERS} callers ({where.label}): {elapsed:.2f} s, {commits:.3f} commits/job")
    return Row(
        f"create {n:,} bound jobs: jobs.create() from {CALLERS} concurrent callers, "
        f"{where.label} (jobs/s; commits per job)",
        f"{rate:,.0f}; {commits:.2f}",
        "-",
        None,
    )


def _aps_noop() -> None:
    """The APScheduler job target (module-level so its jobstore can pickle a reference)."""


def peer_create(
    tmp: Path, n: int, when: datetime, *, bulk_rate: float, single_rate: float
) -> list[Row]:
    """APScheduler 3.x add_job into a SQLAlchemyJobStore on SQLite (optional peer)."""
    try:
        import apscheduler
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
        from apscheduler.schedulers.background import BackgroundScheduler
    except ImportError:
        log("apscheduler not importable: peer rows skipped (pip install 'apscheduler<4')")
        return [Row("peer APScheduler 3.x add_job", "skipped: not installed", "-", None)]

    engine = sa.create_engine(f"sqlite:///{tmp / 'peer_aps.db'}")

    # Same SQLite durability settings as agentcron's store, so the ratio compares the
    # software rather than journal modes (APScheduler's default would fsync every commit).
    @sa.event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.close()

    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(engine=engine)}, timezone=UTC
    )
    # Started paused: add_job writes through to the jobstore, but nothing is executed.
    scheduler.start(paused=True)
    try:
        start = time.perf_counter()
        for i in range(n):
            scheduler.add_job(
                _aps_noop, "date", run_date=when + timedelta(seconds=i), id=f"aps-{i}"
            )
        peer_s = time.perf_counter() - start
        stored = len(scheduler.get_jobs())
    finally:
        scheduler.shutdown(wait=False)
        engine.dispose()
    assert stored == n, f"APScheduler stored {stored} of {n} jobs"
    peer_rate = n / peer_s
    log(f"APScheduler add_job: {peer_s:.2f} s")
    version = getattr(apscheduler, "__version__", "3.x")
    return [
        Row(f"peer: APScheduler {version} add_job (jobs/s)", f"{peer_rate:,.0f}", "-", None),
        Row("ratio create_many / APScheduler", f"{bulk_rate / peer_rate:.1f}x", "-", None),
        Row("ratio create() / APScheduler", f"{single_rate / peer_rate:.2f}x", "-", None),
    ]


# -- 2. bursts on a fake clock ---------------------------------------------------------------


@dataclass
class Burst:
    n: int
    done: int  # terminal runs when the wait ended
    succeeded: int
    elapsed: float
    limit: float
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        return self.done / self.elapsed

    @property
    def measured(self) -> str:
        text = fmt_rate(self.rate, self.done, self.n, self.limit)
        if self.succeeded != self.done:
            text += f" ({self.done - self.succeeded:,} not succeeded)"
        return text

    @property
    def ok(self) -> bool:
        return self.done == self.n == self.succeeded


async def fake_clock_burst(
    where: Where,
    name: str,
    n: int,
    *,
    sessions: int,
    limit: float,
    history: int = 0,
    count_sql: bool = False,
) -> Burst:
    """`n` one-shots due at the same instant on a FakeClock (bound to `sessions` sessions, or
    unbound when 0); time from moving the clock there until all `n` runs are terminal.

    With `history`, each session holds that many transcript entries beforehand. With
    `count_sql`, transactions and statements are counted over the burst; the end of the
    burst is then the last runner call plus `settled()` (so that no polling query is counted).
    """
    clock = FakeClock(FAKE_T0)
    due = FAKE_T0 + timedelta(hours=1)
    called = 0
    all_called = asyncio.Event()

    async def runner(trigger: Trigger) -> str:
        nonlocal called
        called += 1
        if called >= n:
            all_called.set()
        return "ok"

    # Defaults on purpose (max_concurrent_runs=16, batch_size=500), but no job limit: the
    # workloads store more than the 500 jobs a server allows by default.
    settings = UNLIMITED
    kwargs = await where.fresh(name)
    async with AgentCron(**kwargs, runner=runner, clock=clock, settings=settings) as cron:
        await create_sessions(cron, sessions)
        if history:
            await asyncio.to_thread(
                fill_history, where.sync_url(name), sessions, history, clock.now()
            )
        await create_jobs(cron, at_jobs([due] * n, name, sessions=sessions))
        await settle(cron, 60)

        counter = SqlCounter()
        start = time.perf_counter()
        if count_sql:
            with counter:
                clock.set(due)
                wake(cron)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(all_called.wait(), limit)
                with contextlib.suppress(TimeoutError):
                    await settle(cron, max(1.0, limit - (time.perf_counter() - start)))
                elapsed = time.perf_counter() - start
            done = await count_terminal(cron)
        else:
            clock.set(due)
            wake(cron)
            done = await wait_terminal(cron, n, limit)
            elapsed = time.perf_counter() - start
        succeeded = await cron.store.count_runs(states=[RunState.SUCCEEDED])
    burst = Burst(n, done, succeeded, elapsed, limit, counter.counts)
    log(
        f"{name} ({where.label}): {done:,}/{n:,} terminal, {succeeded:,} succeeded "
        f"in {elapsed:.2f} s = {burst.rate:,.0f}/s"
    )
    return burst


def fill_history(url: str, sessions: int, per_session: int, now: datetime) -> None:
    """Store `per_session` transcript entries in each session, with plain SQLAlchemy Core."""
    engine = sa.create_engine(url)
    text = "an earlier message of this chat, long enough to look like one; " * 2
    try:
        for s in range(sessions):
            key = session_key(s, sessions)
            rows = [
                {
                    "id": new_id(),
                    "session_key": key,
                    "seq": seq,
                    "role": "user" if seq % 2 else "assistant",
                    "content": f"{seq}: {text}",
                    "meta": None,
                    "created_at": now - timedelta(seconds=per_session - seq),
                }
                for seq in range(1, per_session + 1)
            ]
            with engine.begin() as conn:
                conn.execute(messages.insert(), rows)
                if "last_seq" in sessions_table.c:  # the store's counter, since migration 0007
                    conn.execute(
                        sessions_table.update()
                        .where(sessions_table.c.session_key == key)
                        .values(last_seq=per_session)
                    )
    finally:
        engine.dispose()


# -- 3. fires on the real clock --------------------------------------------------------------


async def real_clock_fires(
    where: Where,
    name: str,
    n: int,
    *,
    sessions: int,
    lead_s: float,
    span_s: float,
    limit: float,
) -> tuple[list[float], int]:
    """`n` one-shots from now+lead_s, evenly over span_s (0 = all at once), on the real clock;
    the runner records `datetime.now(UTC) - trigger.fire_at`. Sorted lateness (ms), runs ended.
    """
    late_ms: list[float] = []

    async def recorder(trigger: Trigger) -> str:
        late_ms.append((datetime.now(UTC) - trigger.fire_at).total_seconds() * 1_000)
        return "ok"

    kwargs = await where.fresh(name)
    async with AgentCron(**kwargs, runner=recorder, settings=UNLIMITED) as cron:
        await create_sessions(cron, sessions)
        first = datetime.now(UTC) + timedelta(seconds=lead_s)
        step = timedelta(seconds=span_s / n)
        jobs = at_jobs([first + step * i for i in range(n)], name, sessions=sessions)
        await create_jobs(cron, jobs)
        if datetime.now(UTC) > first:
            log(f"{name}: WARNING setup ended after the first fire time; lead too short")
        done = await wait_terminal(cron, n, lead_s + span_s + limit, coarse=True)
    late_ms.sort()
    return late_ms, done


def lateness_rows(label: str, late_ms: Sequence[float], n: int, target: float) -> list[Row]:
    if not late_ms:
        return [Row(label, "no fires", f"<= {target:g}", False)]
    short = "" if len(late_ms) == n else f" ({len(late_ms):,}/{n:,} fired)"
    p99 = percentile(late_ms, 99)
    return [
        Row(f"{label} p50", f"{percentile(late_ms, 50):.2f}", "-", None),
        Row(f"{label} p99", f"{p99:.2f}{short}", f"<= {target:g}", p99 <= target and not short),
        Row(f"{label} max", f"{late_ms[-1]:.2f}", "-", None),
    ]


async def first_call_rows(ctx: Ctx, *, bound: bool, target: float) -> list[Row]:
    """Time from the fire time of a burst to the first runner call (and to the last)."""
    sizes = ctx.sizes
    n = sizes.first
    sessions = sizes.first_sessions if bound else 0
    name = "first_bound" if bound else "first_unbound"
    late_ms, done = await real_clock_fires(
        sqlite_at(ctx), name, n, sessions=sessions, lead_s=2.0, span_s=0.0, limit=sizes.limit_s
    )
    what = (
        f"first runner call of a {n:,}-fire bound burst ({sessions} sessions)"
        if bound
        else f"first job body of a {n:,}-fire unbound burst"
    )
    if not late_ms:
        return [Row(f"{what}, SQLite (ms after fire time)", "no fires", f"<= {target:g}", False)]
    log(f"{name}: first {late_ms[0]:.1f} ms, last {late_ms[-1]:.1f} ms, {done:,} ended")
    short = "" if len(late_ms) == n else f" ({len(late_ms):,}/{n:,} called)"
    return [
        Row(
            f"{what}, SQLite (ms after fire time)",
            f"{late_ms[0]:.1f}",
            f"<= {target:g}",
            late_ms[0] <= target,
        ),
        Row("  last runner call of that burst (ms)", f"{late_ms[-1]:,.0f}{short}", "-", None),
    ]


# -- the benchmarks --------------------------------------------------------------------------


async def bench_burst(ctx: Ctx) -> list[Row]:
    """Unbound fires: the engine alone (claims, dispatch, group-committed run records)."""
    sizes = ctx.sizes
    n = sizes.burst
    b = await fake_clock_burst(sqlite_at(ctx), "burst", n, sessions=0, limit=sizes.limit_s)
    settings = UNLIMITED
    rows = [
        Row(
            f"{n:,} unbound fires due at once -> all terminal, SQLite (fires/s, "
            f"max_concurrent_runs={settings.max_concurrent_runs})",
            b.measured,
            ">= 10,000",
            b.ok and b.rate >= 10_000,
        )
    ]
    return rows + await first_call_rows(ctx, bound=False, target=50)


async def bench_lateness(ctx: Ctx) -> list[Row]:
    sizes = ctx.sizes
    n = sizes.lateness
    late_ms, done = await real_clock_fires(
        sqlite_at(ctx),
        "lateness",
        n,
        sessions=0,
        lead_s=sizes.lateness_lead_s,
        span_s=sizes.lateness_span_s,
        limit=sizes.limit_s,
    )
    log(f"lateness: {len(late_ms)} fires, {done} ended")
    label = f"lateness, {n:,} unbound fires over {sizes.lateness_span_s:g} s, SQLite (ms)"
    return lateness_rows(label, late_ms, n, 10)


async def bound_rows(
    ctx: Ctx, where: Where, *, rate_target: float, late_target: float
) -> list[Row]:
    """A burst of bound fires, then bound fires spread over the span, on `where`."""
    sizes = ctx.sizes
    n, sessions = sizes.bound, sizes.bound_sessions
    tag = "pg" if where.pg_url else "sqlite"
    b = await fake_clock_burst(where, f"bound_{tag}", n, sessions=sessions, limit=sizes.limit_s)
    rows = [
        Row(
            f"{n:,} bound fires due at once over {sessions:,} sessions -> all terminal, "
            f"{where.label} (fires/s)",
            b.measured,
            f">= {rate_target:,.0f}",
            b.ok and b.rate >= rate_target,
        )
    ]
    if not where.pg_url:
        rows += await first_call_rows(ctx, bound=True, target=100)
    m = sizes.lateness
    late_ms, done = await real_clock_fires(
        where,
        f"bound_lateness_{tag}",
        m,
        sessions=sizes.lateness_sessions,
        lead_s=sizes.lateness_lead_s,
        span_s=sizes.lateness_span_s,
        limit=sizes.limit_s,
    )
    log(f"bound lateness ({where.label}): {len(late_ms)} fires, {done} ended")
    label = (
        f"lateness, {m:,} bound fires over {sizes.lateness_span_s:g} s "
        f"({sizes.lateness_sessions} sessions), {where.label} (ms)"
    )
    return rows + lateness_rows(label, late_ms, m, late_target)


async def bench_bound(ctx: Ctx) -> list[Row]:
    return await bound_rows(ctx, sqlite_at(ctx), rate_target=2_000, late_target=20)


async def bench_pg(ctx: Ctx) -> list[Row]:
    where = pg_at(ctx)
    if where is None:
        why = f"skipped: PostgreSQL {ctx.pg_problem}"
        return [Row("bound fires and lateness, PostgreSQL", why, "-", None, skipped=True)]
    return await bound_rows(ctx, where, rate_target=1_000, late_target=50)


async def bench_txn(ctx: Ctx) -> list[Row]:
    """Transactions and statements per bound fire in a burst (SQLAlchemy event listeners)."""
    sizes = ctx.sizes
    n, sessions = sizes.txn, sizes.txn_sessions
    b = await fake_clock_burst(
        sqlite_at(ctx), "txn", n, sessions=sessions, limit=sizes.limit_s, count_sql=True
    )
    c = b.counts
    log(f"txn: counted {dict(c)} over {b.done:,} fires")
    if not b.done:
        return [Row(f"transactions per bound fire, {n:,}-fire burst", "no fires", "", False)]
    short = "" if b.ok else f" ({b.done:,}/{n:,} ended)"
    commits = c["commit"] / b.done
    statements = (c["execute"] + c["executemany"]) / b.done
    return [
        Row(
            f"write transactions (commits) per bound fire, {n:,}-fire burst over {sessions} "
            "sessions, SQLite",
            f"{commits:.2f}{short}",
            "<= 1",
            commits <= 1 and b.ok,
        ),
        Row(
            "SQL statements per bound fire (cursor executions incl. BEGIN and reads), SQLite",
            f"{statements:.1f}{short}",
            "<= 8",
            statements <= 8 and b.ok,
        ),
        Row(
            "  begins / rollbacks per bound fire (a read: begin + rollback, no commit)",
            f"{c['begin'] / b.done:.2f} / {c['rollback'] / b.done:.2f}",
            "-",
            None,
        ),
    ]


async def bench_history(ctx: Ctx) -> list[Row]:
    """Bound fires on sessions with a long transcript vs. on empty sessions."""
    sizes = ctx.sizes
    n, sessions, per = sizes.history_fires, sizes.history_sessions, sizes.history_messages
    where = sqlite_at(ctx)
    empty = await fake_clock_burst(where, "hist_empty", n, sessions=sessions, limit=sizes.limit_s)
    full = await fake_clock_burst(
        where, "hist_full", n, sessions=sessions, limit=sizes.history_limit_s, history=per
    )
    ratio = full.rate / empty.rate
    what = f"{n:,} bound fires over {sessions} sessions"
    return [
        Row(f"{what}, empty sessions, SQLite (fires/s)", empty.measured, "-", None),
        Row(f"{what}, {per:,} messages in each, SQLite (fires/s)", full.measured, "-", None),
        Row(
            f"bound fires/s with {per:,} messages per session / with empty sessions",
            f"{ratio:.2f}",
            ">= 0.8",
            ratio >= 0.8 and empty.ok and full.ok,
        ),
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve_env(home: Path | str, token: str, **extra: str) -> dict[str, str]:
    """The environment of a benchmark's `agentcron serve` child: nothing of the caller's
    agentcron settings, its own home and token.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCRON_")}
    env.update(AGENTCRON_HOME=str(home), AGENTCRON_TOKEN=token, **extra)
    return env


def serve_command(port: int, db: str) -> list[str]:
    """`agentcron serve` on loopback at `port` on `db`, run by this interpreter."""
    return [
        sys.executable, "-c", "from agentcron.cli import main; main()", "serve",
        "--host", "127.0.0.1", "--port", str(port), "--db", db, "--log-level", "warning",
    ]  # fmt: skip


async def bench_http(ctx: Ctx) -> list[Row]:
    """POST /api/jobs from concurrent clients against `agentcron serve` in a subprocess."""
    import httpx

    sizes = ctx.sizes
    n, clients = sizes.http_jobs, sizes.http_clients
    port, token = free_port(), secrets.token_urlsafe(24)
    home = ctx.tmp / "http-home"
    env = serve_env(home, token, AGENTCRON_MAX_JOBS="none")
    cmd = serve_command(port, str(ctx.tmp / "http.db"))
    server_log = ctx.tmp / "http-server.log"
    log_file = await asyncio.to_thread(server_log.open, "wb")
    with log_file:  # the server has its own handle on the file
        proc = await asyncio.create_subprocess_exec(
            *cmd, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=log_file
        )
    statuses: Counter[int] = Counter()
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {token}"},
            limits=httpx.Limits(max_connections=clients, max_keepalive_connections=clients),
            timeout=60,
            trust_env=False,  # loopback only: no proxies from the environment
        ) as client:
            await wait_ready(client, proc, 60)
            keys = [f"api:http-{w}" for w in range(clients)]
            for key in keys:
                (await client.post("/api/sessions", json={"key": key})).raise_for_status()

            def body(w: int, i: int) -> dict[str, Any]:
                return {"session_key": keys[w], "name": f"http-{w}-{i}", "message": "bench",
                        "when": "in 30 days"}  # fmt: skip

            # The load comes from plain keep-alive HTTP/1.1 connections: httpx costs ~0.8 ms of
            # CPU per request, on the same two cores as the server, and would measure itself.
            conns = [await RawHttp.open("127.0.0.1", port, token) for _ in range(clients)]

            async def worker(w: int, count: int, tally: Counter[int]) -> None:
                for i in range(count):
                    tally[await conns[w].post("/api/jobs", body(w, i))] += 1

            warm: Counter[int] = Counter()  # one untimed request per connection
            await asyncio.gather(*(worker(w, 1, warm) for w in range(clients)))
            shares = [n // clients + (w < n % clients) for w in range(clients)]
            start = time.perf_counter()
            await asyncio.gather(*(worker(w, shares[w], statuses) for w in range(clients)))
            elapsed = time.perf_counter() - start
            for conn in conns:
                conn.close()
    except Exception as exc:
        await asyncio.sleep(0.5)  # let a failing server finish writing its log
        tail = (await asyncio.to_thread(server_log.read_text, "utf-8", "replace")).splitlines()
        log(f"http: {type(exc).__name__}: {exc}; the server's log ends:\n" + "\n".join(tail[-5:]))
        return [Row(f"POST /api/jobs, {clients} clients", f"failed: {exc}"[:60], ">= 1,500", False)]
    finally:
        await stop_server(proc)
    ok = statuses[201]
    rate = ok / elapsed
    log(f"http: {dict(statuses)} in {elapsed:.2f} s")
    bad = "" if ok == n else f" ({n - ok:,} not 201)"
    return [
        Row(
            f"POST /api/jobs, {clients} concurrent clients, {n:,} bound jobs, SQLite (jobs/s)",
            f"{rate:,.0f}{bad}",
            ">= 1,500",
            rate >= 1_500 and ok == n,
        )
    ]


class RawHttp:
    """One keep-alive HTTP/1.1 connection that POSTs JSON and reads the status (and skips the
    body by its Content-Length): a load generator that costs little next to the server.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, token: str):
        self._reader, self._writer, self._token = reader, writer, token

    @classmethod
    async def open(cls, host: str, port: int, token: str) -> RawHttp:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, token)

    async def post(self, path: str, payload: dict[str, Any]) -> int:
        data = json.dumps(payload).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {self._token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self._writer.write(head.encode() + data)
        status_line = await self._reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        await self._reader.readexactly(length)
        return status

    def close(self) -> None:
        self._writer.close()


async def wait_ready(client: Any, proc: asyncio.subprocess.Process, limit: float) -> None:
    deadline = time.perf_counter() + limit
    while True:
        if proc.returncode is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        with contextlib.suppress(Exception):
            if (await client.get("/readyz")).status_code == 200:
                return
        if time.perf_counter() > deadline:
            raise RuntimeError("server not ready in time")
        await asyncio.sleep(0.1)


async def stop_server(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGINT)  # uvicorn stops gracefully
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()


# -- idle ------------------------------------------------------------------------------------


async def bench_idle(ctx: Ctx) -> list[Row]:
    sizes = ctx.sizes
    n = sizes.idle_jobs
    when = far_future()
    async with AgentCron(db=ctx.tmp / "idle.db", runner=noop, settings=UNLIMITED) as cron:
        for i in range(0, n, 5_000):
            batch = [when + timedelta(seconds=j) for j in range(i, min(n, i + 5_000))]
            await cron.jobs.create_many(at_jobs(batch, f"idle{i}"))
        await settle(cron, 60)
        gc.collect()  # so a collection of the setup's garbage is not billed to the idle window
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.sleep(sizes.idle_s)
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
    log(f"idle: {cpu:.4f} s CPU over {wall:.1f} s")
    return [
        Row(
            f"idle CPU over {sizes.idle_s:g} s, {n:,} future jobs (s)",
            f"{cpu:.4f}",
            "<= 0.05",
            cpu <= 0.05,
        )
    ]


# -- a million jobs --------------------------------------------------------------------------


async def build_db(path: Path, n: int) -> None:
    """Fill `path` with `n` armed `at` jobs spread over the next year (bulk `InsertJobs`
    writes, applied as the journal applies one before the engine runs).
    """
    store = SqlStore(sqlite_url(path))
    settings = EngineSettings()

    def finisher(job: Job, outcome: JobOutcome) -> JobFinish:  # no outcomes here: never called
        return finish_job(job, outcome, settings)

    await store.open()
    try:
        base = far_future()
        now = datetime.now(UTC)
        batch = 20_000
        for i in range(0, n, batch):
            armed = []
            for j in range(i, min(n, i + batch)):
                at = base + timedelta(seconds=j * 31)  # ~1 year for 1M jobs
                new = NewJob(name=f"m-{j}", spec=AtSpec(at=at), session_key=f"s-{j % 1000}")
                armed.append(ArmedJob(new_id(), new, at, at))
            await store.apply([InsertJobs(armed, now)], finisher)
            if i and i % 200_000 == 0:
                log(f"  built {i:,} jobs")
    finally:
        await store.close()


def vm_hwm_mb() -> float | None:
    """This process's peak RSS from /proc (Linux), a cross-check of ru_maxrss."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


async def child_ready(path: Path) -> dict[str, float | None]:
    """Runs in a fresh process: open a big DB and time how long AgentCron takes to start."""
    rss_imported = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cron = AgentCron(db=path, runner=noop, settings=UNLIMITED)
    start = time.perf_counter()
    await cron.start()
    ready = time.perf_counter() - start
    # The first scheduling pass runs as a task after start(); wait for it to go to sleep.
    await settle(cron, 60)
    first_tick = time.perf_counter() - start
    await cron.close()
    return {
        "ready_s": ready,
        "first_tick_s": first_tick,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_imported_mb": rss_imported,
        "vm_hwm_mb": vm_hwm_mb(),
    }


# Linux carries the parent's peak RSS into a child's ru_maxrss across fork/vfork + exec, so
# a child started straight from this (large) process would report the parent's peak. A tiny
# launcher process in between keeps the inherited figure at the launcher's ~10 MB.
_LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"
_THIS_FILE = str(Path(__file__).resolve())


def db_size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 1e6


async def bench_million(ctx: Ctx) -> list[Row]:
    n = ctx.sizes.million
    path = ctx.tmp / "million.db"
    start = time.perf_counter()
    await build_db(path, n)
    log(f"million: built {n:,} jobs in {time.perf_counter() - start:.1f} s")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _LAUNCHER,
        sys.executable,
        _THIS_FILE,
        "--child-ready",
        str(path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        log(err.decode(errors="replace"))
        return [Row(f"start with {n:,} jobs stored", "child failed", "", False)]
    child = json.loads(out.decode().strip().splitlines()[-1])
    hwm = child["vm_hwm_mb"]
    return [
        Row(
            f"{n:,} jobs stored: time to ready, start() (s)",
            f"{child['ready_s']:.3f}",
            "<= 2",
            child["ready_s"] <= 2,
        ),
        Row(
            f"{n:,} jobs stored: start() + first tick (s)",
            f"{child['first_tick_s']:.3f}",
            "-",
            None,
        ),
        Row(
            f"{n:,} jobs stored: peak RSS, ru_maxrss (MB)",
            f"{child['rss_mb']:.1f}",
            "<= 200",
            child["rss_mb"] <= 200,
        ),
        Row("  peak RSS after imports only (MB)", f"{child['rss_imported_mb']:.1f}", "-", None),
        Row(
            "  cross-check: VmHWM (MB)",
            "n/a" if hwm is None else f"{hwm:.1f}",
            "-",
            None,
        ),
        Row(f"{n:,} jobs stored: database size (MB)", f"{db_size_mb(path):.0f}", "-", None),
    ]


# -- the 9 o'clock herd ----------------------------------------------------------------------

# The herd's instant, and when its database was built (the build runs on a FakeClock here, so
# nothing fires while it is stored). The measuring process runs on the real clock, moved.
HERD_DUE = FAKE_T0 + timedelta(hours=1)
# The measuring process's clock is moved to this long before the instant once it is ready.
HERD_LEAD = timedelta(seconds=1)
HERD_SAMPLE_S = 0.25  # the measuring process samples its progress and RSS this often


class ShiftedClock(SystemClock):
    """The system clock moved by a fixed offset that `jump_to` can change: real time flows
    (waits, leases, heartbeats are real), but it reads "the herd's instant" when we say so,
    as a host would after its clock was set. The engine takes a jump of its clock in its
    stride (its heartbeat guards against it); the benchmark wakes it after the jump.
    """

    def __init__(self, at: datetime) -> None:
        super().__init__()
        self.jump_to(at)

    def jump_to(self, at: datetime) -> None:
        self._shift = at - datetime.now(UTC)

    def now(self) -> datetime:
        return datetime.now(UTC) + self._shift


class HerdRunner:
    """A no-op runner that notes, in compact arrays (so it adds next to nothing to the RSS it
    is part of), when each turn started after the herd's instant and which job it was for.
    Like the plain callables of the other rows it reads no transcript (`history_window` 0;
    the `history` row measures that read).
    """

    history_window = 0

    def __init__(self, clock: ShiftedClock, due: datetime, n: int) -> None:
        self.clock, self.due, self.n = clock, due, n
        self.late_s = array("d")  # seconds after the instant, in start order
        self.index = array("l")  # job index (its name is herd-<index>), in start order
        self.calls = bytearray(n)  # runner calls per job (a duplicate shows as 2)
        self.all_started = asyncio.Event()

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: Any) -> Outcome:
        self.late_s.append((self.clock.now() - self.due).total_seconds())
        trigger = turn.trigger
        i = int(trigger.job_name.rpartition("-")[2]) if trigger is not None else -1
        self.index.append(i)
        if 0 <= i < self.n:
            self.calls[i] = min(255, self.calls[i] + 1)
        if len(self.index) >= self.n:
            self.all_started.set()
        return Outcome.succeeded("ok")


def vm_rss_mb() -> float | None:
    """This process's RSS now, from /proc (Linux)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


async def build_herd(where: Where, n: int, sessions: int) -> dict[str, Any]:
    """A database with `sessions` sessions and `n` one-shots bound to them (job i to session
    i mod sessions, created in the order of i), all due at HERD_DUE; AgentCron's arguments.
    """
    kwargs = await where.fresh("herd")
    clock = FakeClock(FAKE_T0)  # never moved: nothing fires here
    async with AgentCron(**kwargs, runner=noop, clock=clock, settings=UNLIMITED) as cron:
        await create_sessions(cron, sessions)
        await create_jobs(cron, at_jobs([HERD_DUE] * n, "herd", sessions=sessions), 5_000)
        await settle(cron, 120)
    return kwargs


async def child_herd(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs in a fresh process: open the herd's database, wait until ready, move the clock to
    just before the instant and time the herd; its figures, progress samples and peak RSS.
    """
    rss_imported = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n, limit = spec["n"], spec["limit_s"]
    due = datetime.fromisoformat(spec["due"])
    clock = ShiftedClock(FAKE_T0 + timedelta(minutes=1))  # after the build, before the herd
    runner = HerdRunner(clock, due, n)
    kwargs: dict[str, Any] = {"url": spec["url"]} if "url" in spec else {"db": Path(spec["db"])}
    cron = AgentCron(**kwargs, runner=runner, clock=clock, settings=UNLIMITED)
    await cron.start()
    await settle(cron, 120)
    gc.collect()
    rss_ready = vm_rss_mb()
    stats = engine_stats(cron)
    terminal_states = [s.value for s in TERMINAL]
    samples: list[tuple[float, int, int, int, float | None]] = []

    def terminal() -> int:
        return sum(stats[s] for s in terminal_states)

    async def sample() -> None:
        while True:
            t = (clock.now() - due).total_seconds()
            samples.append((t, len(runner.index), stats["claimed"], terminal(), vm_rss_mb()))
            await asyncio.sleep(HERD_SAMPLE_S)

    sampler = asyncio.create_task(sample())
    clock.jump_to(due - HERD_LEAD)
    wake(cron)
    wait_s = HERD_LEAD.total_seconds() + limit
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(runner.all_started.wait(), wait_s)
    # The engine's counters (no query of its own) have no event to wait on: polled.
    while terminal() < n and (clock.now() - due).total_seconds() < limit:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    terminal_s = (clock.now() - due).total_seconds()
    ended, started = terminal(), len(runner.index)  # within the limit (a stop may run more)
    with contextlib.suppress(TimeoutError):
        await settle(cron, 30)
    sampler.cancel()
    await asyncio.gather(sampler, return_exceptions=True)
    stored_terminal = await count_terminal(cron)
    await cron.close()
    # The peak before the figures below are worked out (their lists are the benchmark's).
    rss_mb, hwm_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, vm_hwm_mb()
    return {
        "n": n,
        "started": started,
        "ended": ended,
        "stored_terminal": stored_terminal,
        "terminal_s": terminal_s,
        "claimed": stats["claimed"],
        **herd_order(runner, spec["sessions"], started),
        "samples": samples,
        "rss_imported_mb": rss_imported,
        "rss_ready_mb": rss_ready,
        "rss_mb": rss_mb,
        "vm_hwm_mb": hwm_mb,
    }


def herd_order(runner: HerdRunner, sessions: int, upto: int | None = None) -> dict[str, Any]:
    """When the first `upto` turns (default: all) started, and in what order: every fire is
    due at the same instant, so their order is the order they were created in (job i before
    job i+1; job i is session i mod sessions' (i // sessions)-th fire).
    """
    late, index = runner.late_s[:upto], runner.index[:upto]
    if not late:
        return {"first_s": None, "all_s": None, "first_wave_s": None}
    seen: set[int] = set()
    first_wave_s: float | None = None
    last_of = [-1] * sessions
    inversions = 0  # a session's turn that started before an earlier-created one of it
    displacement = []  # start rank - creation rank
    for rank, (t, i) in enumerate(zip(late, index, strict=True)):
        s = i % sessions
        if s not in seen:
            seen.add(s)
            if len(seen) == sessions:
                first_wave_s = t
        if i < last_of[s]:
            inversions += 1
        last_of[s] = max(last_of[s], i)
        displacement.append(abs(rank - i))
    displacement.sort()
    return {
        "first_s": min(late),
        "all_s": max(late),
        "p50_s": percentile(sorted(late), 50),
        "first_wave_s": first_wave_s,
        "early": sum(1 for t in late if t < 0),  # started before the instant
        "inversions": inversions,
        "displacement_p50": percentile(displacement, 50),
        "displacement_p99": percentile(displacement, 99),
        "displacement_max": displacement[-1],
        "duplicate_calls": sum(1 for c in runner.calls if c > 1),
    }


def herd_records(url: str, n: int) -> dict[str, int]:
    """Read back what the herd left in the database (synchronous SQLAlchemy Core): lost and
    duplicated fires, turns and overlapping turns of one session.
    """
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            run_rows = conn.execute(
                sa.select(runs_table.c.id, runs_table.c.job_id, runs_table.c.state)
            ).all()
            turn_rows = conn.execute(
                sa.select(
                    turns_table.c.run_id,
                    turns_table.c.session_key,
                    turns_table.c.state,
                    turns_table.c.started_at,
                    turns_table.c.finished_at,
                ).order_by(turns_table.c.session_key, turns_table.c.started_at)
            ).all()
            armed = conn.execute(
                sa.select(sa.func.count())
                .select_from(jobs_table)
                .where(jobs_table.c.next_run_at.is_not(None))
            ).scalar_one()
    finally:
        engine.dispose()
    fired = Counter(r.job_id for r in run_rows)
    run_ids = {r.id for r in run_rows}
    per_run = Counter(t.run_id for t in turn_rows if t.run_id is not None)
    overlaps = 0
    previous: dict[str, Any] = {}
    for t in turn_rows:  # by session, then start
        if t.started_at is None:
            continue
        before = previous.get(t.session_key)
        if before is not None and (before.finished_at is None or t.started_at < before.finished_at):
            overlaps += 1
        previous[t.session_key] = t
    states = Counter(r.state for r in run_rows)
    turn_states = Counter(t.state for t in turn_rows)
    return {
        "runs": len(run_rows),
        "jobs_fired": len(fired),
        "jobs_fired_twice": sum(1 for c in fired.values() if c > 1),
        "jobs_unfired": n - len(fired),
        "jobs_still_armed": int(armed),
        "runs_succeeded": states.get(RunState.SUCCEEDED.value, 0),
        "runs_not_succeeded": len(run_rows) - states.get(RunState.SUCCEEDED.value, 0),
        "turns": len(turn_rows),
        "runs_without_turn": len(run_ids - set(per_run)),
        "runs_with_two_turns": sum(1 for c in per_run.values() if c > 1),
        "turns_not_succeeded": len(turn_rows) - turn_states.get("succeeded", 0),
        "overlapping_turns": overlaps,
    }


async def herd_rows(ctx: Ctx, where: Where) -> list[Row]:
    """The 9 o'clock herd on `where`: build, run it in a fresh process, read the records back."""
    sizes = ctx.sizes
    n, sessions, limit = sizes.herd, sizes.herd_sessions, sizes.herd_limit_s
    what = f"herd: {n:,} bound fires due at one instant over {sessions:,} sessions, {where.label}"
    start = time.perf_counter()
    kwargs = await build_herd(where, n, sessions)
    log(f"herd ({where.label}): built {n:,} jobs in {time.perf_counter() - start:.1f} s")
    spec: dict[str, Any] = {"n": n, "sessions": sessions, "limit_s": limit}
    spec |= {"url": kwargs["url"]} if "url" in kwargs else {"db": str(kwargs["db"])}
    spec["due"] = HERD_DUE.isoformat()
    proc = await asyncio.create_subprocess_exec(
        *herd_command(ctx, spec),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        log(err.decode(errors="replace"))
        return [Row(what, "child failed", "", False)]
    # The answer is the last JSON line (py-spy, when it runs the process, adds lines of its own).
    lines = [line for line in out.decode().splitlines() if line.startswith("{")]
    child = json.loads(lines[-1])
    records = await asyncio.to_thread(herd_records, where.sync_url("herd"), n)
    log(f"herd ({where.label}): {json.dumps({k: v for k, v in child.items() if k != 'samples'})}")
    log(f"herd ({where.label}): records {json.dumps(records)}")
    for t, started, claimed, ended, rss in child["samples"][:: max(1, len(child["samples"]) // 40)]:
        log(f"  t={t:6.2f} s started {started:>7,} claimed {claimed:>7,} ended {ended:>7,} "
            f"rss {rss or 0:6.1f} MB")  # fmt: skip
    return herd_table(what, child, records, sqlite=where.pg_url is None, limit=limit)


def herd_command(ctx: Ctx, spec: dict[str, Any]) -> list[str]:
    """The measuring process, behind the tiny launcher (see `_LAUNCHER`); under py-spy when
    --herd-profile asks for it (py-spy then is the launcher: its own RSS is not inherited).
    """
    child = [sys.executable, _THIS_FILE, "--child-herd", json.dumps(spec)]
    if ctx.herd_profile is None:
        return [sys.executable, "-c", _LAUNCHER, *child]
    tag = "pg" if "url" in spec else "sqlite"
    out = ctx.herd_profile.with_name(f"{ctx.herd_profile.stem}-{tag}{ctx.herd_profile.suffix}")
    fmt = {".json": "speedscope", ".txt": "raw"}.get(out.suffix, "flamegraph")
    log(f"herd: profiling the measuring process with py-spy into {out}")
    spy = Path(sys.executable).with_name("py-spy")
    spy_cmd = str(spy) if spy.exists() else "py-spy"
    return [spy_cmd, "record", "-t", "--rate", "50", "-f", fmt, "-o", str(out), "--", *child]


def herd_table(
    what: str, child: dict[str, Any], rec: dict[str, int], *, sqlite: bool, limit: float
) -> list[Row]:
    n, started = child["n"], child["started"]
    short = "" if started == n else f" ({started:,}/{n:,} started in {limit:g} s limit)"
    all_s = child["all_s"]
    target = "<= 15" if sqlite else "-"
    # Before the end (the time limit), a fire not run yet is not lost: then no figure.
    lost = rec["jobs_unfired"] + rec["runs_without_turn"] if started == n else None
    dup = rec["jobs_fired_twice"] + rec["runs_with_two_turns"] + child.get("duplicate_calls", 0)
    overlaps = rec["overlapping_turns"]
    not_ok = rec["runs_not_succeeded"] + rec["turns_not_succeeded"]
    rows = [
        Row(
            f"{what}: every turn started (s after the instant)",
            "no turn started" if all_s is None else f"{all_s:.2f}{short}",
            target,
            (all_s is not None and not short and all_s <= 15) if sqlite else None,
        )
    ]
    if all_s is None:
        return rows
    rows += [
        Row("  first turn started (ms after the instant)", f"{child['first_s'] * 1e3:.1f}", "-",
            None),
        Row("  every session's first turn started (s)",
            "-" if child["first_wave_s"] is None else f"{child['first_wave_s']:.2f}", "-", None),
        Row("  half the turns started, p50 (s)", f"{child['p50_s']:.2f}", "-", None),
        Row("  every run terminal (s)", f"{child['terminal_s']:.2f}"
            + ("" if child["ended"] == n else f" ({child['ended']:,}/{n:,})"), "-", None),
        Row("  turns started per second (all started / time)", f"{started / max(all_s, 1e-6):,.0f}",
            "-", None),
        Row("  peak RSS of the process, ru_maxrss (MB)", f"{child['rss_mb']:.1f}", "<= 300",
            child["rss_mb"] <= 300),
        Row("    RSS when ready, before the instant / after imports only (MB)",
            f"{child['rss_ready_mb'] or 0:.1f} / {child['rss_imported_mb']:.1f}", "-", None),
        Row("    cross-check: VmHWM (MB)",
            "n/a" if child["vm_hwm_mb"] is None else f"{child['vm_hwm_mb']:.1f}", "-", None),
        Row("  claimed but not started, most at a sample (fires)",
            f"{max((c - s for _, s, c, _, _ in child['samples']), default=0):,}", "-", None),
        Row("  lost / duplicated fires or turns, overlapping turns of a session",
            f"{'-' if lost is None else lost} / {dup} / {overlaps}", "0 / 0 / 0",
            lost == dup == overlaps == 0),
        Row("  runs or turns not succeeded (handed back at the limit included)", f"{not_ok:,}",
            "0", not_ok == 0),
        Row("  order: turns before the instant / a session's turns against creation order",
            f"{child['early']} / {child['inversions']}", "-", None),
        Row("  order: |start rank - creation rank| p50 / p99 / max",
            f"{child['displacement_p50']:,} / {child['displacement_p99']:,} / "
            f"{child['displacement_max']:,}", "-", None),
    ]  # fmt: skip
    return rows


async def bench_herd(ctx: Ctx) -> list[Row]:
    rows = await herd_rows(ctx, sqlite_at(ctx))
    where = pg_at(ctx)
    if where is None:
        why = f"skipped: PostgreSQL {ctx.pg_problem}"
        return [*rows, Row("herd, PostgreSQL", why, "-", None, skipped=True)]
    return rows + await herd_rows(ctx, where)


# -- driver ----------------------------------------------------------------------------------

Bench = Callable[[Ctx], Awaitable[list[Row]]]
RUNNERS: dict[str, Bench] = {
    "create": bench_create,
    "burst": bench_burst,
    "lateness": bench_lateness,
    "bound": bench_bound,
    "txn": bench_txn,
    "history": bench_history,
    "http": bench_http,
    "pg": bench_pg,
    "idle": bench_idle,
    "million": bench_million,
    "herd": bench_herd,
}


def render(rows: Sequence[Row]) -> str:
    header = ("metric", "measured", "target", "result")
    cells = [(r.metric, r.measured, r.target, r.result) for r in rows]
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(4)]

    def line(c: Sequence[str]) -> str:
        return " | ".join(
            [
                c[0].ljust(widths[0]),
                c[1].rjust(widths[1]),
                c[2].ljust(widths[2]),
                c[3].ljust(widths[3]),
            ]
        ).rstrip()

    sep = "-+-".join("-" * w for w in widths)
    return "\n".join([line(header), sep, *(line(c) for c in cells)])


def measured_tree() -> str:
    """Which agentcron was measured: its source directory and git commit."""
    src = Path(agentcron.__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(src), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown commit"
    return f"{src} ({commit})"


async def run(
    only: Sequence[str], sizes: Sizes, pg_url: str, herd_profile: Path | None = None
) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="agentcron-bench-") as tmp_dir:
        ctx = Ctx(Path(tmp_dir), sizes, pg_url, herd_profile=herd_profile)
        for name in only:
            log(f"running {name}")
            started = time.perf_counter()
            rows.extend(await RUNNERS[name](ctx))
            log(f"{name} took {time.perf_counter() - started:.1f} s")
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--only", default=",".join(BENCHES), help=f"comma list of: {', '.join(BENCHES)}"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run < 1 min")
    parser.add_argument("--idle-seconds", type=float, help="length of the idle CPU window")
    parser.add_argument("--million", type=int, help="job count for the million benchmark")
    parser.add_argument(
        "--pg-url",
        default=os.environ.get(PG_ENV, DEFAULT_PG_URL),
        help=f"PostgreSQL database for the pg rows, dropped and re-created (default: ${PG_ENV}, "
        f"else {DEFAULT_PG_URL}); its name must contain 'bench'",
    )
    parser.add_argument("--json", type=Path, help="where to write the table as JSON "
                        f"(default: {RESULTS_DIR / 'latest.json'})")  # fmt: skip
    parser.add_argument("--herd", type=int, help="fires in the herd (sessions: a tenth)")
    parser.add_argument(
        "--herd-profile",
        type=Path,
        metavar="PATH",
        help="run the herd's measuring process under py-spy, writing PATH with -sqlite/-pg "
        "before its suffix (.json: speedscope, .txt: collapsed stacks, else an SVG flame graph)",
    )
    parser.add_argument("--child-ready", metavar="DB", help=argparse.SUPPRESS)
    parser.add_argument("--child-herd", metavar="JSON", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child_ready:
        print(json.dumps(asyncio.run(child_ready(Path(args.child_ready)))))
        return 0
    if args.child_herd:
        print(json.dumps(asyncio.run(child_herd(json.loads(args.child_herd)))))
        return 0
    only = [ALIASES.get(b.strip(), b.strip()) for b in args.only.split(",") if b.strip()]
    unknown = sorted(set(only) - set(BENCHES))
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)}; choose from {BENCHES}")
    only = list(dict.fromkeys(only))
    sizes = QUICK if args.quick else FULL
    if args.idle_seconds is not None:
        sizes = Sizes(**{**asdict(sizes), "idle_s": args.idle_seconds})
    if args.million is not None:
        sizes = Sizes(**{**asdict(sizes), "million": args.million})
    if args.herd is not None:
        herd = {"herd": args.herd, "herd_sessions": max(1, args.herd // 10)}
        sizes = Sizes(**{**asdict(sizes), **herd})

    tree = measured_tree()
    log(f"measuring agentcron from {tree}")
    started_at = datetime.now(UTC)
    start = time.perf_counter()
    rows = asyncio.run(run(only, sizes, args.pg_url, args.herd_profile))
    total = time.perf_counter() - start
    print(render(rows))
    missed = [r.metric for r in rows if r.passed is False]
    footer = (
        f"total {total:.1f} s; python {sys.version.split()[0]}; {os.cpu_count()} CPUs; "
        f"{'quick' if args.quick else 'full'} sizes; agentcron from {tree}"
    )
    print(f"\n{footer}")
    if missed:
        print("MISSED TARGETS:\n" + "\n".join(f"  - {m}" for m in missed))
    else:
        print("all targets met")

    out = args.json or RESULTS_DIR / "latest.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "started_at": started_at.isoformat(),
        "total_s": round(total, 1),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "sizes": "quick" if args.quick else "full",
        "only": only,
        "agentcron": tree,
        "rows": [
            {"metric": r.metric, "measured": r.measured, "target": r.target, "result": r.result}
            for r in rows
        ],
    }
    out.write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    log(f"wrote {out}")
    # A measurement, not a test: missed targets are reported, not signalled by exit code.
    return 0


if __name__ == "__main__":
    sys.exit(main())
