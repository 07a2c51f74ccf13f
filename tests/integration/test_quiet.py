"""Quiet hours and presence through REST, the library and a real channel manager, on SQLite
and PostgreSQL: a session's quiet hours (set, cleared, refused in another form), a fire in them
that holds its delivery until they end (an outbox's record, and a channel without records),
runs silently or waits (holding no lane: the person is answered meanwhile), each said on its
run's delivery record; and a message posted to a chat while a person's turn is live there goes
out after that turn's reply; the agent's cron tool sets a job's choice.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.channels import ChannelManager
from agentcron.domain.deliveries import DeliveryState
from agentcron.domain.quiet import QuietMode
from agentcron.domain.states import RunState
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, T0, CronFactory
from tests.helpers.channels import OutboxChannel, RecordingChannel
from tests.integration.test_cadence import KEY as CHAT
from tests.integration.test_cadence import say
from tests.integration.test_cadence import start as scripted_cron
from tests.integration.test_cli_commands import cli, home  # noqa: F401 (fixture)

TOKEN = "test-token"
KEY = "mine:1"  # a chat of the channel "mine"
NIGHT_END = "2026-11-23T07:00:00+00:00"  # T0 is 2026-11-22 12:00 UTC


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """On SQLite and on PostgreSQL."""
    return str(request.param)


class Chat:
    """Answers a person and a fire alike (`calls` says whose turns it ran); with `go` set
    to an event, a person's turn stays open (after `began`) until it is set.
    """

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.began = asyncio.Event()
        self.go: asyncio.Event | None = None

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        if turn.trigger is not None:
            self.calls.append(turn.trigger.job_name or "")
            return Outcome.succeeded(f"done: {turn.trigger.job_name}")
        self.calls.append("person")
        if self.go is not None:
            self.began.set()
            await self.go.wait()
        return Outcome.succeeded("here I am")


@pytest.fixture
def chat() -> Chat:
    return Chat()


@pytest.fixture
async def cron(make_cron: CronFactory, chat: Chat) -> AgentCron:
    return await make_cron(runner=chat)


@pytest.fixture
async def api(cron: AgentCron) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(cron, token=TOKEN, hook_token="hook")
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as c:
        yield c


async def started(cron: AgentCron, channel: Any) -> ChannelManager:
    manager = ChannelManager(cron, [channel])
    await manager.start()
    return manager


def answer(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def quiet_session(api: httpx.AsyncClient, hours: str = "22:00-07:00") -> dict[str, Any]:
    answer(await api.post("/api/sessions", json={"key": KEY}), 201)
    return answer(await api.patch(f"/api/sessions/{KEY}", json={"quiet_hours": hours}))  # type: ignore[no-any-return]


async def a_job(api: httpx.AsyncClient, when: str, **kw: Any) -> dict[str, Any]:
    body = {"session_key": KEY, "name": "news", "message": "look", "when": when}
    return answer(await api.post("/api/jobs", json=body | kw), 201)  # type: ignore[no-any-return]


async def to(cron: AgentCron, at: datetime) -> None:
    """Move the fake clock to `at` and let every fire due by then settle."""
    clock = cron.clock
    assert isinstance(clock, FakeClock)
    clock.set(at)
    await wait_settled(cron.engine)


async def until(condition: Callable[[], bool], within: float = 10.0) -> None:
    """Wait until `condition` holds. The work it waits for crosses the database's threads
    (and PostgreSQL's round trips), so it is not bounded in loop turns; `within` only bounds
    a test that would otherwise hang.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"the condition did not hold within {within} s")
        await asyncio.sleep(0.005)


