"""Library tools on the built-in agent: called from a sentence, recorded, gated by policy and
approvals (the offline model, a real AgentCron on SQLite).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic_ai import Tool
from typer.testing import CliRunner

from agentcron.agent.gate import UserTool, build_toolset
from agentcron.agent.offline import OfflineModel
from agentcron.agent.runner import ToolRecord
from agentcron.agent.tool_entries import tool_entry
from agentcron.app import AgentCron
from agentcron.cli import app as cli_app
from agentcron.domain.approvals import DEFAULT_APPROVAL_TIMEOUT, ApprovalState
from agentcron.domain.events import ApprovalDecided, ApprovalRequested, Event, ToolCalled
from agentcron.domain.states import RunState, TurnState
from agentcron.server import create_app
from agentcron.server.events_json import event_json
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import CronFactory

KEY = "websocket:chat-1"
calls: list[dict[str, Any]] = []


def lookup(q: str) -> str:
    """Look a word up.

    Args:
        q: the word
    """
    calls.append({"lookup": q})
    return f"found {q}"


def delete_file(path: str) -> str:
    """Delete a file."""
    calls.append({"delete_file": path})
    return f"deleted {path}"


def pay(amount: int) -> str:
    """Pay an amount."""
    calls.append({"pay": amount})
    return f"paid {amount}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    calls.clear()


async def offline(make_cron: CronFactory, **kw: Any) -> AgentCron:
    kw.setdefault("model", OfflineModel(0))
    return await make_cron(runner=None, **kw)


async def send(cron: AgentCron, text: str) -> str:
    turn = await cron.sessions.send(KEY, text)
    return turn.id


async def reply_of(cron: AgentCron, turn_id: str) -> tuple[str, Any]:
    await wait_settled(cron.engine)
    done = await cron.sessions.turn(turn_id)
    assert done.state is TurnState.SUCCEEDED, done.error
    messages = await cron.sessions.messages(KEY)
    (call,) = [m for m in messages if m.role == "tool" and m.meta.get("turn_id") == turn_id]
    reply = next(m for m in messages if m.id == done.reply_message_id)
    return reply.content, call


async def pending_approval(cron: AgentCron) -> Any:
    for _ in range(1000):
        found = await cron.approvals.list(KEY)
        if found:
            return found[0]
        await asyncio.sleep(0.005)
    raise AssertionError("no approval was requested")


async def test_a_plain_function_tool_is_called_from_a_sentence_and_recorded(
    make_cron: CronFactory,
) -> None:
    cron = await offline(make_cron, tools=[lookup])
    events: list[Event] = []
    cron.subscribe(events.append)
    reply, call = await reply_of(cron, await send(cron, "use lookup with q=tide"))
    assert calls == [{"lookup": "tide"}]
    assert reply == "(offline model) Done: found tide"
    assert (call.meta["name"], call.meta["args"], call.meta["ok"]) == (
        "lookup",
        {"q": "tide"},
        True,
    )
    assert call.content == "found tide"
    assert isinstance(call.meta["duration_ms"], int)
    assert call.meta["duration_ms"] >= 0
    assert [e.name for e in events if isinstance(e, ToolCalled)] == ["lookup"]  # type: ignore[attr-defined]


async def test_a_denied_tool_never_runs_and_the_model_is_told(make_cron: CronFactory) -> None:
    cron = await offline(make_cron, tools=[delete_file], tool_policy={"delete_file": "deny"})
    reply, call = await reply_of(cron, await send(cron, "call delete_file with path=/etc"))
    assert calls == []
    assert call.content.startswith("Denied by policy")
    assert call.meta["ok"] is False
    assert reply.startswith("(offline model) That did not work: Denied by policy")


async def test_a_scheduling_tool_can_be_denied_by_policy_too(make_cron: CronFactory) -> None:
    cron = await offline(make_cron, tool_policy={"cron": "deny"})
    _, call = await reply_of(cron, await send(cron, "remind me in 10 minutes to stretch"))
    assert call.content.startswith("Denied by policy")
    assert await cron.jobs.list() == []


async def test_an_approved_call_runs_after_a_person_approves(make_cron: CronFactory) -> None:
    cron = await offline(make_cron, tools=[Tool(delete_file, requires_approval=True)])
    seen: list[dict[str, Any]] = []
    cron.subscribe(lambda e: seen.append(event_json(e)), types=[ApprovalRequested, ApprovalDecided])
    turn_id = await send(cron, "call delete_file with path=/tmp/x")
    approval = await pending_approval(cron)
    assert (approval.tool, approval.args, approval.turn_id) == (
        "delete_file",
        {"path": "/tmp/x"},
        turn_id,
    )
    assert calls == []
    await cron.approvals.decide(approval.id, "approve", by="ana")
    reply, call = await reply_of(cron, turn_id)
    assert calls == [{"delete_file": "/tmp/x"}]
    assert call.content == "deleted /tmp/x"
    assert call.meta["ok"] is True
    assert reply == "(offline model) Done: deleted /tmp/x"
    requested, decided = seen
    assert requested["type"] == "approval_requested"
    assert (requested["session_key"], requested["approval_id"]) == (KEY, approval.id)
    assert (requested["tool"], requested["args"]) == ("delete_file", {"path": "/tmp/x"})
    assert decided["type"] == "approval_decided"
    assert (decided["state"], decided["decided_by"]) == ("approved", "ana")


async def test_a_person_denies_and_the_turn_goes_on(make_cron: CronFactory) -> None:
    cron = await offline(make_cron, tools=[UserTool(delete_file, requires_approval=True)])
    turn_id = await send(cron, "call delete_file with path=/tmp/x")
    approval = await pending_approval(cron)
    await cron.approvals.decide(approval.id, "deny", by="ana")
    reply, call = await reply_of(cron, turn_id)
    assert calls == []
    assert call.content == "Denied by ana."
    assert call.meta["ok"] is False
    assert (await cron.approvals.get(approval.id)).state is ApprovalState.DENIED
    assert "Denied by ana." in reply


async def test_an_unanswered_approval_times_out_as_a_denial(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(
        make_cron,
        tools=[UserTool(delete_file, requires_approval=True)],
        approval_timeout=timedelta(minutes=2),
    )
    turn_id = await send(cron, "call delete_file with path=/tmp/x")
    await pending_approval(cron)
    clock.advance(timedelta(minutes=2))  # the engine's clock passes its expiry
    _, call = await reply_of(cron, turn_id)
    assert calls == []
    assert call.content == "Denied: timed out waiting for a person's approval."
    (gone,) = await cron.approvals.list(KEY, pending_only=False)
    assert (gone.state, gone.decided_by) == (ApprovalState.EXPIRED, "timeout")


async def test_a_tool_may_wait_shorter_than_the_default(make_cron: CronFactory) -> None:
    quick = UserTool(delete_file, requires_approval=True, approval_timeout=timedelta(seconds=60))
    cron = await offline(make_cron, tools=[quick, UserTool(pay, requires_approval=True)])
    await send(cron, "call delete_file with path=/tmp/x")
    await send(cron, "use pay with amount=5")  # waits behind the first turn of this session
    first = await pending_approval(cron)
    assert first.expires_at - first.requested_at == timedelta(seconds=60)
    await cron.approvals.decide(first.id, "deny", by="ana")
    second = await pending_approval(cron)  # the next turn's call (the first one is decided)
    assert second.tool == "pay"
    assert second.expires_at - second.requested_at == DEFAULT_APPROVAL_TIMEOUT
    await cron.approvals.decide(second.id, "deny", by="ana")
    await wait_settled(cron.engine)
    assert calls == []


def test_per_tool_timeouts_of_the_toolset() -> None:
    quick = UserTool(delete_file, requires_approval=True, approval_timeout=timedelta(seconds=9))
    gated = build_toolset([quick, pay], timeouts={"pay": timedelta(hours=1)})
    assert gated.timeouts == {"delete_file": timedelta(seconds=9), "pay": timedelta(hours=1)}
    over = build_toolset([quick], timeouts={"delete_file": timedelta(seconds=1)})
    assert over.timeouts == {"delete_file": timedelta(seconds=1)}  # configuration wins
    with pytest.raises(ValueError, match="approval timeout of pay must be positive"):
        build_toolset([pay], timeouts={"pay": timedelta(0)})


async def test_a_per_call_rule_asks_only_for_risky_arguments(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    rule = UserTool(pay, requires_approval=lambda args: args["amount"] > 100)
    cron = await offline(make_cron, tools=[rule])
    _, small = await reply_of(cron, await send(cron, "use pay with amount=5"))
    assert small.content == "paid 5"
    assert await cron.approvals.list(pending_only=False) == []  # it asked nobody
    big_turn = await send(cron, "use pay with amount=500")
    await pending_approval(cron)
    clock.advance(DEFAULT_APPROVAL_TIMEOUT)
    _, big = await reply_of(cron, big_turn)
    assert big.content.startswith("Denied: timed out")
    assert calls == [{"pay": 5}]


async def test_tools_need_the_built_in_agent(make_cron: CronFactory) -> None:
    with pytest.raises(ValueError, match="built-in agent"):
        await make_cron(tools=[lookup])


def test_duration_reaches_the_transcript_entry_only_when_measured() -> None:
    assert "duration_ms" not in tool_entry(ToolRecord("c", "x", {}, "r"), "t").meta
    assert tool_entry(ToolRecord("c", "x", {}, "r", True, 12), "t").meta["duration_ms"] == 12


async def test_the_http_api_lists_and_decides_approvals(make_cron: CronFactory) -> None:
    cron = await offline(make_cron, tools=[UserTool(delete_file, requires_approval=True)])
    app = create_app(cron, token="t")
    transport = httpx.ASGITransport(app=app)
    auth = {"Authorization": "Bearer t"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=auth) as api:
        turn_id = await send(cron, "call delete_file with path=/tmp/x")
        approval = await pending_approval(cron)
        listed = await api.get("/api/approvals", params={"session_key": KEY})
        assert listed.status_code == 200
        (row,) = listed.json()["approvals"]
        assert (row["id"], row["tool"], row["state"], row["turn_id"]) == (
            approval.id,
            "delete_file",
            "pending",
            turn_id,
        )
        other = await api.get("/api/approvals", params={"session_key": "api:other"})
        assert other.json() == {"approvals": [], "next_cursor": None}
        bad = await api.post(f"/api/approvals/{approval.id}", json={"decision": "maybe"})
        assert bad.status_code == 422
        done = await api.post(f"/api/approvals/{approval.id}", json={"decision": "deny"})
        assert done.status_code == 200, done.text
        assert (done.json()["state"], done.json()["decided_by"]) == ("denied", "api")
        again = await api.post(f"/api/approvals/{approval.id}", json={"decision": "approve"})
        assert again.status_code == 409
        missing = await api.post("/api/approvals/nope", json={"decision": "approve"})
        assert missing.status_code == 404
        _, call = await reply_of(cron, turn_id)
        assert call.content == "Denied by api."
        kept = await api.get("/api/approvals", params={"all": "true"})
        assert [a["state"] for a in kept.json()["approvals"]] == ["denied"]
    assert calls == []


async def test_a_scheduled_turn_keeps_its_tool_calls_on_its_run_record(
    make_cron: CronFactory, clock: FakeClock, tmp_path: Path
) -> None:
    cron = await offline(make_cron, tools=[lookup, UserTool(delete_file, requires_approval=True)])
    sched = "api:sched"
    job = await cron.jobs.create(
        name="look", when="in 1m", message="use lookup with q=tide", session_key=sched
    )
    quiet = await cron.jobs.create(name="plain", when="in 2m", message="stretch", session_key=sched)
    clock.advance(timedelta(minutes=1))
    await wait_settled(cron.engine)
    (run,) = await cron.runs.list(job_id=job.id)
    assert run.state is RunState.SUCCEEDED
    assert calls == [{"lookup": "tide"}]
    (call,) = run.tool_calls or []
    assert (call["name"], call["args"], call["result"], call["ok"]) == (
        "lookup",
        {"q": "tide"},
        "found tide",
        True,
    )
    assert isinstance(call["duration_ms"], int)
    # the transcript's tool entry is the same call
    (entry,) = [m for m in await cron.sessions.messages(sched) if m.role == "tool"]
    assert entry.meta["call_id"] == call["call_id"]
    clock.advance(timedelta(minutes=1))
    await wait_settled(cron.engine)
    (plain,) = await cron.runs.list(job_id=quiet.id)
    assert plain.state is RunState.SUCCEEDED
    assert plain.tool_calls is None  # no calls: nothing stored

    app = create_app(cron, token="t")
    transport = httpx.ASGITransport(app=app)
    auth = {"Authorization": "Bearer t"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=auth) as api:
        one = (await api.get(f"/api/runs/{run.id}")).json()
        assert one["tool_calls"] == [call]
        listed = (await api.get(f"/api/sessions/{sched}/runs")).json()["runs"]
        assert {r["id"]: r["tool_calls"] for r in listed} == {run.id: [call], plain.id: None}
    await cron.close()
    db = str(tmp_path / "agentcron.db")
    shown = await asyncio.to_thread(
        CliRunner().invoke, cli_app, ["runs", "show", run.id, "--db", db]
    )
    assert shown.exit_code == 0, shown.output
    assert "tool calls (1)" in shown.stdout
    assert 'lookup({"q": "tide"}) -> found tide' in shown.stdout


async def test_a_denied_call_of_a_scheduled_turn_is_on_its_run_as_not_ok(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron, tools=[delete_file], tool_policy={"delete_file": "deny"})
    job = await cron.jobs.create(
        name="rm", when="in 1m", message="call delete_file with path=/etc", session_key="api:s"
    )
    clock.advance(timedelta(minutes=1))
    await wait_settled(cron.engine)
    (run,) = await cron.runs.list(job_id=job.id)
    (call,) = run.tool_calls or []
    assert (call["name"], call["ok"]) == ("delete_file", False)
    assert call["result"].startswith("Denied by policy")
    assert calls == []
