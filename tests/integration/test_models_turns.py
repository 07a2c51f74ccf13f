"""The built-in runner on a real OpenAI-compatible server and on the Anthropic Messages API (a
fake on loopback, `tests.helpers.fake_llm`): a message schedules a job through the `cron` tool,
the turn streams to a WebSocket client with its thinking and tool events, usage and cost land on
the turn, and the job's fire runs a turn on the same server with the session's history.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest

from agentcron.agent.builtin import BuiltinRunner
from agentcron.agent.runner import HistoryEntry
from agentcron.app import AgentCron
from agentcron.config import Settings
from agentcron.domain.states import RunState
from agentcron.schedule import AtSpec
from agentcron.server import create_app
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import T0, CronFactory
from tests.helpers.fake_llm import INPUT_TOKENS, OUTPUT_TOKENS, FakeLLM, Recorded, fake_llm
from tests.helpers.ws import TOKEN, listening, login, until, wait_for

KEY = "websocket:models"
PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
# api -> (AGENTCRON_MODEL, what AGENTCRON_BASE_URL adds to the server's root, the priced id)
MODELS = {
    "openai": ("fake-llama", "/v1", "openai:fake-llama"),
    "anthropic": ("anthropic:claude-fake", "", "anthropic:claude-fake"),
}


@pytest.fixture(params=sorted(MODELS))
def llm(request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeLLM]]:
    with fake_llm() as fake:
        yield request.param, fake


def settings_for(api: str, fake: FakeLLM) -> Settings:
    """The settings `agentcron serve` would read from the environment for this server."""
    model, suffix, _ = MODELS[api]
    env = {"AGENTCRON_MODEL": model, "AGENTCRON_BASE_URL": fake.url + suffix,
           "AGENTCRON_API_KEY": "sk-fake-key"}  # fmt: skip
    return Settings.load(None, env)


@asynccontextmanager
async def serving(cron: AgentCron) -> AsyncIterator[str]:
    async with listening(create_app(cron, token=TOKEN)) as port:
        yield f"ws://127.0.0.1:{port}/api/ws"


def tool_names(request: Recorded) -> set[str]:
    """The tools a request offered the model (either API's shape)."""
    tools = request.body.get("tools", [])
    if request.api == "openai":
        return {t["function"]["name"] for t in tools}
    return {t["name"] for t in tools}


def cron_schema(request: Recorded) -> dict[str, Any]:
    (tool,) = [t for t in request.body["tools"] if (t.get("function") or t).get("name") == "cron"]
    schema: dict[str, Any] = (
        tool["function"]["parameters"] if request.api == "openai" else (tool["input_schema"])
    )
    return schema


def tool_result_sent(request: Recorded) -> str:
    """The `cron` call's result as the request gave it back to the model."""
    last = request.body["messages"][-1]
    if request.api == "openai":
        assert last["role"] == "tool"
        assert last["tool_call_id"] == "call_fake_1"
        return str(last["content"])
    (block,) = [b for b in last["content"] if b["type"] == "tool_result"]
    assert block["tool_use_id"] == "toolu_fake_1"
    content = block["content"]
    return content if isinstance(content, str) else "".join(c["text"] for c in content)


def texts_sent(request: Recorded) -> str:
    """Every message text of a request, one blob (to look for the session's history)."""
    return json.dumps(request.body["messages"], ensure_ascii=False)


async def test_a_message_schedules_a_job_whose_fire_runs_on_the_same_model(
    make_cron: CronFactory, clock: FakeClock, llm: tuple[str, FakeLLM]
) -> None:
    api, fake = llm
    model_id = MODELS[api][2]
    settings = settings_for(api, fake)
    cron = await make_cron(
        runner=None, config=settings, agent=settings.agent(), prices={model_id: PRICE}
    )
    await cron.sessions.create(KEY, tz="Europe/Berlin")
    async with serving(cron) as url:
        ws = await login(url)
        await ws.send(json.dumps({"type": "subscribe", "session_key": KEY}))
        await until(ws, lambda f: f["type"] == "subscribed")
        sentence = "remind me in 1 minute to stretch your legs"
        await ws.send(json.dumps({"type": "message", "session_key": KEY, "content": sentence}))
        frames = await until(ws, lambda f: f["type"] == "session_sync")
        kinds = [f["type"] for f in frames]
        thinking = "".join(f["text"] for f in frames if f["type"] == "thinking_delta")
        assert thinking == "The user wants a reminder, so I schedule it with the cron tool."
        assert kinds.count("thinking_delta") > 1  # streamed in pieces, not at the end
        (started,) = [f for f in frames if f["type"] == "tool_started"]
        args = {"action": "add", "name": "stretch", "when": "in 1 minute",
                "message": "stretch your legs"}  # fmt: skip
        assert (started["name"], started["args"]) == ("cron", args)
        (called,) = [f for f in frames if f["type"] == "tool_call"]
        assert called["result"].startswith("Scheduled “stretch”")
        assert kinds.index("thinking_delta") < kinds.index("tool_started")
        text = "".join(f["text"] for f in frames if f["type"] == "text_delta")
        assert text == f"Scheduling it now.Done: {called['result'].splitlines()[0]}"

        (job,) = await cron.jobs.for_session(KEY)
        assert (job.name, job.message) == ("stretch", "stretch your legs")
        assert job.spec == AtSpec(at=T0 + timedelta(minutes=1), tz="Europe/Berlin")
        (turn,) = await cron.sessions.turns(KEY)
        cost = (2 * INPUT_TOKENS * 1.0 + 2 * OUTPUT_TOKENS * 2.0) / 1_000_000
        assert turn.usage is not None
        assert turn.usage["model"] == model_id
        assert (turn.usage["input_tokens"], turn.usage["output_tokens"]) == (
            2 * INPUT_TOKENS, 2 * OUTPUT_TOKENS)  # fmt: skip
        assert turn.usage["cost_usd"] == pytest.approx(cost)

        first, second = fake.of(api)
        assert {"cron", "schedule_recall", "manage_recall"} <= tool_names(first)
        schema = cron_schema(first)
        assert schema["properties"]["action"]["enum"] == ["add", "list", "update", "pause",
                                                          "resume", "remove", "reschedule"]  # fmt: skip
        assert {"when", "message", "name"} <= set(schema["properties"])
        assert first.body["stream"] is True
        assert sentence in texts_sent(first)
        assert tool_result_sent(second) == called["result"]
        assert first.headers["authorization"] == "Bearer sk-fake-key"  # AGENTCRON_API_KEY
        if api == "openai":
            assert first.body["stream_options"] == {"include_usage": True}
        else:
            assert "anthropic-version" in first.headers

        clock.advance(timedelta(minutes=1))
        fired = await until(ws, lambda f: f.get("action") == "settled")
        assert ("stream_start", "automation") in [(f["type"], f.get("source")) for f in fired]
        reply = "".join(f["text"] for f in fired if f["type"] == "text_delta")
        assert reply.startswith('Handled: [scheduled] This turn was started by the scheduled '
                                'automation "stretch"')  # fmt: skip
        await ws.close()
    await wait_settled(cron.engine)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    fire_request = fake.of(api)[-1]
    assert len(fake.of(api)) == 3
    history = texts_sent(fire_request)
    assert sentence in history  # the session's earlier turn went with it
    assert "Done: Scheduled “stretch”" in history  # its reply, and its tool call:
    assert "call_fake_1" in history or "toolu_fake_1" in history
    assert "stretch your legs" in history
    total = await cron.sessions.usage(KEY)
    assert total["input_tokens"] == 3 * INPUT_TOKENS
    assert total["cost_usd"] == pytest.approx(cost + (INPUT_TOKENS + 2 * OUTPUT_TOKENS) / 1e6)
    assert fake.open_connections() > 0  # the model's client keeps its connection for the next turn
    await cron.close()
    await wait_for(lambda: fake.open_connections() == 0)  # closing agentcron closed it


async def test_a_summary_is_one_non_streamed_request(llm: tuple[str, FakeLLM]) -> None:
    api, fake = llm
    settings = settings_for(api, fake)
    runner = BuiltinRunner(settings=settings.agent(), provider=settings.provider())
    entries = [HistoryEntry("user", "check the build"), HistoryEntry("assistant", "it is green")]
    try:
        summary = await runner.summarize(entries, previous=None, max_tokens=100)
        assert fake.open_connections() == 1
    finally:
        await runner.aclose()
    await wait_for(lambda: fake.open_connections() == 0)  # no socket left open
    assert summary == "Handled: Conversation (2 entries, oldest first):"
    (request,) = fake.of(api)
    assert not request.body.get("stream")
    assert "user: check the build" in texts_sent(request)
    assert request.body.get("max_tokens", request.body.get("max_completion_tokens")) == 100
