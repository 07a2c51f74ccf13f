"""Fired and cancelled recalls stay readable (seed 003): the agent's list, the REST route, pruning."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from agentcron.agent.tools import ToolDeps, manage_recall, schedule_recall
from agentcron.app import AgentCron
from agentcron.domain.jobs import RecallState
from agentcron.domain.states import RunState
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from agentcron.views import iso
from tests.conftest import BACKENDS, T0, CronFactory

KEY = "websocket:abc"
TOKEN = "t"


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """Every scenario here runs on SQLite and on PostgreSQL."""
    return str(request.param)


def ctx(app: AgentCron, clock: FakeClock) -> Any:
    return SimpleNamespace(deps=ToolDeps(jobs=app.jobs, session_key=KEY, now=clock.now()))


async def three_recalls(app: AgentCron, clock: FakeClock) -> None:
    """One fired (once, in 1 minute), one cancelled (recurring), one pending."""
    await app.sessions.create(KEY)
    said = await schedule_recall(ctx(app, clock), "once", "Read /tmp/a.log", when="in 1 minute")
    assert said.startswith("Recall scheduled")
    clock.advance(timedelta(minutes=1))
    await wait_settled(app.engine, busy_ok=True)
    await wait_settled(app.engine)
    said = await schedule_recall(
        ctx(app, clock), "recurring", "poll the API", when="in 1 hour", interval_seconds=3600
    )
    assert said.startswith("Recall scheduled")
    clock.advance(timedelta(minutes=5))
    assert (await manage_recall(ctx(app, clock), "cancel")).startswith("Cancelled the recall")
    clock.advance(timedelta(minutes=5))
    said = await schedule_recall(ctx(app, clock), "once", "look again", when="in 2 hours")
    assert said.startswith("Recall scheduled")


async def test_the_agent_lists_pending_fired_and_cancelled_recalls_with_times(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    await three_recalls(app, clock)
    listed = await manage_recall(ctx(app, clock), "list")
    lines = listed.splitlines()
    assert lines[0] == "Recalls in this session:"
    pending, cancelled, fired = lines[1:]
    assert pending.startswith("- pending: look again: once at ")
    assert f"next {T0 + timedelta(minutes=131):%a %Y-%m-%d %H:%M:%S} (UTC)" in pending
    assert cancelled.startswith("- cancelled: poll the API: ")
    assert f"cancelled {T0 + timedelta(minutes=6):%a %Y-%m-%d %H:%M:%S} (UTC)" in cancelled
    assert fired.startswith("- fired: Read /tmp/a.log: ")
    assert f"fired {T0 + timedelta(minutes=1):%a %Y-%m-%d %H:%M:%S} (UTC) (succeeded)" in fired
    # the store keeps each ended recall once, with what it was
    recalls = await app.jobs.recalls(KEY)
    assert [r.state for r in recalls] == [
        RecallState.PENDING,
        RecallState.CANCELLED,
        RecallState.FIRED,
    ]
    ended = recalls[2]
    assert (ended.run_count, ended.last_status) == (1, RunState.SUCCEEDED)
    assert ended.ended_at == T0 + timedelta(minutes=1)
    assert ended.message == "Read /tmp/a.log"
    only = await app.jobs.recalls(KEY, states=[RecallState.FIRED, RecallState.CANCELLED])
    assert [r.state for r in only] == [RecallState.CANCELLED, RecallState.FIRED]


async def test_the_rest_route_lists_recalls_by_state(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    await three_recalls(app, clock)
    asgi = httpx.ASGITransport(app=create_app(app, token=TOKEN, hook_token="h"))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=asgi, base_url="http://t", headers=headers) as api:
        everything = (await api.get(f"/api/sessions/{KEY}/recalls")).json()["recalls"]
        assert [r["state"] for r in everything] == ["pending", "cancelled", "fired"]
        fired = everything[2]
        assert fired["ended_at"] == iso(T0 + timedelta(minutes=1))
        assert fired["last_status"] == "succeeded"
        assert fired["run_count"] == 1
        assert everything[0]["next_fire_at"] == iso(T0 + timedelta(minutes=131))
        assert everything[1]["schedule"] == "every hour"
        some = await api.get(
            f"/api/sessions/{KEY}/recalls", params=[("state", "fired"), ("state", "pending")]
        )
        assert [r["state"] for r in some.json()["recalls"]] == ["pending", "fired"]
        bad = await api.get(f"/api/sessions/{KEY}/recalls", params={"state": "lost"})
        assert bad.status_code == 422
        missing = await api.get("/api/sessions/websocket:nope/recalls")
        assert missing.status_code == 404
        # the pending recall route still shows only the pending one
        pending = (await api.get(f"/api/sessions/{KEY}/recall")).json()["recall"]
        assert pending["message"] == "look again"


async def test_ended_recalls_go_with_their_session_and_with_age(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    await three_recalls(app, clock)
    other = "websocket:other"
    await app.sessions.create(other)
    job = await app.jobs.create(name="r", when="in 1h", session_key=other, kind="recall")
    await app.jobs.delete(job.id)
    assert [r.state for r in await app.jobs.recalls(other)] == [RecallState.CANCELLED]
    # deleting a session cancels its pending recall and removes its recall history
    result = await app.sessions.delete(KEY)
    assert result.deleted is True
    assert await app.store.recall_history(KEY) == []
    # retention: ended recalls older than retention_age are pruned with the runs
    await app.store.prune_runs(
        T0 + timedelta(days=31), keep_per_job=200, max_age=timedelta(days=30)
    )
    assert await app.jobs.recalls(other) == []
