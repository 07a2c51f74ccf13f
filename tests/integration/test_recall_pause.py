"""A recall that pauses after failures is visible and resumable or replaceable; `manage_recall`
names a session (within the memory it shares); a recall keeps its call type and comment.
"""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from agentcron.agent.runner import SessionInfo, Trigger, TurnInput, TurnSource
from agentcron.agent.tools import ToolDeps, manage_recall, schedule_recall
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.jobs import Job, JobKind, RecallCallType, RecallState
from agentcron.domain.states import RunState
from agentcron.errors import InvalidInputError
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, T0, CronFactory, Recorder

KEY = "websocket:abc"
TOKEN = "t"
MIN = timedelta(minutes=1)
COMMENT = (
    "Watch the nightly build of the payments service until it is green again, then tell the "
    "user which commit fixed it and how long it was red."
)


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """Every scenario here runs on SQLite and on PostgreSQL."""
    return str(request.param)


def ctx(app: AgentCron, clock: FakeClock, key: str = KEY) -> Any:
    return SimpleNamespace(deps=ToolDeps(jobs=app.jobs, session_key=key, now=clock.now()))


def turn_ctx(app: AgentCron, clock: FakeClock, key: str) -> Any:
    """The deps a real turn of session `key` gets (scope and sessions as the app wires them)."""
    deps = app.tool_deps(
        SessionInfo(key=key),
        TurnInput(turn_id="t", source=TurnSource.USER, prompt="x", now=clock.now()),
    )
    return SimpleNamespace(deps=deps)


async def step(app: AgentCron, clock: FakeClock, delta: timedelta) -> None:
    """Move the clock, then wait until the fires it made due have run as turns and ended."""
    clock.advance(delta)
    await wait_settled(app.engine, busy_ok=True)
    await wait_settled(app.engine)


async def the_recall(app: AgentCron, key: str = KEY) -> Job:
    (recall,) = [j for j in await app.jobs.list(session_key=key) if j.kind is JobKind.RECALL]
    return recall


def api(app: AgentCron) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=create_app(app, token=TOKEN, hook_token="h"))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    return httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers)


async def failing_recall(make_cron: CronFactory, clock: FakeClock, recorder: Recorder) -> AgentCron:
    """A recurring recall (every minute) whose turns fail 5 times in a row: auto-paused."""

    async def fail(trigger: Trigger) -> str:
        raise RuntimeError("build server down")

    recorder.result = fail
    app = await make_cron(settings=EngineSettings(backoff=()))
    await app.sessions.create(KEY)
    said = await schedule_recall(
        ctx(app, clock),
        "recurring",
        "Read the build log at https://ci.example/payments",
        interval_seconds=60,
        internal_comment=COMMENT,
    )
    assert said.startswith("Recall scheduled")
    for _ in range(5):
        await step(app, clock, MIN)
    assert len(recorder.triggers) == 5
    return app


