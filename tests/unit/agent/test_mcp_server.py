"""The scheduling tools as an MCP server: the agent's own schemas, validation and rules.

Driven by the official `mcp` client connected in-process, on a real AgentCron (SQLite); the
session binding comes from `AgentCron.session_tool_deps`, as the edges bind it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from agentcron.agent.mcp_server import scheduling_server
from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput, TurnSource
from agentcron.agent.tool_deps import ToolDeps
from agentcron.agent.tools import scheduling_tools
from agentcron.app import AgentCron
from agentcron.store.errors import SessionNotFoundError

KEY = "api:mcp"


def text(result: Any) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


class CallsIn:
    """A runner whose agent calls the scheduling tools over MCP during its turn, as an agent
    with agentcron as its MCP server does: it asks for a new automation every turn.
    """

    def __init__(self) -> None:
        self.cron: AgentCron | None = None
        self.said: dict[TurnSource, str] = {}
        self.done = asyncio.Event()

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        cron = self.cron
        if cron is None:
            raise RuntimeError("not wired")

        async def deps_for(_ctx: object) -> ToolDeps:
            return await cron.session_tool_deps(session.key)

        async with Client(scheduling_server(deps_for)) as client:
            added = await client.call_tool(
                "cron",
                {"action": "add", "name": f"from {turn.source}", "when": "in 1 hour",
                 "message": "x"},
            )  # fmt: skip
        self.said[turn.source] = text(added)
        if turn.source is TurnSource.AUTOMATION:
            self.done.set()
        return Outcome.succeeded("ok")


@pytest.fixture
async def cron(store_url: str) -> AsyncIterator[AgentCron]:
    async with AgentCron(url=store_url, runner=CallsIn()) as started:
        await started.sessions.create(KEY, tz="Europe/Berlin")
        yield started


async def test_the_tools_are_the_agents_with_their_schemas(cron: AgentCron) -> None:
    async def deps_for(_ctx: object) -> ToolDeps:
        return await cron.session_tool_deps(KEY)

    async with Client(scheduling_server(deps_for)) as client:
        listed = await client.list_tools()
    agent = {tool.name: tool.tool_def for tool in scheduling_tools()}
    assert {tool.name: tool.input_schema for tool in listed.tools} == {
        name: tool.parameters_json_schema for name, tool in agent.items()
    }
    assert {tool.name: tool.description for tool in listed.tools} == {
        name: tool.description for name, tool in agent.items()
    }


async def test_a_call_is_bound_to_its_session_and_read_in_its_zone(cron: AgentCron) -> None:
    async def deps_for(_ctx: object) -> ToolDeps:
        return await cron.session_tool_deps(KEY)

    async with Client(scheduling_server(deps_for)) as client:
        added = await client.call_tool(
            "cron", {"action": "add", "name": "tea", "when": "tomorrow at 9", "message": "tea"}
        )
        again = await client.call_tool(  # a retried call: the same job (idempotency key)
            "cron", {"action": "add", "name": "tea", "when": "tomorrow at 9", "message": "tea"}
        )
    assert not added.is_error, text(added)
    assert "09:00:00 (Europe/Berlin)" in text(added)
    assert text(added) == text(again)
    jobs = await cron.jobs.list(session_key=KEY)
    assert [(j.name, j.session_key) for j in jobs] == [("tea", KEY)]


async def test_bad_arguments_an_unknown_tool_and_an_unbound_call_are_errors(
    cron: AgentCron,
) -> None:
    async def gone(_ctx: object) -> ToolDeps:
        return await cron.session_tool_deps("api:nobody")

    async with Client(scheduling_server(gone)) as client:
        bad = await client.call_tool("cron", {"action": "explode"})
        unknown = await client.call_tool("rm", {})
        unbound = await client.call_tool("cron", {"action": "list"})
    assert bad.is_error
    assert "action" in text(bad)
    assert unknown.is_error
    assert "no tool 'rm'" in text(unknown)
    assert unbound.is_error
    assert "api:nobody" in text(unbound)
    with pytest.raises(SessionNotFoundError):
        await cron.session_tool_deps("api:nobody")


async def test_a_call_during_a_scheduled_turn_of_the_session_cannot_schedule(
    cron: AgentCron,
) -> None:
    runner = cron.runner
    assert isinstance(runner, CallsIn)
    runner.cron = cron
    outside = await cron.session_tool_deps(KEY)
    assert not outside.in_scheduled_turn
    assert outside.turn_id is None
    user = await cron.sessions.send(KEY, "remind me", create=False)
    await cron.sessions.wait_turn(user.id, 10)
    assert runner.said[TurnSource.USER].startswith("Scheduled “from user”"), runner.said
    (job,) = await cron.jobs.list(session_key=KEY)
    await cron.runs.run_now(job.id)  # its fire: a scheduled turn of the session
    await asyncio.wait_for(runner.done.wait(), 10)
    assert runner.said[TurnSource.AUTOMATION] == (
        "Error: automations cannot be created from inside a scheduled turn"
    )
    assert [j.name for j in await cron.jobs.list(session_key=KEY)] == ["from user"]


async def test_unified_a_web_chat_is_inside_the_scheduled_turn_holding_its_lane(
    store_url: str,
) -> None:
    """Unified mode: the shared automations' fires and every web chat share one lane (the
    lease of `unified:default`); a call bound to any web chat while a fire holds it (the fire
    runs in the chat last talked in) is inside it.
    """
    runner = CallsIn()
    async with AgentCron(url=store_url, runner=runner, unified_session=True) as cron:
        runner.cron = cron
        await cron.sessions.create("websocket:t2")  # another web chat, where the fire is not
        await cron.sessions.create("websocket:t1")
        user = await cron.sessions.send("websocket:t1", "remind me", create=False)
        await cron.sessions.wait_turn(user.id, 10)
        # Added from the web chat, bound to the shared automations' session.
        (job,) = await cron.jobs.list(session_key="unified:default")
        seen: list[bool] = []
        called = asyncio.Event()

        async def during(session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
            seen.append((await cron.session_tool_deps("websocket:t2")).in_scheduled_turn)
            called.set()
            return Outcome.succeeded("ok")

        runner.run_turn = during  # type: ignore[method-assign]
        await cron.runs.run_now(job.id)
        await asyncio.wait_for(called.wait(), 10)
    assert seen == [True]
