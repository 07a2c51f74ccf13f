"""A database outage or a long lock never wedges anything: real faults, real databases.

PostgreSQL is reached through `tests.faultproxy.FaultProxy`, which cuts every connection and
refuses new ones (`refuse`), or holds every byte (`stall`); SQLite is locked by another
process. After each fault every job runs again, nothing is left open, every accepted message
is answered, nothing runs twice, and the log has no traceback.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput, TurnSource
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.sessions import Role
from agentcron.server import create_app
from agentcron.server.routes import health
from agentcron.store.errors import StoreUnavailableError
from agentcron.store.sql import SqlStore, sqlite_url
from tests.conftest import PG_ADMIN_URL, _scratch_pg_database
from tests.faultproxy import FaultProxy

TOKEN = "t" * 32
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ACTIVE_RUNS = ("claimed", "queued", "deferred", "running")
OPEN_TURNS = ("queued", "deferred", "running")
SESSIONS = ["api:o0", "api:o1", "api:o2"]
JOBS_PER_SESSION = 2


class Counting:
    """A runner that counts its calls per turn; a user message takes `chat_s`, a fire `fire_s`."""

    history_window = 0  # no history read: a turn only touches the journal

    def __init__(self, *, chat_s: float = 1.0, fire_s: float = 0.2) -> None:
        self.calls: Counter[str] = Counter()
        self.chat_started: set[str] = set()
        self.chat_s, self.fire_s = chat_s, fire_s
        self.gate: asyncio.Event | None = None  # set: a user turn also waits for it

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        self.calls[turn.turn_id] += 1
        if turn.source is TurnSource.USER:
            self.chat_started.add(turn.turn_id)
            await asyncio.sleep(self.chat_s)
            if self.gate is not None:
                await self.gate.wait()
            return Outcome.succeeded(f"reply to {turn.prompt}")
        await asyncio.sleep(self.fire_s)
        return Outcome.succeeded("fired")


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from _scratch_pg_database()


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    host_port = PG_ADMIN_URL.split("@", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    with FaultProxy(host, int(port)) as p:
        yield p


@pytest.fixture
def log_records(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="agentcron")
    return caplog


def rows(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Read the database directly (not through the proxy)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()  # type: ignore[arg-type]


async def until(what: str, check: Any, limit: float) -> None:
    """Wait until `check()` (sync or async) is true, failing after `limit` seconds."""
    try:
        async with asyncio.timeout(limit):
            while True:
                ok = check()
                if asyncio.iscoroutine(ok):
                    ok = await ok
                if ok:
                    return
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"not within {limit} s: {what}")


@pytest.fixture
async def served(
    pg_url: str, proxy: FaultProxy
) -> AsyncIterator[tuple[AgentCron, httpx.AsyncClient, Counting]]:
    runner = Counting()
    every_second = EngineSettings(min_interval=timedelta(seconds=1))  # the API's jobs: every 1s
    cron = AgentCron(url=proxy.url_for(pg_url), runner=runner, settings=every_second)
    await cron.start()
    app = create_app(cron, token=TOKEN)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(
            transport=transport, base_url="http://t", headers=AUTH, timeout=30
        ) as api:
            yield cron, api, runner
    finally:
        proxy.set_mode("pass")
        await cron.close(grace=5)


async def start_jobs(api: httpx.AsyncClient) -> list[str]:
    ids = []
    for key in SESSIONS:
        assert (await api.post("/api/sessions", json={"key": key})).status_code == 201
        for n in range(JOBS_PER_SESSION):
            body = {"session_key": key, "name": f"{key}-{n}", "message": "tick", "when": "every 1s"}
            response = await api.post("/api/jobs", json=body)
            assert response.status_code == 201, response.text
            ids.append(response.json()["id"])
    return ids


def ran_since(url: str, job_ids: list[str], since: float) -> bool:
    """Every job has a fire due after `since` (epoch s) that succeeded."""
    done = {
        job_id
        for (job_id,) in rows(
            url,
            "SELECT DISTINCT job_id FROM runs WHERE state = 'succeeded' AND fire_at > "
            "to_timestamp(%s)",
            since,
        )
    }
    return set(job_ids) <= done


async def settle_and_check(
    cron: AgentCron, api: httpx.AsyncClient, url: str, job_ids: list[str], runner: Counting
) -> None:
    """Pause the jobs, let the work in flight end, then: nothing is open, nothing ran twice."""
    for job_id in job_ids:
        response = await api.patch(f"/api/jobs/{job_id}", json={"enabled": False})
        assert response.status_code == 200, response.text

    def nothing_open() -> bool:
        open_runs = rows(url, "SELECT count(*) FROM runs WHERE state = ANY(%s)", list(ACTIVE_RUNS))
        open_turns = rows(url, "SELECT count(*) FROM turns WHERE state = ANY(%s)", list(OPEN_TURNS))
        return open_runs[0][0] == 0 and open_turns[0][0] == 0

    await until("every run and turn ends", nothing_open, 15)
    states = dict(rows(url, "SELECT state, count(*) FROM runs GROUP BY state"))
    assert set(states) <= {"succeeded", "skipped", "missed"}, states
    fires = rows(
        url, "SELECT job_id, fire_at, count(*) FROM runs GROUP BY 1, 2 HAVING count(*) > 1"
    )
    assert fires == []  # one run per (job_id, fire_at)
    assert [t for t, n in runner.calls.items() if n > 1] == []  # no turn ran twice
    fired = rows(
        url,
        "SELECT t.id FROM turns t JOIN runs r ON r.id = t.run_id WHERE r.state = 'succeeded'",
    )
    assert {t for (t,) in fired} <= set(runner.calls)
    assert len(runner.calls) == len(fired) + len(runner.chat_started)


def no_traceback_since(records: list[logging.LogRecord], since: float) -> list[str]:
    return [
        f"{r.name}: {r.getMessage()}"
        for r in records
        if r.created >= since and r.exc_info is not None
    ]


@pytest.mark.postgres
async def test_a_cut_of_the_database_leaves_nothing_open_and_loses_no_message(
    served: tuple[AgentCron, httpx.AsyncClient, Counting],
    pg_url: str,
    proxy: FaultProxy,
    log_records: pytest.LogCaptureFixture,
) -> None:
    cron, api, runner = served
    job_ids = await start_jobs(api)
    began = time.time()
    await until("every job runs", lambda: ran_since(pg_url, job_ids, began), 10)

    # Two messages accepted just before the cut: their turns run into it.
    accepted = []
    for key in SESSIONS[:2]:
        response = await api.post(f"/api/sessions/{key}/messages", json={"content": "hi"})
        assert response.status_code == 202, response.text
        accepted.append(response.json()["turn_id"])
    await until("both messages reach the runner", lambda: runner.chat_started >= set(accepted), 10)

    cut = time.time()
    proxy.set_mode("refuse")
    # During the outage the API answers 503 in its error shape, and readiness says so.
    refused = await api.post(f"/api/sessions/{SESSIONS[2]}/messages", json={"content": "x"})
    assert refused.status_code == 503
    assert refused.json() == {
        "error": "unavailable",
        "detail": "the database is unreachable; try again",
    }
    assert int(refused.headers["Retry-After"]) > 0
    async with asyncio.timeout(health.READY_TIMEOUT_S + 1):
        ready = await api.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["status"] == "not ready"
    # Long enough for fires to fall due and for the retries to back off past 1 s (0.1 s
    # doubling: the pause after 1.5 s of outage is 1.6 s).
    await asyncio.sleep(2.5)
    assert not ran_since(pg_url, job_ids, cut + 0.5)  # really cut: nothing recorded meanwhile

    proxy.set_mode("pass")
    healed = time.time()
    await until("every job runs again", lambda: ran_since(pg_url, job_ids, healed), 8)
    await until("/readyz is ready again", lambda: ready_again(api), 5)

    def answered() -> bool:
        found = rows(
            pg_url,
            "SELECT state, reply_message_id FROM turns WHERE id = ANY(%s)",
            accepted,
        )
        return len(found) == 2 and all(s == "succeeded" and m for s, m in found)

    await until("both accepted messages are answered", answered, 10)
    replies = rows(
        pg_url,
        "SELECT m.content FROM turns t JOIN messages m ON m.id = t.reply_message_id "
        "WHERE t.id = ANY(%s)",
        accepted,
    )
    assert sorted(c for (c,) in replies) == ["reply to hi", "reply to hi"]
    await settle_and_check(cron, api, pg_url, job_ids, runner)
    # Every part (the engine's loop and heartbeat too) logs an outage in one line.
    assert no_traceback_since(log_records.records, cut) == []


async def ready_again(api: httpx.AsyncClient) -> bool:
    return (await api.get("/readyz")).status_code == 200


@pytest.mark.postgres
async def test_a_stalled_database_is_not_ready_within_the_timeout_and_work_recovers(
    served: tuple[AgentCron, httpx.AsyncClient, Counting],
    pg_url: str,
    proxy: FaultProxy,
    log_records: pytest.LogCaptureFixture,
) -> None:
    cron, api, runner = served
    job_ids = await start_jobs(api)
    began = time.time()
    await until("every job runs", lambda: ran_since(pg_url, job_ids, began), 10)

    proxy.set_mode("stall")
    started = time.monotonic()
    ready = await api.get("/readyz")
    took = time.monotonic() - started
    assert ready.status_code == 503
    assert "no answer within" in " ".join(ready.json()["problems"])
    assert took < health.READY_TIMEOUT_S + 1
    await asyncio.sleep(2)

    proxy.set_mode("pass")
    healed = time.time()
    await until("every job runs again", lambda: ran_since(pg_url, job_ids, healed), 8)
    await until("/readyz is ready again", lambda: ready_again(api), 5)
    await settle_and_check(cron, api, pg_url, job_ids, runner)


@pytest.mark.postgres
async def test_a_commit_whose_answer_is_lost_is_applied_once(
    pg_url: str, proxy: FaultProxy, log_records: pytest.LogCaptureFixture
) -> None:
    """The connection is cut right after COMMIT reaches the server: the store asks the server
    whether it landed instead of writing it again (or dropping it).
    """
    store = SqlStore(proxy.url_for(pg_url))
    await store.open()
    try:
        await store.sessions.ensure_session("api:doubt", now=datetime.now(UTC))
        proxy.set_mode("cut_after_commit")
        message = await store.sessions.append_message(
            "api:doubt", Role.USER, "exactly once", datetime.now(UTC)
        )
        assert proxy.commits_cut == 1
    finally:
        await store.close()
    found = rows(pg_url, "SELECT id FROM messages WHERE content = 'exactly once'")
    assert found == [(message.id,)]
    assert any("a commit's answer was lost" in r.getMessage() for r in log_records.records)


def test_unreachable_is_not_a_store_refusal() -> None:
    """The journal retries an outage but hands a refusal (`StoreError`) to its caller."""
    from agentcron.store.errors import StoreError

    assert not issubclass(StoreUnavailableError, StoreError)


_HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


async def test_a_sqlite_lock_held_past_the_busy_timeout_keeps_the_turns_reply(
    tmp_path: Path, log_records: pytest.LogCaptureFixture
) -> None:
    runner = Counting(chat_s=0)
    runner.gate = gate = asyncio.Event()
    db = tmp_path / "agentcron.db"
    cron = AgentCron(url=sqlite_url(db), runner=runner, settings=EngineSettings())
    cron.store._db._busy_timeout_ms = 500  # past it in half a second, so the test stays short
    await cron.start()
    try:
        await cron.sessions.create("api:lock")
        turn = await cron.sessions.send("api:lock", "hello")
        await until("the turn reaches its runner", lambda: turn.id in runner.chat_started, 10)
        # Another process takes the write lock and keeps it 1.5 s (three busy timeouts); the
        # turn ends meanwhile, so its end write meets the lock.
        holder = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _HOLD_LOCK, str(db), "1.5", stdout=asyncio.subprocess.PIPE
        )
        try:
            assert holder.stdout is not None
            assert (await holder.stdout.readline()).strip() == b"locked"
            gate.set()

            async def ended() -> bool:
                return (await cron.sessions.turn(turn.id)).state.value not in OPEN_TURNS

            await until("the turn ends", ended, 20)
            assert holder.returncode == 0 or await holder.wait() == 0
        finally:
            if holder.returncode is None:
                await holder.wait()
        ended_turn = await cron.sessions.turn(turn.id)
        assert ended_turn.state.value == "succeeded", ended_turn
        messages = await cron.sessions.messages("api:lock")
        assert [m.content for m in messages][-1] == "reply to hello"
        assert runner.calls[turn.id] == 1
        assert no_traceback_since(log_records.records, 0) == []
    finally:
        await cron.close(grace=5)


async def test_a_direct_write_waits_out_a_lock_for_a_bounded_time(tmp_path: Path) -> None:
    """Outside the journal (a job, a session, an API write) a lock is waited out up to the
    store's bound (60 s by default; 1 s here), then the write fails clearly; once the lock is
    gone writes work again.
    """
    db = tmp_path / "agentcron.db"
    store = SqlStore(sqlite_url(db))
    store._db._busy_timeout_ms = 100
    store._db.lock_wait_s = 1.0
    await store.open()
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _HOLD_LOCK, str(db), "2", stdout=asyncio.subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        assert (await holder.stdout.readline()).strip() == b"locked"
        with pytest.raises(StoreUnavailableError, match="locked by another process for 1 s"):
            await store.sessions.ensure_session("api:a", now=datetime.now(UTC))
        # A wait within the bound succeeds: the lock goes after 2 s in all.
        store._db.lock_wait_s = 30.0
        session = await store.sessions.ensure_session("api:b", now=datetime.now(UTC))
        assert session.key == "api:b"
        assert await holder.wait() == 0
    finally:
        if holder.returncode is None:
            await holder.wait()
        await store.close()
