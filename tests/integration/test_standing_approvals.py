"""Standing approvals on SQLite and PostgreSQL, through the library and the REST API, with the
offline model calling a user tool that needs approval in a job's scheduled turn (fake clock):
a grant lets the run call it unattended and the record names the grant; a call no grant
matches, an expired or revoked grant, and a person's message wait as before; a waiting run is
on the job's view, its channel is reminded once, and at the timeout the call fails closed with
its record on the run; a restart sends no second reminder.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentcron.agent.gate import UserTool
from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.channels import ChannelManager
from agentcron.domain.approvals import Approval, ApprovalState
from agentcron.domain.events import ApprovalDecided, ApprovalRequested, Event
from agentcron.domain.runs import Run
from agentcron.domain.states import RunState
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, T0, CronFactory
from tests.helpers.channels import RecordingChannel
from tests.helpers.waiting import until

KEY = "mine:ops"  # a session of the recording channel
AUTH = {"Authorization": "Bearer t"}
NINE = T0.replace(hour=9) + timedelta(days=1)  # the first "every day at 9" after T0
ASK = "use archive_logs with name=build.log"
HOUR = 3600


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """On SQLite and on PostgreSQL."""
    return str(request.param)


def archiver(archive: Path) -> Callable[[str], str]:
    def archive_logs(name: str) -> str:
        """Move a log file into the archive."""
        (archive / name).write_text("archived\n")
        return f"archived {name}"

    return archive_logs


@dataclass
class World:
    cron: AgentCron
    api: httpx.AsyncClient
    clock: FakeClock
    archive: Path
    channel: RecordingChannel
    manager: ChannelManager
    events: list[Event]
    job_id: str = ""

    async def job(self) -> str:
        body = {
            "session_key": KEY,
            "name": "nightly logs",
            "message": ASK,
            "when": "every day at 9",
        }
        created = await self.api.post("/api/jobs", json=body)
        assert created.status_code == 201, created.text
        self.job_id = str(created.json()["id"])
        return self.job_id

    async def grant(self, **body: Any) -> dict[str, Any]:
        body.setdefault("tool", "archive_logs")
        body.setdefault("expires_in_s", 2 * 24 * HOUR)
        made = await self.api.post(f"/api/jobs/{self.job_id}/grants", json=body)
        assert made.status_code == 201, made.text
        return dict(made.json())

    async def fire(self) -> Run:
        self.clock.set(NINE)
        await wait_settled(self.cron.engine, busy_ok=True)
        (run,) = await self.cron.runs.list(self.job_id)
        return run

    async def pending(self) -> Approval:
        found: list[Approval] = []

        async def asked() -> bool:
            found[:] = await self.cron.approvals.list(KEY)
            return bool(found)

        await until(asked, "an approval is requested")
        (approval,) = found
        return approval

    async def detail(self) -> dict[str, Any]:
        got = await self.api.get(f"/api/jobs/{self.job_id}")
        assert got.status_code == 200, got.text
        return dict(got.json())

    def requested(self) -> list[str]:
        return [e.approval_id for e in self.events if isinstance(e, ApprovalRequested)]

    def reminders(self) -> list[str]:
        return [m.message_id for m in self.channel.got if m.kind == "approval_reminder"]


async def make_world(
    make_cron: CronFactory, clock: FakeClock, archive: Path, channel: RecordingChannel
) -> tuple[AgentCron, ChannelManager, list[Event]]:
    cron = await make_cron(  # the default approval timeout (5 minutes), reminded at half
        runner=None,
        model=OfflineModel(0),
        tools=[UserTool(archiver(archive), requires_approval=True)],
    )
    events: list[Event] = []
    cron.subscribe(events.append, types=[ApprovalRequested, ApprovalDecided])
    manager = ChannelManager(cron, [channel])
    await manager.start()
    return cron, manager, events


@pytest.fixture
async def world(make_cron: CronFactory, clock: FakeClock, tmp_path: Path) -> AsyncIterator[World]:
    archive = tmp_path / "archive"
    archive.mkdir()
    channel = RecordingChannel("mine", carries_approvals=True)
    cron, manager, events = await make_world(make_cron, clock, archive, channel)
    await cron.sessions.create(KEY)
    transport = httpx.ASGITransport(app=create_app(cron, token="t"))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=AUTH) as api:
            yield World(cron, api, clock, archive, channel, manager, events)
    finally:
        await manager.stop()


async def test_a_grant_lets_a_scheduled_run_call_its_tool_unattended(world: World) -> None:
    await world.job()
    made = await world.grant(args={"name": "*.log"}, by="ana")
    assert (made["tool"], made["args"], made["granted_by"], made["expired"]) == (
        "archive_logs",
        {"name": "*.log"},
        "ana",
        False,
    )
    run = await world.fire()
    done = await world.cron.runs.wait(run.id, 2)
    assert done.state is RunState.SUCCEEDED, done.error
    assert (world.archive / "build.log").read_text() == "archived\n"  # it ran, unattended
    assert world.requested() == []  # nobody was asked
    assert await world.cron.approvals.list() == []
    # the record names the grant
    (record,) = await world.cron.approvals.list(KEY, pending_only=False)
    assert (record.state, record.decided_by, record.grant_id, record.job_id) == (
        ApprovalState.APPROVED,
        f"standing grant {made['id']}",
        made["id"],
        world.job_id,
    )
    assert record.decided_at == record.requested_at == NINE
    (turn,) = await world.cron.sessions.turns(KEY)
    assert record.turn_id == turn.id
    shown = (await world.api.get(f"/api/approvals/{record.id}")).json()
    assert (shown["grant_id"], shown["job_id"]) == (made["id"], world.job_id)
    (call,) = done.tool_calls or []
    assert (call["name"], call["ok"], call["result"]) == (
        "archive_logs",
        True,
        "archived build.log",
    )
    assert (await world.detail())["waiting_approval"] is None
    assert world.reminders() == []


async def test_a_call_no_grant_matches_waits_and_is_on_the_job_view(world: World) -> None:
    await world.job()
    await world.grant(args={"name": "*.txt"})  # not this call's argument
    await world.grant(tool="archive_all")  # not this tool
    run = await world.fire()
    waiting = await world.pending()
    assert (waiting.job_id, waiting.grant_id) == (world.job_id, None)
    shown = (await world.detail())["waiting_approval"]
    assert shown is not None
    assert (shown["id"], shown["tool"], shown["args"], shown["session_key"]) == (
        waiting.id,
        "archive_logs",
        {"name": "build.log"},
        KEY,
    )
    assert (shown["since"], shown["expires_at"], shown["reminded_at"]) == (
        "2026-11-23T09:00:00Z",
        "2026-11-23T09:05:00Z",
        None,
    )
    decided = await world.api.post(f"/api/approvals/{waiting.id}", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    done = await world.cron.runs.wait(run.id, 2)
    assert done.state is RunState.SUCCEEDED, done.error
    assert (await world.detail())["waiting_approval"] is None


async def test_an_expired_grant_does_not_match(world: World) -> None:
    await world.job()
    made = await world.grant(expires_in_s=HOUR)  # at T0 + 1 h; the fire is at 09:00 next day
    await world.fire()
    waiting = await world.pending()
    assert waiting.grant_id is None
    listed = (await world.api.get(f"/api/jobs/{world.job_id}/grants")).json()["grants"]
    assert [(g["id"], g["expired"]) for g in listed] == [(made["id"], True)]


async def test_a_revoked_grant_does_not_match_and_the_edges_refuse_what_is_wrong(
    world: World,
) -> None:
    await world.job()
    made = await world.grant()
    base = f"/api/jobs/{world.job_id}/grants"
    assert [g["id"] for g in (await world.api.get(base)).json()["grants"]] == [made["id"]]
    revoked = await world.api.delete(f"{base}/{made['id']}")
    assert (revoked.status_code, revoked.json()) == (200, {"revoked": made["id"]})
    assert (await world.api.get(base)).json() == {"grants": []}
    again = await world.api.delete(f"{base}/{made['id']}")
    assert (again.status_code, again.json()["error"]) == (404, "not_found")
    # an unknown job, and requests a grant may not be
    assert (await world.api.get("/api/jobs/nope/grants")).status_code == 404
    nope = await world.api.post(
        "/api/jobs/nope/grants", json={"tool": "archive_logs", "expires_in_s": HOUR}
    )
    assert nope.status_code == 404
    for body in (
        {"tool": "archive_*", "expires_in_s": HOUR},  # one tool, not a glob
        {"tool": "archive_logs"},  # no expiry
        {"tool": "archive_logs", "expires_in_s": HOUR, "expires_at": "2027-01-01T00:00:00Z"},
        {"tool": "archive_logs", "expires_at": "2020-01-01T00:00:00Z"},  # past
        {"tool": "archive_logs", "expires_in_s": 10**9},
        {"tool": "archive_logs", "expires_in_s": HOUR, "args": {"name": {"a": 1}}},
        {"tool": "archive_logs", "expires_in_s": HOUR, "args": {"name": "x" * 501}},
        {"tool": "archive_logs", "expires_in_s": HOUR, "extra": 1},
    ):
        refused = await world.api.post(base, json=body)
        assert refused.status_code == 422, body  # the request's shape, or the grant's rules
        assert refused.json()["error"] in ("invalid_request", "invalid_value"), body
    assert (await world.api.get(base)).json() == {"grants": []}
    await world.fire()
    assert (await world.pending()).grant_id is None  # it waits again


async def test_a_persons_message_never_uses_a_jobs_grant(world: World) -> None:
    await world.job()
    await world.grant()
    await world.cron.sessions.send(KEY, ASK)
    waiting = await world.pending()
    assert (waiting.job_id, waiting.grant_id, waiting.state) == (None, None, ApprovalState.PENDING)
    assert list(world.archive.iterdir()) == []


async def test_a_waiting_run_is_reminded_once_and_fails_closed_at_the_timeout(
    world: World,
) -> None:
    await world.job()
    run = await world.fire()
    waiting = await world.pending()
    world.clock.advance(timedelta(minutes=2, seconds=29))
    await wait_settled(world.cron.engine, busy_ok=True)
    await world.manager.idle()
    assert world.reminders() == []  # not yet: half of the 5-minute wait is 2:30
    world.clock.advance(timedelta(seconds=1))

    async def reminded() -> bool:
        await world.manager.idle()
        return bool(world.reminders())

    await until(reminded, "the channel is reminded")
    (message,) = [m for m in world.channel.got if m.kind == "approval_reminder"]
    assert message.message_id == f"apm.{waiting.id}"
    assert message.session_key == KEY
    assert message.text.startswith("Reminder: a scheduled run still waits for approval of")
    assert message.approval is not None
    assert message.approval["job_id"] == world.job_id
    stored = await world.cron.approvals.get(waiting.id)
    assert stored.reminded_at == NINE + timedelta(minutes=2, seconds=30)
    assert (await world.detail())["waiting_approval"]["reminded_at"] == "2026-11-23T09:02:30Z"
    world.clock.advance(timedelta(minutes=2, seconds=29))  # no second reminder meanwhile
    await wait_settled(world.cron.engine, busy_ok=True)
    await world.manager.idle()
    assert world.reminders() == [f"apm.{waiting.id}"]
    world.clock.advance(timedelta(seconds=1))  # the timeout: denied, closed
    done = await world.cron.runs.wait(run.id, 2)
    assert done.state is RunState.SUCCEEDED, done.error  # the turn goes on without the tool
    assert list(world.archive.iterdir()) == []
    ended = await world.cron.approvals.get(waiting.id)
    assert (ended.state, ended.decision, ended.decided_by, ended.decided_at) == (
        ApprovalState.EXPIRED,
        "deny",
        "timeout",
        NINE + timedelta(minutes=5),
    )
    (call,) = done.tool_calls or []  # the run's record says why the tool did not run
    assert (call["name"], call["ok"], call["result"]) == (
        "archive_logs",
        False,
        "Denied: timed out waiting for a person's approval.",
    )
    assert (await world.detail())["waiting_approval"] is None
    await world.manager.idle()
    assert [m.kind for m in world.channel.got if m.kind.startswith("approval")] == [
        "approval_requested",
        "approval_reminder",
        "approval_decided",
    ]


async def test_a_restart_sends_no_second_reminder(
    world: World, make_cron: CronFactory, clock: FakeClock
) -> None:
    await world.job()
    await world.fire()
    waiting = await world.pending()
    world.clock.advance(timedelta(minutes=2, seconds=30))

    async def reminded() -> bool:
        await world.manager.idle()
        return bool(world.reminders())

    await until(reminded, "the channel is reminded")
    await world.manager.stop()
    await world.cron.close(grace=0.05)  # the waiting turn is cut, its approval expires
    # the reminder is kept once on the record: a second one cannot land, here or elsewhere
    channel = RecordingChannel("mine", carries_approvals=True)
    again, manager, _ = await make_world(make_cron, clock, world.archive, channel)
    try:
        assert await again.store.approvals.mark_reminded(waiting.id, clock.now()) is None
        clock.advance(timedelta(minutes=10))
        await wait_settled(again.engine, busy_ok=True)
        await manager.idle()
        assert [m for m in channel.got if m.kind == "approval_reminder"] == []
        ended = await again.approvals.get(waiting.id)
        assert ended.state is ApprovalState.EXPIRED
        assert ended.reminded_at == NINE + timedelta(minutes=2, seconds=30)
        assert world.reminders() == [f"apm.{waiting.id}"]
    finally:
        await manager.stop()


async def test_grants_through_the_library(world: World) -> None:
    job_id = await world.job()
    made = await world.cron.approvals.grant(
        job_id, tool="archive_logs", args={"name": "build.*"}, expires_at=NINE, by="ana"
    )
    assert [g.id for g in await world.cron.approvals.grants(job_id)] == [made.id]
    run = await world.fire()  # at NINE: the grant has just expired
    waiting = await world.pending()
    assert waiting.grant_id is None
    await world.cron.approvals.decide(waiting.id, "deny", by="ana")
    await world.cron.runs.wait(run.id, 2)
    later = await world.cron.approvals.grant(
        job_id,
        tool="archive_logs",
        args={"name": "build.*"},
        expires_at=NINE + timedelta(days=2),
        by="ana",
    )
    world.clock.set(NINE + timedelta(days=1))
    await wait_settled(world.cron.engine, busy_ok=True)
    runs = await world.cron.runs.list(job_id)
    second = next(r for r in runs if r.id != run.id)
    done = await world.cron.runs.wait(second.id, 2)
    assert done.state is RunState.SUCCEEDED, done.error
    assert (world.archive / "build.log").exists()
    records = await world.cron.approvals.list(KEY, pending_only=False)
    assert [(r.state, r.grant_id) for r in records] == [
        (ApprovalState.DENIED, None),
        (ApprovalState.APPROVED, later.id),
    ]
    await world.cron.approvals.revoke(job_id, later.id)
    assert await world.cron.approvals.grants(job_id) == [made]
    # a job's deletion takes its grants with it
    await world.cron.jobs.delete(job_id)
    assert (await world.api.get(f"/api/jobs/{job_id}/grants")).status_code == 404