async def test_a_recurring_recall_failing_5_times_is_visible_to_the_agent_and_resumable(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    app = await failing_recall(make_cron, clock, recorder)
    recall = await the_recall(app)
    assert not recall.enabled
    reason = "auto-paused after 5 consecutive failures; last error: RuntimeError: build server down"
    assert recall.paused_reason == reason
    # the agent sees it paused, why (the last error), and what it can do
    listed = (await manage_recall(ctx(app, clock), "list")).splitlines()
    assert listed[0] == "Recalls in this session:"
    assert listed[1].startswith(f"- paused: {COMMENT[:80]}: every minute; ")
    assert f"paused {T0 + 5 * MIN:%a %Y-%m-%d %H:%M:%S} (UTC): {reason}" in listed[1]
    assert "fired 5x" in listed[1]
    assert "next none" not in listed[1]
    assert "resume it with manage_recall(action='resume')" in listed[2]
    # a skip would arm it while paused: refused, by the tool and by the REST route
    skipped = await manage_recall(ctx(app, clock), "skip")
    assert skipped.startswith("Error: the recall is paused; resume it first")
    async with api(app) as client:
        refused = await client.post(f"/api/sessions/{KEY}/recall/skip")
        assert refused.status_code == 409
        assert "paused: resume it first" in refused.json()["detail"]
        (shown,) = (await client.get(f"/api/sessions/{KEY}/recalls")).json()["recalls"]
        assert (shown["state"], shown["paused_reason"]) == ("paused", reason)
        assert shown["next_fire_at"] is None
        only = await client.get(f"/api/sessions/{KEY}/recalls", params={"state": "paused"})
        assert [r["id"] for r in only.json()["recalls"]] == [recall.id]
    assert (await the_recall(app)).next_run_at is None
    # resumed, it fires again from now on with a fresh failure count
    recorder.result = None
    resumed = await manage_recall(ctx(app, clock), "resume")
    assert resumed == (
        f"Resumed the recall “{COMMENT[:80]}”: next {T0 + 6 * MIN:%a %Y-%m-%d %H:%M:%S} (UTC)."
    )
    await step(app, clock, MIN)
    recall = await the_recall(app)
    assert (recall.enabled, recall.last_status, recall.consecutive_failures) == (
        True,
        RunState.SUCCEEDED,
        0,
    )
    assert (await manage_recall(ctx(app, clock), "list")).splitlines()[1].startswith("- pending: ")
    again = await manage_recall(ctx(app, clock), "resume")
    assert again == f"Error: the recall “{COMMENT[:80]}” is not paused."


async def test_a_paused_recall_does_not_block_scheduling_a_new_one(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    app = await failing_recall(make_cron, clock, recorder)
    paused = await the_recall(app)
    # a bad request leaves the paused recall as it is
    bad = await schedule_recall(ctx(app, clock), "once", "look again")
    assert bad == "Error: a once recall needs `when`"
    assert (await the_recall(app)).id == paused.id
    said = await schedule_recall(ctx(app, clock), "once", "look again", when="in 1 hour")
    assert said.startswith("Recall scheduled")
    assert said.endswith(f"It replaces the paused recall “{COMMENT[:80]}” (now cancelled).")
    new = await the_recall(app)
    assert (new.enabled, new.message, new.next_fire_at) == (True, "look again", T0 + 65 * MIN)
    states = [(r.id, r.state) for r in await app.jobs.recalls(KEY)]
    assert states == [(new.id, RecallState.PENDING), (paused.id, RecallState.CANCELLED)]
    # a pending recall still blocks a second one
    second = await schedule_recall(ctx(app, clock), "once", "and again", when="in 2 hours")
    assert second.startswith("Error: this session already has a pending recall")


async def test_a_recall_keeps_its_call_type_and_whole_comment(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    await app.sessions.create(KEY)
    said = await schedule_recall(
        ctx(app, clock), "once", "Read /tmp/a.log", when="in 1 hour", internal_comment=COMMENT
    )
    assert said.startswith("Recall scheduled")
    recall = await the_recall(app)
    assert (recall.name, recall.call_type, recall.internal_comment) == (
        COMMENT[:80],
        RecallCallType.ONCE,
        COMMENT,
    )
    line = (await manage_recall(ctx(app, clock), "list")).splitlines()[1]
    assert line.endswith(f"; call type once; comment: {COMMENT}")
    async with api(app) as client:
        job = (await client.get(f"/api/jobs/{recall.id}")).json()
        assert (job["call_type"], job["internal_comment"]) == ("once", COMMENT)
        listed = (await client.get("/api/jobs", params={"session_key": KEY})).json()["jobs"]
        assert [(j["call_type"], j["internal_comment"]) for j in listed] == [("once", COMMENT)]
        pending = (await client.get(f"/api/sessions/{KEY}/recall")).json()["recall"]
        assert pending["internal_comment"] == COMMENT
    # kept once it ended too (cancelled here), in the history the agent and the API read
    assert (await manage_recall(ctx(app, clock), "cancel")).startswith("Cancelled the recall")
    (ended,) = await app.jobs.recalls(KEY)
    assert (ended.state, ended.call_type, ended.internal_comment) == (
        RecallState.CANCELLED,
        RecallCallType.ONCE,
        COMMENT,
    )
    async with api(app) as client:
        (shown,) = (await client.get(f"/api/sessions/{KEY}/recalls")).json()["recalls"]
        assert (shown["call_type"], shown["internal_comment"]) == ("once", COMMENT)
    said = await schedule_recall(ctx(app, clock), "immediate", "continue the report")
    assert (await the_recall(app)).call_type is RecallCallType.IMMEDIATE
    # an automation has neither
    with pytest.raises(InvalidInputError, match="for recalls only"):
        await app.jobs.create(name="x", when="in 1h", call_type=RecallCallType.ONCE)


async def test_manage_recall_reaches_another_session_only_within_its_memory(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron(unified_session=True)
    for key in (KEY, "websocket:other", "telegram:7"):
        await app.sessions.create(key)
        said = await schedule_recall(ctx(app, clock, key), "once", f"check {key}", when="in 1h")
        assert said.startswith("Recall scheduled")
    here = turn_ctx(app, clock, KEY)
    # another web chat of the unified memory: listed and cancelled by name
    listed = await manage_recall(here, "list", session_id="websocket:other")
    assert listed.startswith("Recalls in session 'websocket:other':\n- pending: check websocket:")
    cancelled = await manage_recall(here, "cancel", session_id="websocket:other")
    assert cancelled == "Cancelled the recall “check websocket:other”."
    assert [r.state for r in await app.jobs.recalls("websocket:other")] == [RecallState.CANCELLED]
    assert [r.state for r in await app.jobs.recalls(KEY)] == [RecallState.PENDING]
    # a session outside it, unknown or malformed: a clear error, nothing touched
    outside = await manage_recall(here, "cancel", session_id="telegram:7")
    assert outside.startswith("Error: session 'telegram:7' is not one you may manage")
    unknown = await manage_recall(here, "list", session_id="websocket:nobody")
    assert unknown == "Error: there is no session 'websocket:nobody'"
    malformed = await manage_recall(here, "list", session_id="no colon")
    assert malformed.startswith("Error: invalid session key 'no colon'")
    assert [r.state for r in await app.jobs.recalls("telegram:7")] == [RecallState.PENDING]
    # a chat outside the unified memory reaches only itself
    telegram = turn_ctx(app, clock, "telegram:7")
    refused = await manage_recall(telegram, "list", session_id=KEY)
    assert refused.startswith(f"Error: session {KEY!r} is not one you may manage")
    own = await manage_recall(telegram, "list", session_id="telegram:7")
    assert own.startswith("Recalls in this session:\n- pending: check telegram:7")
