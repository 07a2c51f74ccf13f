"""A job's context and tools: what history its turns get (continue, summary, fresh; its own
history budget) and the only tools the built-in agent offers in them; an unknown tool name is
refused at create (the library's InvalidInputError, the API's 422).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from types import SimpleNamespace

import httpx
import pytest
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentcron.agent.runner import TurnInput
from agentcron.agent.tools import ToolDeps
from agentcron.agent.tools import cron as cron_tool
from agentcron.app import AgentCron
from agentcron.domain.budgets import ContextMode
from agentcron.domain.jobs import NewJob
from agentcron.domain.sessions import Role
from agentcron.errors import InvalidInputError
from agentcron.schedule import parse_when
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import CronFactory
from tests.integration.test_budgets import Metered

KEY = "api:context"
TOKEN = "t"


async def talk(cron: AgentCron) -> None:
    """A conversation before the fires: a summary of older talk, then two entries."""
    store = cron.store.sessions
    now = cron.clock.now()
    await cron.sessions.create(KEY)
    await store.append_message(KEY, Role.SUMMARY, "earlier: the user likes tea", now, {})
    await store.append_message(KEY, Role.USER, "remind me of the kettle", now, {})
    await store.append_message(KEY, Role.ASSISTANT, "I will", now, {})


async def fire_each(cron: AgentCron, clock: FakeClock, n: int) -> None:
    for _ in range(n):
        clock.advance(timedelta(minutes=1))
        await wait_settled(cron.engine)


async def test_context_decides_the_history_a_fire_gets(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    metered = Metered()
    cron = await make_cron(runner=metered)
    await talk(cron)
    for i, mode in enumerate(ContextMode):
        await cron.jobs.create(
            name=mode.value, when=f"in {i + 1}m", message="kettle?", session_key=KEY,
            context=mode,
        )  # fmt: skip
    await fire_each(cron, clock, 3)
    got = {t.trigger.job_name: t.history for t in metered.turns if t.trigger is not None}
    assert [h.content for h in got["continue"][:3]] == [
        "earlier: the user likes tea",
        "remind me of the kettle",
        "I will",
    ]
    assert [(h.role, h.content) for h in got["summary"]] == [
        ("summary", "earlier: the user likes tea")
    ]
    assert list(got["fresh"]) == []


async def test_a_jobs_history_budget_caps_its_history(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    metered = Metered()
    cron = await make_cron(runner=metered)
    await talk(cron)
    await cron.jobs.create(
        name="tight", when="in 1m", message="kettle?", session_key=KEY, history_tokens=14
    )
    await fire_each(cron, clock, 1)
    (turn,) = metered.turns
    # Past its 14 tokens, the newest entries that fit half of it are kept (4 chars a token).
    assert [h.content for h in turn.history] == ["I will"]


def offered_tools(seen: list[AgentInfo]) -> FunctionModel:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        seen.append(info)
        yield "ok"

    return FunctionModel(stream_function=stream, model_name="house")


async def test_the_allow_list_is_all_the_model_is_offered(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    seen: list[AgentInfo] = []
    cron = await make_cron(runner=None, model=offered_tools(seen))
    await cron.sessions.create(KEY)
    only = await cron.jobs.create(
        name="only", when="in 1m", message="go", session_key=KEY, tools=["cron"]
    )
    assert only.tools == ("cron",)
    await cron.jobs.create(name="all", when="in 2m", message="go", session_key=KEY)
    await fire_each(cron, clock, 2)
    first, second = ([t.name for t in info.function_tools] for info in seen)
    assert first == ["cron"]
    assert sorted(second) == ["cron", "manage_recall", "schedule_recall"]


async def test_an_unknown_tool_is_refused_at_create(make_cron: CronFactory) -> None:
    cron = await make_cron(runner=None, model=offered_tools([]))
    await cron.sessions.create(KEY)
    with pytest.raises(InvalidInputError, match="no tool named shell"):
        await cron.jobs.create(
            name="x", when="in 1m", message="go", session_key=KEY, tools=["cron", "shell"]
        )
    app = create_app(cron, token=TOKEN, hook_token="hook")
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://t", headers=headers) as api:
        body = {"session_key": KEY, "name": "x", "message": "go", "when": "every day at 9"}
        refused = await api.post("/api/jobs", json=body | {"tools": ["shell"]})
        assert refused.status_code == 422, refused.text
        assert "no tool named shell" in refused.text
        bad = await api.post("/api/jobs", json=body | {"tools": ["rm -rf"]})
        assert bad.status_code == 422, bad.text
        made = await api.post("/api/jobs", json=body | {"tools": ["cron"], "context": "fresh"})
        assert made.status_code == 201, made.text
        job = made.json()
        assert (job["tools"], job["context"]) == (["cron"], "fresh")
        cleared = await api.patch(f"/api/jobs/{job['id']}", json={"tools": None})
        assert cleared.json()["tools"] is None


async def test_the_agent_s_cron_tool_sets_a_context(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await make_cron()
    deps = ToolDeps(jobs=cron.jobs, now=clock.now(), session_key=KEY)
    text = await cron_tool(
        SimpleNamespace(deps=deps), "add", name="beat", when="every 2h", message="ping",
        context="fresh",
    )  # fmt: skip
    assert text.startswith("Scheduled “beat”")
    (job,) = await cron.jobs.list()
    assert (job.context, job.policy.budget) == (ContextMode.FRESH, None)


async def test_a_delivery_job_s_isolated_runs_take_its_context_and_tools(
    make_cron: CronFactory,
) -> None:
    metered = Metered()
    cron = await make_cron(runner=metered)
    made = await cron.jobs.create_many([
        NewJob(
            name=mode.value, spec=parse_when("every day at 9", cron.clock.now(), "UTC"),
            message="report", deliver=True, channel="mine", to="1", context=mode,
            tools=("schedule_recall",) if mode is ContextMode.FRESH else None,
        )
        for mode in (ContextMode.CONTINUE, ContextMode.FRESH)
    ])  # fmt: skip
    for _ in range(2):  # twice each: the second run of a job that remembers has history
        for job in made:
            await cron.runs.run_now(job.id)
            await wait_settled(cron.engine)
    got: dict[str, list[TurnInput]] = {}
    for turn in metered.turns:
        assert turn.trigger is not None
        got.setdefault(turn.trigger.job_name, []).append(turn)
    assert [len(t.history) > 0 for t in got["continue"]] == [False, True]
    assert [t.history for t in got["fresh"]] == [(), ()]
    assert [t.tools for t in got["fresh"]] == [("schedule_recall",)] * 2
    assert [t.tools for t in got["continue"]] == [None, None]
