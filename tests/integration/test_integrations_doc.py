"""docs/integrations.md, run as written: every python block of the page is a recipe, loaded as a
module of its own and driven against a real AgentCron on SQLite; each test checks what the
recipe is there to show.
"""

from __future__ import annotations

import types
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from agentcron import AgentCron
from agentcron.testing import FakeClock, wait_settled
from agentcron.tokens import new_runner_secret
from tests.conftest import CronFactory
from tests.helpers.doc_code import loaded_blocks, python_blocks
from tests.helpers.ws import listening

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def recipes() -> dict[str, str]:
    return python_blocks(PAGE, "recipe")


@pytest.fixture
def load() -> Iterator[Callable[[str], types.ModuleType]]:
    """Runs one recipe's code as a module (registered while the test runs)."""
    with loaded_blocks(PAGE, "recipe") as run:
        yield run


def test_every_recipe_is_tested() -> None:
    tested = {"pydantic-ai", "langgraph"}
    assert set(recipes()) == tested


class Scripted:
    """A model for the recipe's agent: asked for the weather, it calls the `forecast` tool and
    answers with what it returned; otherwise it says how many messages it was given.
    """

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []

    async def __call__(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        self.seen.append(list(messages))
        last = messages[-1]
        returned = (
            [p for p in last.parts if isinstance(p, ToolReturnPart)]
            if isinstance(last, ModelRequest)
            else []
        )
        if returned:
            yield f"Forecast: {returned[0].content}"
            return
        prompt = str(last.parts[-1].content) if isinstance(last, ModelRequest) else ""
        if "weather" in prompt or "forecast" in prompt:
            assert [t.name for t in info.function_tools] == ["forecast"]
            yield {0: DeltaToolCall(name="forecast", json_args='{"city": "Berlin"}')}
            return
        yield f"I was given {len(messages)} messages."


async def test_a_pydantic_ai_agent_runs_chat_turns_and_fires_on_the_sessions_history(
    load: Callable[[str], types.ModuleType], tmp_path: Path
) -> None:
    recipe = load("pydantic-ai")
    model = Scripted()
    clock = FakeClock(datetime(2026, 1, 5, 6, 59, tzinfo=UTC))
    runner = recipe.PydanticAIRunner(recipe.team, FunctionModel(stream_function=model))
    async with AgentCron(db=str(tmp_path / "app.db"), runner=runner, clock=clock) as cron:
        await cron.sessions.create("api:team")
        job = await cron.jobs.create(
            name="morning forecast",
            when="every day at 7",
            message="Tell the team tomorrow's weather in Berlin.",
            session_key="api:team",
        )
        clock.advance(timedelta(minutes=1))
        await wait_settled(cron.engine)
        (run,) = await cron.runs.list(job.id)
        assert run.state.value == "succeeded", run
        turn = await cron.sessions.send("api:team", "thanks! anything else?")
        done = await cron.sessions.wait_turn(turn.id, 30)
        assert done.state.value == "succeeded", done
        transcript = [(m.role, m.content) for m in await cron.sessions.messages("api:team")]
    assert transcript[-3] == ("assistant", "Forecast: Berlin: sunny, 21 °C")
    # the chat turn's agent got the scheduled turn as history: its trigger and its reply
    assert transcript[-1] == ("assistant", "I was given 3 messages.")
    assert any(isinstance(p, ToolCallPart) for m in model.seen[1] for p in m.parts)
    assert done.usage is not None
    assert done.usage["input_tokens"] > 0


async def test_a_langgraph_graph_answers_the_http_runner_for_chat_turns_and_fires(
    load: Callable[[str], types.ModuleType],
    make_cron: CronFactory,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = new_runner_secret()
    monkeypatch.setenv("AGENTCRON_RUNNER_SECRET", secret)
    recipe = load("langgraph")
    async with listening(recipe.app) as port:
        url = f"http://127.0.0.1:{port}/turn"
        cron = await make_cron(runner=None, runner_url=url, runner_secret=secret)
        await cron.sessions.create("api:team")
        first = await cron.sessions.send("api:team", "the deploy is at noon")
        assert (await cron.sessions.wait_turn(first.id, 30)).state.value == "succeeded"
        job = await cron.jobs.create(
            name="standup", when="in 1 minute", message="what is planned?", session_key="api:team"
        )
        clock.advance(timedelta(minutes=1))
        await wait_settled(cron.engine)
        (run,) = await cron.runs.list(job.id)
        assert run.state.value == "succeeded", run
        transcript = [(m.role, m.content) for m in await cron.sessions.messages("api:team")]
        # a forged request is refused by the recipe's check of the signature
        async with httpx.AsyncClient() as client:
            forged = await client.post(url, content=b"{}", headers={"webhook-id": "x"})
    assert transcript[1] == ("assistant", "0 earlier messages; you said: the deploy is at noon")
    # the fire's request carried the session's history: the graph read the earlier message
    assert transcript[-1] == ("assistant", "[standup] 1 earlier messages")
    assert forged.status_code == 401