async def runs_of(api: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    return answer(await api.get(f"/api/jobs/{job_id}/runs"))["runs"]  # type: ignore[no-any-return]


async def test_hold_keeps_the_delivery_until_the_quiet_hours_end(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    channel = OutboxChannel()
    manager = await started(cron, channel)
    try:
        session = await quiet_session(api)
        assert session["quiet_hours"] == "22:00-07:00"
        job = await a_job(api, "every day at 23:00")
        assert job["policy"]["quiet"] == "hold"
        await to(cron, T0.replace(hour=23))
        await manager.idle()
        await channel.outbox.idle()
        (run,) = await runs_of(api, job["id"])
        assert run["state"] == "succeeded"
        assert run["delivery"] == {
            "notify": "always",
            "delivered": True,
            "quiet": {"mode": "hold", "until": NIGHT_END},
        }
        # Recorded, pending, not sent: its not-before time is the quiet hours' end.
        (record,) = await cron.store.deliveries.pending("mine")
        assert record.state is DeliveryState.PENDING
        assert channel.sent == []
        await to(cron, T0.replace(hour=23) + timedelta(hours=7, minutes=59))  # 06:59
        await channel.outbox.idle()
        assert channel.sent == []
        await to(cron, datetime.fromisoformat(NIGHT_END))
        await asyncio.wait_for(channel.arrived.wait(), 5)
        assert [m.text for m in channel.sent] == ["done: news"]
        await until(lambda: not channel.outbox._queued)
        assert await cron.store.deliveries.pending("mine") == []
    finally:
        await manager.stop(grace=1.0)


async def test_hold_on_a_channel_without_records_and_silent_never_delivers(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    channel = RecordingChannel()
    manager = await started(cron, channel)
    try:
        await quiet_session(api)
        held = await a_job(api, "every day at 23:00")
        silent = await a_job(api, "every day at 23:30", quiet="silent")
        day = await a_job(api, "every day at 12:30", quiet="silent")
        await to(cron, T0.replace(minute=30))  # 12:30: not quiet, delivered at once
        await to(cron, T0.replace(hour=23, minute=30))
        await manager.idle()
        assert [m.text for m in channel.got] == ["done: news"]  # only the day's
        (quiet_run,) = await runs_of(api, silent["id"])
        assert quiet_run["delivery"] == {
            "notify": "always",
            "delivered": False,
            "held": "quiet",
            "quiet": {"mode": "silent", "until": NIGHT_END},
        }
        (day_run,) = await runs_of(api, day["id"])
        assert day_run["delivery"] is None  # not quiet: the record as before
        messages = answer(await api.get(f"/api/sessions/{KEY}/messages"))["messages"]
        closings = [m["meta"] for m in messages if m["role"] == "assistant"]
        assert [m.get("held") for m in closings] == [None, None, "quiet"]
        assert [m.get("quiet_until") for m in closings] == [None, NIGHT_END, None]
        await to(cron, datetime.fromisoformat(NIGHT_END))
        await until(lambda: len(channel.got) == 2)
        await manager.idle()
        assert [m.run_id for m in channel.got] == [
            (await runs_of(api, day["id"]))[0]["id"],
            (await runs_of(api, held["id"]))[0]["id"],
        ]  # the silent one never
    finally:
        await manager.stop(grace=1.0)


async def test_wait_defers_the_fire_and_holds_no_lane(
    api: httpx.AsyncClient, cron: AgentCron, chat: Chat
) -> None:
    await quiet_session(api)
    # catchup=skip: a fire that waited out the quiet hours is not late for that wait
    job = await a_job(api, "every day at 23:00", quiet="wait", catchup="skip")
    await to(cron, T0.replace(hour=23))
    (run,) = await runs_of(api, job["id"])
    assert run["state"] == "deferred"
    assert chat.calls == []
    # The person is answered meanwhile: the waiting fire holds neither the lane nor a slot.
    turn = await cron.sessions.send(KEY, "are you there?")
    done = await cron.sessions.wait_turn(turn.id, 5)
    assert done.state.value == "succeeded"
    assert chat.calls == ["person"]
    await to(cron, datetime.fromisoformat(NIGHT_END))
    await until(lambda: len(chat.calls) == 2)
    await wait_settled(cron.engine)
    (run,) = await runs_of(api, job["id"])
    assert run["state"] == "succeeded"
    assert run["delivery"] == {
        "notify": "always",
        "delivered": True,
        "quiet": {"mode": "wait", "until": NIGHT_END},
    }
    assert chat.calls == ["person", "news"]


async def test_a_person_s_run_now_is_never_quiet(api: httpx.AsyncClient, cron: AgentCron) -> None:
    await quiet_session(api)
    job = await a_job(api, "every day at 9", quiet="wait")
    await to(cron, T0.replace(hour=23))
    run = answer(await api.post(f"/api/jobs/{job['id']}/run"), 202)
    await wait_settled(cron.engine)
    shown = answer(await api.get(f"/api/runs/{run['id']}"))
    assert (shown["state"], shown["delivery"]) == ("succeeded", None)


async def test_a_message_posted_during_a_person_s_live_turn_waits_for_its_end(
    api: httpx.AsyncClient, cron: AgentCron, chat: Chat
) -> None:
    channel = RecordingChannel()
    manager = await started(cron, channel)
    try:
        answer(await api.post("/api/sessions", json={"key": KEY}), 201)
        chat.go = go = asyncio.Event()
        turn = await cron.sessions.send(KEY, "hello?")
        await asyncio.wait_for(chat.began.wait(), 5)
        await cron.sessions.deliver(KEY, "the build is green")  # posted outside the turn
        await manager.idle()
        assert channel.got == []  # held while the person's turn is live
        go.set()
        await cron.sessions.wait_turn(turn.id, 5)
        await until(lambda: len(channel.got) == 2)
        assert [m.text for m in channel.got] == ["here I am", "the build is green"]
        # No live turn: it goes out at once.
        await cron.sessions.deliver(KEY, "and deployed")
        await manager.idle()
        assert channel.got[-1].text == "and deployed"
    finally:
        await manager.stop(grace=1.0)


async def test_quiet_hours_are_cleared_and_refused_in_another_form(
    api: httpx.AsyncClient, cron: AgentCron
) -> None:
    session = await quiet_session(api, " 7:30 - 9:00 ")
    assert session["quiet_hours"] == "07:30-09:00"  # kept in one form
    shown = answer(await api.get(f"/api/sessions/{KEY}"))
    assert shown["quiet_hours"] == "07:30-09:00"
    for bad in ("25:00-07:00", "22:00-22:00", "night", "22:00-07:00" * 3):
        refused = await api.patch(f"/api/sessions/{KEY}", json={"quiet_hours": bad})
        assert refused.status_code == 422, bad
    assert (await api.patch(f"/api/sessions/{KEY}", json={})).status_code == 422
    extra = await api.patch(f"/api/sessions/{KEY}", json={"quiet_hours": None, "tz": "UTC"})
    assert extra.status_code == 422
    missing = await api.patch("/api/sessions/mine:nobody", json={"quiet_hours": "22:00-07:00"})
    assert missing.status_code == 404
    cleared = answer(await api.patch(f"/api/sessions/{KEY}", json={"quiet_hours": None}))
    assert cleared["quiet_hours"] is None
    assert (await cron.sessions.get(KEY)).quiet_hours is None
    job = await a_job(api, "every day at 9")
    wrong = await api.patch(f"/api/jobs/{job['id']}", json={"quiet": "sometimes"})
    assert wrong.status_code == 422
    patched = answer(await api.patch(f"/api/jobs/{job['id']}", json={"quiet": "silent"}))
    assert patched["policy"]["quiet"] == "silent"


def test_the_cli_sets_and_clears_quiet_hours_and_a_job_s_choice(tmp_path: Path) -> None:
    db = str(tmp_path / "cli.db")
    assert cli("sessions", "add", "api:ops", "--tz", "Europe/Berlin", "--db", db).exit_code == 0
    set_ = cli("sessions", "quiet", "api:ops", "22:00-07:00", "--db", db)
    assert set_.exit_code == 0, set_.output
    assert "api:ops (Europe/Berlin): quiet 22:00-07:00" in set_.stdout
    shown = cli("sessions", "show", "api:ops", "--db", db)
    assert "22:00-07:00" in shown.stdout
    bad = cli("sessions", "quiet", "api:ops", "22:00", "--db", db)
    assert bad.exit_code != 0
    assert "HH:MM-HH:MM" in bad.output
    both = cli("sessions", "quiet", "api:ops", "22:00-07:00", "--off", "--db", db)
    assert both.exit_code == 2
    off = cli("sessions", "quiet", "api:ops", "--off", "--db", db)
    assert "no quiet hours" in off.stdout
    add = ("jobs", "add", "--session", "api:ops", "--name", "n", "--message", "m",
           "--when", "every day at 9", "--db", db, "--json")  # fmt: skip
    added = cli(*add, "--quiet", "wait")
    assert added.exit_code == 0, added.output
    assert '"quiet": "wait"' in added.stdout
    job_id = json.loads(added.stdout)["id"]
    shown = cli("jobs", "show", job_id, "--db", db)
    assert "in its session's quiet hours a fire waits until they end, then runs" in shown.stdout
    assert cli(*add, "--quiet", "sometimes").exit_code == 2


# -- the agent's cron tool ---------------------------------------------------------------------


async def test_the_agent_s_cron_tool_sets_a_job_s_quiet_choice(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    # A scripted model calls the cron tool as a person asked, one call a turn.
    calls: list[dict[str, Any]] = [
        {"action": "add", "name": "report", "when": "every day at 23:00",
         "message": "write the report", "quiet": "wait"},
    ]  # fmt: skip
    cron = await scripted_cron(make_cron, calls)
    said = await say(cron, "every night at 11 write the report; in my quiet hours, wait")
    assert said.startswith("tool: Scheduled “report”")
    (job,) = await cron.jobs.list(session_key=CHAT)
    assert job.policy.quiet is QuietMode.WAIT
    # The choice does what it says: the fire at 23:00 waits out the quiet hours.
    await cron.sessions.set_quiet_hours(CHAT, "22:00-07:00")
    await to(cron, T0.replace(hour=23))
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.DEFERRED
    # update changes it alone, from the scheduled turn too (a person's convenience, not a
    # guard rail; it moves no schedule): the fire's own turn makes it silent.
    calls.append({"action": "update", "name": "report", "quiet": "silent"})
    await to(cron, datetime.fromisoformat(NIGHT_END))
    run = await cron.runs.wait(run.id, 5)
    assert run.state is RunState.SUCCEEDED
    assert run.output is not None
    assert run.output.startswith("tool: Updated “report”")
    assert run.delivery is not None
    assert run.delivery["quiet"] == {"mode": "wait", "until": NIGHT_END}
    assert (await cron.jobs.get(job.id)).policy.quiet is QuietMode.SILENT
    calls.append({"action": "list"})
    assert "in quiet hours: silent" in await say(cron, "what runs here?")
    calls.append({"action": "update", "name": "report", "quiet": "hold"})
    await say(cron, "hold it until morning instead")
    assert (await cron.jobs.get(job.id)).policy.quiet is QuietMode.HOLD
    calls.append({"action": "list"})
    assert "in quiet hours" not in await say(cron, "and now?")  # the default goes unsaid
    # Another word is refused by the tool's schema, readably; nothing changes.
    calls.append({"action": "update", "name": "report", "quiet": "sometimes"})
    assert "Input should be 'hold', 'silent' or 'wait'" in await say(cron, "quiet sometimes")
    assert (await cron.jobs.get(job.id)).policy.quiet is QuietMode.HOLD
