"""The agent's settings (seed 004: agent config): model settings, max steps, thinking events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingCalls,
    DeltaThinkingPart,
    FunctionModel,
)
from pydantic_ai.profiles import ModelProfile

from agentcron.agent.builtin import BuiltinRunner
from agentcron.agent.runner import OutcomeStatus, TurnInput, TurnSource
from agentcron.config import (
    DEFAULT_MAX_STEPS,
    AgentSettings,
    ConfigError,
    agent_settings_from_env,
)
from agentcron.domain.events import TextDelta, ThinkingDelta, runner_event
from agentcron.server.events_json import event_json
from tests.integration.test_builtin_runner import SESSION, Events

SEEN: list[AgentInfo] = []


def seeing_model() -> FunctionModel:
    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaThinkingCalls]:
        SEEN.append(info)
        yield {0: DeltaThinkingPart(content="Let me think. ")}
        yield {0: DeltaThinkingPart(content="The user wants a joke.")}
        yield "Here is a joke."

    # A model whose profile says it can think: pydantic-ai passes the unified `thinking` setting
    # on only to such models (as the request's `thinking` parameter).
    profile = ModelProfile(supports_thinking=True)
    return FunctionModel(stream_function=stream, model_name="seeing", profile=profile)


def turn(prompt: str) -> TurnInput:
    return TurnInput(turn_id="t1", source=TurnSource.USER, prompt=prompt)


async def test_the_settings_reach_the_model_and_thinking_streams_as_its_own_event() -> None:
    SEEN.clear()
    settings = AgentSettings(system_prompt="You are terse.", temperature=0.2, max_tokens=300,
                             thinking="high", max_steps=4)  # fmt: skip
    runner = BuiltinRunner(seeing_model(), settings=settings)
    assert runner.max_steps == 4
    events = Events()
    outcome = await runner.run_turn(SESSION, turn("tell me a joke"), events)
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.text == "Here is a joke."
    (info,) = SEEN
    assert info.model_settings is not None
    assert info.model_settings.get("temperature") == 0.2
    assert info.model_settings.get("max_tokens") == 300
    assert info.model_request_parameters.thinking == "high"
    assert info.instructions is not None
    assert info.instructions.startswith("You are terse.")
    kinds = [(e["type"], e["text"]) for e in events.events]
    assert kinds == [
        ("thinking_delta", "Let me think. "),
        ("thinking_delta", "The user wants a joke."),
        ("text_delta", "Here is a joke."),
    ]
    # ... a typed event of its own on the bus and the stream, never mixed into the reply
    typed = runner_event("api:a", "t1", events.events[0])
    assert isinstance(typed, ThinkingDelta)
    assert event_json(typed) == {"type": "thinking_delta", "session_key": "api:a",
                                 "text": "Let me think. "}  # fmt: skip
    assert isinstance(runner_event("api:a", "t1", events.events[2]), TextDelta)


async def test_unset_settings_leave_the_model_its_defaults() -> None:
    SEEN.clear()
    runner = BuiltinRunner(seeing_model())
    assert runner.max_steps == DEFAULT_MAX_STEPS == 25  # seed 004
    await runner.run_turn(SESSION, turn("hi"), Events())
    (info,) = SEEN
    assert not info.model_settings  # nothing set: the model's own defaults
    assert info.model_request_parameters.thinking is None


@pytest.mark.parametrize(
    ("thinking", "sent"), [("on", True), ("off", False), ("low", "low"), ("max", "max")]
)
async def test_thinking_levels(thinking: str, sent: Any) -> None:
    SEEN.clear()
    runner = BuiltinRunner(seeing_model(), settings=AgentSettings(thinking=thinking))
    await runner.run_turn(SESSION, turn("hi"), Events())
    assert SEEN[0].model_request_parameters.thinking == sent


def test_the_environment_sets_the_agent() -> None:
    env = {
        "AGENTCRON_MODEL": "openai:gpt-4o",
        "AGENTCRON_SYSTEM_PROMPT": "Be brief.",
        "AGENTCRON_TEMPERATURE": "0.5",
        "AGENTCRON_MAX_TOKENS": "800",
        "AGENTCRON_THINKING": "Medium",
        "AGENTCRON_MAX_STEPS": "12",
    }
    assert agent_settings_from_env(env) == AgentSettings(
        model="openai:gpt-4o", system_prompt="Be brief.", temperature=0.5, max_tokens=800,
        thinking="medium", max_steps=12,
    )  # fmt: skip
    assert agent_settings_from_env({}) == AgentSettings()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AGENTCRON_TEMPERATURE": "hot"}, "AGENTCRON_TEMPERATURE must be a number, got 'hot'"),
        ({"AGENTCRON_TEMPERATURE": "3"}, "temperature must be from 0 to 2, got 3.0"),
        ({"AGENTCRON_MAX_TOKENS": "1.5"}, "AGENTCRON_MAX_TOKENS must be a whole number"),
        ({"AGENTCRON_MAX_STEPS": "0"}, "max_steps must be from 1 to 1000, got 0"),
        ({"AGENTCRON_THINKING": "deep"}, "thinking must be one of off, on, minimal"),
        ({"AGENTCRON_MODEL": "two words"}, "a model name is 1 to 200 printable characters"),
    ],
)
def test_bad_agent_settings_are_refused_with_what_is_accepted(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        agent_settings_from_env(env)


def test_a_model_on_your_own_endpoint_is_not_priced_as_the_providers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A local server's "gpt-4.1-mini" is not OpenAI's: only the override table prices it."""
    from pydantic_ai.usage import RunUsage

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    usage = RunUsage(input_tokens=1_000_000, output_tokens=1_000_000)
    hosted = BuiltinRunner("openai:gpt-4.1-mini")
    assert hosted._usage(usage)["cost_usd"] == 2.0  # genai-prices: 0.40 + 1.60 per million
    monkeypatch.setenv("AGENTCRON_BASE_URL", "http://127.0.0.1:11434/v1")
    local = BuiltinRunner("gpt-4.1-mini")
    assert local.model_id == "openai:gpt-4.1-mini"
    assert local._usage(usage)["cost_usd"] is None  # unpriced, not OpenAI's price
    table = {"openai:gpt-4.1-mini": {"input_per_mtok": 0.1, "output_per_mtok": 0.1}}
    assert BuiltinRunner("gpt-4.1-mini", prices=table)._usage(usage)["cost_usd"] == 0.2
