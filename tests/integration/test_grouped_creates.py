"""Job creation shares transactions: concurrent `cron.jobs.create` calls and `POST /api/jobs`
requests go through the journal's group commit, and an API create reads its session inside
its own write, not before it. Each caller still gets its own answer (on both backends).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.events import Event, JobAction, JobEvent
from agentcron.server import create_app
from agentcron.service.job_requests import JobCreate
from agentcron.store import JobLimitError, SessionNotFoundError
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory, Recorder

TOKEN = "t"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Transactions:
    """Every transaction of the process (any engine, any thread) while recording, with the
    statements it ran: those that committed, and those that ended without (the reads).
    """

    def __init__(self) -> None:
        self.committed: list[list[str]] = []
        self.uncommitted: list[list[str]] = []
        self._open: dict[int, list[str]] = {}

    def _statement(self, conn: Connection, _cursor: Any, statement: str, *_: Any) -> None:
        self._open.setdefault(id(conn), []).append(statement)

    def _commit(self, conn: Connection) -> None:
        self.committed.append(self._open.pop(id(conn), []))

    def _rollback(self, conn: Connection) -> None:
        self.uncommitted.append(self._open.pop(id(conn), []))

    @contextmanager
    def recording(self) -> Iterator[Transactions]:
        hooks = [
            ("before_cursor_execute", self._statement),
            ("commit", self._commit),
            ("rollback", self._rollback),
        ]
        for name, fn in hooks:
            event.listen(Engine, name, fn)
        try:
            yield self
        finally:
            for name, fn in hooks:
                event.remove(Engine, name, fn)

    def writes_of_jobs(self) -> list[list[str]]:
        """Committed transactions that inserted jobs."""
        return [t for t in self.committed if any(s.startswith("INSERT INTO jobs") for s in t)]

    def reads_of_sessions(self) -> list[list[str]]:
        """Transactions that read the sessions table and did not commit (a read of its own)."""
        return [t for t in self.uncommitted if any("FROM sessions" in s for s in t)]


def created_events(cron: AgentCron) -> list[JobEvent]:
    seen: list[JobEvent] = []

    def hear(e: Event) -> None:
        if isinstance(e, JobEvent) and e.action is JobAction.CREATED:
            seen.append(e)

    cron.subscribe(hear, types=[JobEvent])
    return seen


@asynccontextmanager
async def api_of(cron: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(cron, token=TOKEN, hook_token="h")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=AUTH) as c:
        yield c


def body(key: str, name: str, when: str = "in 1m", **kw: Any) -> dict[str, Any]:
    return {"session_key": key, "name": name, "message": "m", "when": when, **kw}


async def test_concurrent_library_creates_share_one_transaction(
    make_cron: CronFactory,
) -> None:
    cron = await make_cron()
    for s in range(4):
        await cron.sessions.create(f"api:s{s}")
    events = created_events(cron)
    n = 40
    with Transactions().recording() as txns:
        jobs = await asyncio.gather(
            *(
                cron.jobs.create(name=f"j{i}", when="in 30 days", session_key=f"api:s{i % 4}")
                for i in range(n)
            )
        )
    # All 40 wait on the journal at once: one transaction (one per create would be 40).
    assert len(txns.writes_of_jobs()) == 1
    assert sorted(j.name for j in jobs) == sorted(f"j{i}" for i in range(n))
    assert len(await cron.jobs.list()) == n
    assert sorted(e.job_id for e in events) == sorted(j.id for j in jobs)


async def test_concurrent_api_creates_share_transactions_and_read_no_session_first(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    cron = await make_cron()
    keys = [f"api:s{s}" for s in range(8)]
    for key in keys:
        await cron.sessions.create(key, tz="Europe/Berlin")
    events = created_events(cron)
    n = 24
    async with api_of(cron) as api:
        with Transactions().recording() as txns:
            answers = await asyncio.gather(
                *(api.post("/api/jobs", json=body(keys[i % 8], f"j{i}")) for i in range(n))
            )
    assert [a.status_code for a in answers] == [201] * n, answers[0].text
    created = [a.json() for a in answers]
    # The session is read in the insert's transaction: no read of its own per request...
    assert txns.reads_of_sessions() == []
    # ...and the requests' writes are shared (one per request would be 24).
    assert len(txns.writes_of_jobs()) <= 3
    # The job took its session's zone, read in that transaction.
    assert {j["spec"]["tz"] for j in created} == {"Europe/Berlin"}
    assert sorted(e.job_id for e in events) == sorted(j["id"] for j in created)
    # The engine was woken for the new fires: they run at their time.
    clock.advance(timedelta(minutes=1))
    await wait_settled(cron.engine)
    assert sorted(recorder.names()) == sorted(f"j{i}" for i in range(n))


async def test_refused_api_creates_get_their_own_answer_and_do_not_split_the_batch(
    make_cron: CronFactory,
) -> None:
    cron = await make_cron()
    await cron.sessions.create("api:a")
    requests = [
        body("api:a", "ok1"),
        body("api:missing", "no session"),
        body("api:a", "unreadable", when="whenever"),
        body("api:a", "bad zone", tz="Mars/Olympus"),
        body("api:a", "past end", end_at="2020-01-01T00:00:00Z"),
        body("api:a", "ok2"),
    ]
    async with api_of(cron) as api:
        with Transactions().recording() as txns:
            answers = await asyncio.gather(*(api.post("/api/jobs", json=r) for r in requests))
    got = [(a.status_code, a.json().get("error")) for a in answers]
    assert got == [
        (201, None),
        (404, "not_found"),
        (422, "invalid_schedule"),
        (422, "invalid_schedule"),
        (422, "invalid_value"),
        (201, None),
    ], [a.text for a in answers]
    assert "create it first with POST /api/sessions" in answers[1].json()["detail"]
    assert "cannot read 'whenever' as a time" in answers[2].json()["detail"]
    assert "unknown time zone 'Mars/Olympus'" in answers[3].json()["detail"]
    assert "end_at" in answers[4].json()["detail"]
    assert sorted(j.name for j in await cron.jobs.list()) == ["ok1", "ok2"]
    # A refusal is its caller's answer, not a failed batch applied again one by one.
    assert len(txns.writes_of_jobs()) <= 2
    assert txns.reads_of_sessions() == []


async def test_a_missing_session_is_answered_before_what_is_wrong_with_the_request(
    make_cron: CronFactory,
) -> None:
    cron = await make_cron()
    with pytest.raises(SessionNotFoundError, match="create it first"):
        await cron.jobs.create_in_session(
            JobCreate(session_key="api:gone", name="n", message="m", when="whenever")
        )


async def test_the_job_limit_refuses_the_right_concurrent_requests(
    make_cron: CronFactory,
) -> None:
    cron = await make_cron(settings=EngineSettings(max_jobs=5))
    await cron.sessions.create("api:a")
    n = 8
    async with api_of(cron) as api:
        answers = await asyncio.gather(
            *(api.post("/api/jobs", json=body("api:a", f"j{i}")) for i in range(n))
        )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [201] * 5 + [409] * 3
    assert {a.json()["error"] for a in answers if a.status_code == 409} == {"job_limit"}
    assert len(await cron.jobs.list()) == 5
    with pytest.raises(JobLimitError):
        await cron.jobs.create_in_session(
            JobCreate(session_key="api:a", name="one more", message="m", when="in 1h")
        )


async def test_an_idempotent_retry_through_the_api_answers_the_stored_job(
    make_cron: CronFactory,
) -> None:
    cron = await make_cron()
    await cron.sessions.create("api:a")
    request = body("api:a", "once", idempotency_key="k1")
    async with api_of(cron) as api:
        first, again = await asyncio.gather(
            api.post("/api/jobs", json=request), api.post("/api/jobs", json=request)
        )
    assert (first.status_code, again.status_code) == (201, 201)
    assert first.json()["id"] == again.json()["id"]
    assert len(await cron.jobs.list()) == 1


async def test_unified_mode_creates_the_shared_session_in_the_jobs_transaction(
    make_cron: CronFactory,
) -> None:
    cron = await make_cron(unified_session=True)
    await cron.sessions.create("websocket:a")
    await cron.sessions.create("websocket:b")
    async with api_of(cron) as api:
        with Transactions().recording() as txns:
            answers = await asyncio.gather(
                api.post("/api/jobs", json=body("websocket:a", "from a")),
                api.post("/api/jobs", json=body("websocket:b", "from b")),
            )
    assert [a.status_code for a in answers] == [201, 201]
    assert {a.json()["session_key"] for a in answers} == {"unified:default"}
    shared = await cron.sessions.get("unified:default")
    assert shared.title == "Shared automations (unified mode)"
    # No write of its own for the shared session: it is created with the jobs.
    alone = [
        t
        for t in txns.committed
        if any(s.startswith("INSERT INTO sessions") for s in t)
        and not any(s.startswith("INSERT INTO jobs") for s in t)
    ]
    assert alone == []
    assert txns.reads_of_sessions() == []
