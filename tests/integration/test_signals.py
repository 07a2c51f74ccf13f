"""Cross-process signals, for real: PostgreSQL LISTEN/NOTIFY and SQLite's change counter.

Two stores on one database are two processes as far as the database can tell (two
connections, two origins). A change announced by one is heard by the other in well under
100 ms; a process ignores its own notices; a rolled-back change announces nothing; a process
on another database hears nothing. Then the three waits that used to poll: a job added by
another process is claimed at once, an approval decided elsewhere releases the waiting call,
a turn waiting for a session held elsewhere starts when that turn ends.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.engine import Connection

from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.approvals import Approval, ApprovalState
from agentcron.domain.events import Event, FireStarted
from agentcron.domain.states import TurnState
from agentcron.runtime.clock import SystemClock
from agentcron.service.approvals import ApprovalBroker
from agentcron.store.schema import owners
from agentcron.store.signals import SignalHub, Topic, _payloads, announce
from agentcron.store.sql import SqlStore
from tests.conftest import _scratch_pg_database

pytestmark = pytest.mark.slow


class Heard:
    """Records what a hub tells one topic, with when."""

    def __init__(self, hub: SignalHub, topic: Topic) -> None:
        self.notices: list[tuple[float, Sequence[str] | None]] = []
        self.changed = asyncio.Event()
        hub.subscribe(topic, self._on)

    def _on(self, _topic: Topic, keys: Sequence[str] | None) -> None:
        self.notices.append((time.monotonic(), keys))
        self.changed.set()

    async def next(self, within: float = 2.0) -> tuple[float, Sequence[str] | None]:
        await asyncio.wait_for(self.changed.wait(), within)
        self.changed.clear()
        return self.notices[-1]


@pytest.fixture
async def pair(store_url: str) -> AsyncIterator[tuple[SqlStore, SqlStore]]:
    """Two stores on one database, each hearing the other."""
    a, b = SqlStore(store_url), SqlStore(store_url)
    for s in (a, b):
        await s.open()
        await s.signals.start()
    for s in (a, b):
        if s.dialect == "postgresql":
            await asyncio.wait_for(s.signals.connected.wait(), 5)
    try:
        yield a, b
    finally:
        for s in (a, b):
            await s.signals.stop()
            await s.close()


async def _note(store: SqlStore, topic: Topic, keys: list[str], *, fail: bool = False) -> None:
    """A transaction that changes a row (SQLite's counter moves only for a real change) and
    announces `topic`.
    """

    def op(conn: Connection) -> None:
        conn.execute(owners.delete())
        conn.execute(
            owners.insert().values(
                owner=f"t:{time.monotonic_ns()}",
                host="t",
                pid=1,
                role="test",
                started_at=datetime.now(UTC),
                heartbeat_at=datetime.now(UTC),
            )
        )
        announce(conn, topic, keys)
        if fail:
            raise RuntimeError("rolled back")

    await store._db.write(op)


async def test_a_change_is_heard_by_the_other_process_only(
    pair: tuple[SqlStore, SqlStore],
) -> None:
    a, b = pair
    heard_a, heard_b = Heard(a.signals, Topic.SESSIONS), Heard(b.signals, Topic.SESSIONS)
    delays = []
    for i in range(5):
        sent = time.monotonic()
        await _note(a, Topic.SESSIONS, [f"api:s{i}"])
        at, keys = await heard_b.next()
        delays.append(at - sent)
        if a.dialect == "postgresql":
            assert keys == [f"api:s{i}"]  # the notice names the session
        else:
            assert keys is None  # SQLite says only that something changed: re-read
    assert statistics.median(delays) < 0.1, delays
    await asyncio.sleep(0.2)  # several of SQLite's polls: its own writes are not heard
    assert heard_a.notices == []


async def test_a_quiet_sqlite_process_reads_its_counter_only_when_the_files_move(
    store_url: str,
) -> None:
    """SQLite, idle: the files are looked at, the change counter (a thread hop) is not read
    while they do not move; the first change after the quiet spell is heard within the slow
    look's interval, and the ones right after it at the fast one.
    """
    if not store_url.startswith("sqlite"):
        pytest.skip("PostgreSQL hears notices (LISTEN): it reads no counter")
    a, b = SqlStore(store_url), SqlStore(store_url)
    for s in (a, b):
        await s.open()
    b.signals.quiet_after, b.signals.idle_poll = 0.2, 0.3
    await b.signals.start()
    heard = Heard(b.signals, Topic.SESSIONS)
    try:
        await asyncio.sleep(0.6)  # quiet now: nobody writes
        reads = b.signals.counter_reads
        await asyncio.sleep(2.0)  # ~7 looks at the files; polling the counter was ~40 reads
        assert b.signals.counter_reads == reads
        sent = time.monotonic()
        await _note(a, Topic.SESSIONS, ["api:first"])
        at, _ = await heard.next(within=5)
        assert at - sent < 2.0  # within the slow look (0.3 s), with room for a busy machine
        delays = []
        for i in range(5):  # lively now: the fast look
            sent = time.monotonic()
            await _note(a, Topic.SESSIONS, [f"api:s{i}"])
            at, _ = await heard.next()
            delays.append(at - sent)
        assert statistics.median(delays) < 0.1, delays
    finally:
        for s in (a, b):
            await s.signals.stop()
            await s.close()


async def test_a_rolled_back_change_is_not_announced(pair: tuple[SqlStore, SqlStore]) -> None:
    a, b = pair
    heard = Heard(b.signals, Topic.APPROVALS)
    with pytest.raises(RuntimeError):
        await _note(a, Topic.APPROVALS, ["x"], fail=True)
    await _note(a, Topic.APPROVALS, ["y"])  # a later one that commits: heard, alone
    _, keys = await heard.next()
    assert keys in (["y"], None)
    await asyncio.sleep(0.2)
    assert len(heard.notices) == 1


def test_many_keys_are_split_under_the_payload_limit() -> None:
    keys = [f"telegram:{i:020d}" for i in range(2_000)]
    payloads = _payloads("o", keys)
    assert len(payloads) > 1
    assert all(len(p.encode()) < 8_000 for p in payloads)
    assert _payloads("o", []) == ['{"o": "o", "k": []}']


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from _scratch_pg_database()


@pytest.mark.postgres
async def test_postgresql_listener_reconnects_and_re_reads(pg_url: str) -> None:
    import psycopg

    store_url = pg_url
    a = SqlStore(store_url)
    await a.open()
    a.signals.fallback = 30.0
    heard = Heard(a.signals, Topic.JOBS)
    await a.signals.start()
    try:
        await asyncio.wait_for(a.signals.connected.wait(), 5)
        # Cut the listener's connection from the server side, as a failover would.
        with psycopg.connect(store_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query LIKE 'LISTEN%'"
            )
        _, keys = await heard.next(within=10)
        assert keys is None  # after a reconnect: re-read everything
        await asyncio.wait_for(a.signals.connected.wait(), 10)
        b = SqlStore(store_url)
        await b.open()
        try:
            await _note(b, Topic.JOBS, [])
            _, keys = await heard.next(within=5)
            assert keys == []  # heard on the new connection
        finally:
            await b.close()
    finally:
        await a.signals.stop()
        await a.close()


# -- the waits that no longer poll -----------------------------------------------------------


async def _runner(trigger: object) -> str:
    return "ok"


@pytest.fixture
def cron_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("cron_backend", ["sqlite", "postgresql"], indirect=True)
async def test_a_job_added_by_another_process_fires_at_once(cron_url: str) -> None:
    """The server sleeps (nothing due for an hour); a CLI-like process (store open, engine
    not started) adds jobs due at once: each fires within 100 ms of its commit.
    """
    server = AgentCron(url=cron_url, runner=_runner, clock=SystemClock())
    started: dict[str, float] = {}
    arrived = asyncio.Event()

    def on_fire(event: Event) -> None:
        if isinstance(event, FireStarted):
            started.setdefault(event.job_id, time.monotonic())
            arrived.set()

    async def fired(job_id: str) -> None:
        while job_id not in started:
            arrived.clear()
            await arrived.wait()

    server.subscribe(on_fire, [FireStarted])
    await server.start()
    cli = AgentCron(url=cron_url, runner=_runner)
    await cli.store.open()  # as the CLI's database backend does: no engine
    try:
        if server.store.dialect == "postgresql":
            await asyncio.wait_for(server.store.signals.connected.wait(), 5)
        await server.jobs.create(
            name="later", when="in 1 hour", message="m", session_key="api:idle"
        )
        await asyncio.sleep(0.2)  # the engine is asleep until then
        delays = []
        for i in range(5):
            at = datetime.now(UTC) + timedelta(milliseconds=30)
            job = await cli.jobs.create(
                name=f"now{i}", when=at.isoformat(), message="m", session_key=f"api:s{i}"
            )
            committed = time.monotonic()
            await asyncio.wait_for(fired(job.id), 5)
            delays.append(started[job.id] - committed)
        assert statistics.median(delays) < 0.1, delays
    finally:
        await cli.store.close()
        await server.close(grace=1)


@pytest.mark.parametrize("cron_backend", ["sqlite", "postgresql"], indirect=True)
async def test_a_job_paused_by_another_process_does_not_fire(cron_url: str) -> None:
    server = AgentCron(url=cron_url, runner=_runner, clock=SystemClock())
    fired: list[str] = []
    server.subscribe(lambda e: fired.append(getattr(e, "job_id", "")), [FireStarted])
    await server.start()
    cli = AgentCron(url=cron_url, runner=_runner)
    await cli.store.open()
    try:
        if server.store.dialect == "postgresql":
            await asyncio.wait_for(server.store.signals.connected.wait(), 5)
        at = datetime.now(UTC) + timedelta(seconds=1)
        job = await server.jobs.create(
            name="soon", when=at.isoformat(), message="m", session_key="api:p"
        )
        await cli.jobs.update(job.id, when=(at + timedelta(hours=1)).isoformat())
        moved = await cli.jobs.create(
            name="moved",
            when=(at + timedelta(hours=1)).isoformat(),
            message="m",
            session_key="api:q",
        )
        await cli.jobs.update(moved.id, when=(at - timedelta(milliseconds=700)).isoformat())
        await asyncio.sleep(1.5)
        assert job.id not in fired  # its change elsewhere was heard before it came due
        assert moved.id in fired  # and the one moved earlier fired at its new time
    finally:
        await cli.store.close()
        await server.close(grace=1)


async def asked(cron: AgentCron, waiting: asyncio.Task[Approval]) -> Approval:
    """The pending approval of `waiting`, read from the store as another process sees it."""
    async with asyncio.timeout(5):
        while not waiting.done():
            found = await cron.approvals.list("api:s")
            if found:
                return found[0]
            await asyncio.sleep(0.005)
    raise AssertionError("the call ended before its approval was stored")


@pytest.mark.parametrize("cron_backend", ["sqlite", "postgresql"], indirect=True)
async def test_an_approval_decided_elsewhere_releases_the_waiting_call(cron_url: str) -> None:
    here = AgentCron(url=cron_url, runner=_runner, clock=SystemClock())
    elsewhere = AgentCron(url=cron_url, runner=_runner, clock=SystemClock())
    await here.start()
    await elsewhere.store.open()
    await elsewhere.store.signals.start()
    try:
        if here.store.dialect == "postgresql":
            await asyncio.wait_for(here.store.signals.connected.wait(), 5)
        broker: ApprovalBroker = here.approvals.broker
        assert broker.poll >= 10  # the fallback re-read plays no part below
        delays = []
        for i in range(5):
            waiting = asyncio.create_task(
                broker.request(tool="rm", args={"i": i}, session_key="api:s", turn_id=f"t{i}")
            )
            pending = await asked(elsewhere, waiting)
            await elsewhere.approvals.decide(pending.id, "approve", by="bo")
            decided = time.monotonic()
            done = await asyncio.wait_for(waiting, 5)
            delays.append(time.monotonic() - decided)
            assert (done.state, done.decided_by) == (ApprovalState.APPROVED, "bo")
        assert statistics.median(delays) < 0.1, delays
    finally:
        await elsewhere.store.signals.stop()
        await elsewhere.store.close()
        await here.close(grace=1)


@pytest.mark.parametrize("cron_backend", ["sqlite", "postgresql"], indirect=True)
async def test_a_turn_held_elsewhere_starts_when_that_turn_ends(cron_url: str) -> None:
    """Process B holds the session (a turn in its runner); a message to the same session in
    process A waits, and starts right after B's turn ends, without a poll.
    """
    release = asyncio.Event()
    b_started = asyncio.Event()

    class Holding:
        history_window = 0

        async def run_turn(self, session: object, turn: object, events: object) -> object:
            from agentcron.agent.runner import Outcome

            b_started.set()
            await release.wait()
            return Outcome.succeeded("b done")

    class Answering:
        history_window = 0

        async def run_turn(self, session: object, turn: object, events: object) -> object:
            from agentcron.agent.runner import Outcome

            return Outcome.succeeded("a done")

    settings = EngineSettings()
    a = AgentCron(url=cron_url, runner=Answering(), clock=SystemClock(), settings=settings)
    b = AgentCron(url=cron_url, runner=Holding(), clock=SystemClock(), settings=settings)
    await a.start()
    await b.start()
    try:
        for c in (a, b):
            if c.store.dialect == "postgresql":
                await asyncio.wait_for(c.store.signals.connected.wait(), 5)
        await a.sessions.create("api:shared")
        first = await b.sessions.send("api:shared", "hold it")
        await asyncio.wait_for(b_started.wait(), 5)
        second = await a.sessions.send("api:shared", "after")
        await asyncio.sleep(0.3)
        assert (await a.store.sessions.get_turn(second.id)).state is TurnState.QUEUED
        release.set()
        done = await a.sessions.wait_turn(second.id, 5)
        assert done.state is TurnState.SUCCEEDED
        held = await b.sessions.wait_turn(first.id, 5)
        assert held.finished_at is not None
        assert done.started_at is not None
        assert done.started_at >= held.finished_at  # one turn at a time, on the records
        gap = (done.started_at - held.finished_at).total_seconds()
        assert gap < 0.5, gap  # woken by the notice, not by the 30 s fallback
    finally:
        await b.close(grace=1)
        await a.close(grace=1)
