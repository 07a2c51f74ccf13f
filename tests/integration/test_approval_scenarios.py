"""Scenarios of a scheduled turn whose tool needs a person's approval, on the fake clock with
the offline model and the REST API: approved (the tool runs, the closure shows its result),
denied (the model is told who denied it, the tool never runs) and timed out.
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
from agentcron.agent.runner import TurnSource
from agentcron.app import AgentCron
from agentcron.domain.events import ApprovalDecided, ApprovalRequested, Event, ToolCalled
from agentcron.domain.runs import Run
from agentcron.domain.sessions import Message
from agentcron.domain.states import RunState
from agentcron.server import create_app
from agentcron.server.events_json import event_json
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import T0, CronFactory

KEY = "websocket:ops"
AUTH = {"Authorization": "Bearer t"}
NINE = T0.replace(hour=9) + timedelta(days=1)  # the first "every day at 9" after T0


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
    events: list[dict[str, Any]]

    async def fire(self) -> Run:
        """Create the daily job through the API and move the clock to its first fire."""
        body = {
            "session_key": KEY,
            "name": "nightly logs",
            "message": "use archive_logs with name=build.log",
            "when": "every day at 9",
        }
        created = await self.api.post("/api/jobs", json=body)
        assert created.status_code == 201, created.text
        self.clock.set(NINE)
        await wait_settled(self.cron.engine, busy_ok=True)
        (run,) = await self.cron.runs.list(created.json()["id"])
        return run

    async def requested(self) -> dict[str, Any]:
        """The one pending approval, as the API lists it (the turn waits for it)."""
        for _ in range(200):
            listed = await self.api.get("/api/approvals", params={"session_key": KEY})
            assert listed.status_code == 200, listed.text
            if listed.json()["approvals"]:
                (row,) = listed.json()["approvals"]
                return dict(row)
            await wait_settled(self.cron.engine, busy_ok=True)
        raise AssertionError("no approval was requested")

    async def ended(self, run: Run) -> tuple[Run, Message, Message]:
        """The run once its turn ended, with the turn's tool entry and its closing message."""
        done = await self.cron.runs.wait(run.id, 2)
        assert done.state is RunState.SUCCEEDED, done.error
        await wait_settled(self.cron.engine, busy_ok=True)
        entries = await self.cron.sessions.messages(KEY)
        (tool,) = [m for m in entries if m.role == "tool"]
        closing = next(m for m in entries if m.id == done.message_id)
        return done, tool, closing


@pytest.fixture
async def world(make_cron: CronFactory, clock: FakeClock, tmp_path: Path) -> AsyncIterator[World]:
    archive = tmp_path / "archive"
    archive.mkdir()
    cron = await make_cron(  # the default approval timeout: 5 minutes
        runner=None,
        model=OfflineModel(0),
        tools=[UserTool(archiver(archive), requires_approval=True)],
    )
    await cron.sessions.create(KEY)
    events: list[dict[str, Any]] = []

    def keep(event: Event) -> None:
        events.append(event_json(event))

    cron.subscribe(keep, types=[ApprovalRequested, ApprovalDecided, ToolCalled])
    transport = httpx.ASGITransport(app=create_app(cron, token="t"))
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=AUTH) as api:
        yield World(cron, api, clock, archive, events)


async def test_a_scheduled_turn_waits_for_approval_and_the_tool_runs_once_approved(
    world: World,
) -> None:
    run = await world.fire()
    row = await world.requested()
    assert (row["tool"], row["args"], row["state"]) == (
        "archive_logs",
        {"name": "build.log"},
        "pending",
    )
    (turn,) = await world.cron.sessions.turns(KEY)
    assert (row["turn_id"], turn.source) == (turn.id, TurnSource.AUTOMATION)
    assert row["requested_at"].startswith("2026-11-23T09:00")  # the fake clock's time
    (requested,) = world.events
    assert requested["type"] == "approval_requested"
    assert (requested["session_key"], requested["approval_id"]) == (KEY, row["id"])
    # while it waits: the turn runs, holds no slot, and nothing was archived
    assert (await world.cron.runs.get(run.id)).state is RunState.RUNNING
    assert world.cron.status().awaiting_approval == 1
    metrics = (await world.api.get("/metrics")).text
    assert 'agentcron_queue_depth{queue="awaiting_approval"} 1.0' in metrics
    assert "agentcron_turns_in_runner 0.0" in metrics
    assert list(world.archive.iterdir()) == []

    decided = await world.api.post(f"/api/approvals/{row['id']}", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    assert (decided.json()["state"], decided.json()["decided_by"]) == ("approved", "api")
    _, tool, closing = await world.ended(run)
    assert (world.archive / "build.log").read_text() == "archived\n"  # the real side effect
    assert (tool.content, tool.meta["ok"]) == ("archived build.log", True)
    assert closing.content == "(offline model) Done: archived build.log"
    assert closing.meta["automation_run_id"] == run.id
    assert [e["type"] for e in world.events] == [
        "approval_requested",
        "approval_decided",
        "tool_call",
    ]
    assert world.events[1]["state"] == "approved"
    assert world.cron.status().awaiting_approval == 0


async def test_a_scheduled_turn_whose_call_is_denied_goes_on_without_it(world: World) -> None:
    run = await world.fire()
    row = await world.requested()
    denied = await world.api.post(
        f"/api/approvals/{row['id']}", json={"decision": "deny", "by": "ana"}
    )
    assert denied.status_code == 200, denied.text
    _, tool, closing = await world.ended(run)
    assert list(world.archive.iterdir()) == []  # the tool never ran
    assert (tool.content, tool.meta["ok"]) == ("Denied by ana.", False)
    assert closing.content == "(offline model) That did not work: Denied by ana."
    assert [(e["type"], e.get("state")) for e in world.events[:2]] == [
        ("approval_requested", None),
        ("approval_decided", "denied"),
    ]
    late = await world.api.post(f"/api/approvals/{row['id']}", json={"decision": "approve"})
    assert late.status_code == 409


async def test_a_scheduled_turn_whose_approval_times_out_is_told_so(world: World) -> None:
    run = await world.fire()
    row = await world.requested()
    # expires_at is on the fake clock: the request's time plus the 5-minute approval timeout
    assert row["expires_at"].startswith("2026-11-23T09:05:00")
    world.clock.advance(timedelta(minutes=4, seconds=59))  # nobody answers ...
    await wait_settled(world.cron.engine, busy_ok=True)
    assert (await world.cron.runs.get(run.id)).state is RunState.RUNNING  # ... it still waits
    assert [e["type"] for e in world.events] == ["approval_requested"]
    world.clock.advance(timedelta(seconds=1))  # ... and the clock reaches its expiry
    _, tool, closing = await world.ended(run)
    assert list(world.archive.iterdir()) == []
    timed_out = "Denied: timed out waiting for a person's approval."
    assert (tool.content, tool.meta["ok"]) == (timed_out, False)
    assert closing.content == f"(offline model) That did not work: {timed_out}"
    decided = world.events[1]
    assert (decided["type"], decided["state"], decided["decided_by"]) == (
        "approval_decided",
        "expired",
        "timeout",
    )
    gone = await world.cron.approvals.get(row["id"])
    assert gone.decided_at == NINE + timedelta(minutes=5)  # on the engine's clock
    late = await world.api.post(f"/api/approvals/{row['id']}", json={"decision": "approve"})
    assert late.status_code == 409
    listed = await world.api.get("/api/approvals", params={"session_key": KEY})
    assert listed.json() == {"approvals": [], "next_cursor": None}
