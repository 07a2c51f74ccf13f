"""The offline model: replies, pacing settings and token counts."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from agentcron.agent.offline import (
    RECALL_CONTEXT_HEADER,
    WPS_ENV,
    OfflineModel,
    Reply,
    offline_reply,
    parse_wps,
)
from agentcron.agent.offline_parse import ToolIntent

ALL_TOOLS = ("cron", "schedule_recall", "manage_recall")


# --- replies -------------------------------------------------------------------------------------


def user(text: str) -> ModelRequest:
    return ModelRequest(parts=[UserPromptPart(text)])


def said(text: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)])


REMINDER_PROMPT = (
    '[scheduled] This turn was started by the scheduled automation "stretch" (id j1, run r1), '
    "due at 2026-11-22 13:10 (Europe/Berlin).\n"
    "No user is waiting for a reply to a question: carry out the task below now.\n\n"
    "Task:\n{task}"
)
RECALL_PROMPT = (
    "[scheduled] This is a recall you scheduled for yourself earlier in this session "
    "(recall j2, run r2), due at 2026-11-22 13:10 (Europe/Berlin).\n"
    "Follow your self-instruction (given as system context for this turn) and report the outcome."
)


def test_scheduled_prompt_restates_the_task_and_never_calls_a_tool() -> None:
    # The task itself reads like a scheduling request: firing must not schedule more reminders.
    prompt = REMINDER_PROMPT.format(task="remind me in 10 minutes to stretch")
    reply = offline_reply([user(prompt)], ALL_TOOLS)
    assert reply == Reply("(offline model) Reminder: remind me in 10 minutes to stretch.")


def test_a_scheduled_task_that_names_a_work_tool_calls_it_but_never_a_scheduling_tool() -> None:
    prompt = REMINDER_PROMPT.format(task="use check_build with branch=main")
    reply = offline_reply([user(prompt)], [*ALL_TOOLS, "check_build"])
    assert reply == Reply(tool=ToolIntent("check_build", {"branch": "main"}))
    # the same task without that tool offered is restated, as is one naming a scheduling tool
    assert offline_reply([user(prompt)], ALL_TOOLS).tool is None
    cron_task = REMINDER_PROMPT.format(task='call cron with action="list"')
    assert offline_reply([user(cron_task)], [*ALL_TOOLS, "check_build"]).tool is None


def test_transcript_style_trigger_restates_the_message() -> None:
    prompt = "Scheduled automation triggered: daily build\n\ncheck the build!"
    reply = offline_reply([user(prompt)], ALL_TOOLS)
    assert reply == Reply("(offline model) Reminder: check the build!")


def test_recall_reads_the_self_instruction_from_the_instructions() -> None:
    instructions = f"You are helpful.\n\n{RECALL_CONTEXT_HEADER}\nlist my automations"
    reply = offline_reply([user(RECALL_PROMPT)], ALL_TOOLS, instructions)
    assert reply == Reply("(offline model) Follow-up: list my automations.")


def test_recall_context_header_alone_marks_a_turn_as_scheduled() -> None:
    instructions = f"{RECALL_CONTEXT_HEADER}\nfollow up in 5 minutes and check the logs"
    reply = offline_reply([user("go")], ALL_TOOLS, instructions)
    assert reply.tool is None
    assert reply.text == "(offline model) Follow-up: follow up in 5 minutes and check the logs."


def test_scheduled_turn_with_nothing_to_do_answers_empty() -> None:
    reply = offline_reply([user(REMINDER_PROMPT.format(task=""))], ALL_TOOLS)
    assert reply == Reply("")


def test_history_question_quotes_the_previous_user_message() -> None:
    messages: list[ModelMessage] = [
        user("my name is Ada"),
        said("hello Ada"),
        user("remind me in 10 minutes to stretch"),
        said("Done"),
        user("What did I say before?"),
    ]
    reply = offline_reply(messages, ALL_TOOLS)
    assert reply == Reply(
        '(offline model) Before this you said: "remind me in 10 minutes to stretch"'
    )


def test_history_question_without_history() -> None:
    reply = offline_reply([user("what was my last message")], ALL_TOOLS)
    assert reply.tool is None
    assert "not said anything before" in reply.text


def test_unknown_sentence_says_it_is_the_offline_model() -> None:
    reply = offline_reply([user("  tell me\na joke ")], ALL_TOOLS)
    assert reply.tool is None
    assert reply.text.startswith('(offline model) You said: "tell me a joke".')
    assert "offline model" in reply.text.split(".", 1)[1]
    assert "remind me in 10 minutes to stretch" in reply.text  # says what it can do


def test_request_becomes_a_tool_call_when_the_tool_is_offered() -> None:
    reply = offline_reply([user("list my automations")], ["cron"])
    assert reply == Reply(tool=ToolIntent("cron", {"action": "list"}))


def test_tool_not_offered_is_a_text_refusal() -> None:
    reply = offline_reply([user("list my automations")], ["schedule_recall", "manage_recall"])
    assert reply.tool is None
    assert reply.text == (
        "(offline model) I cannot do that here: the `cron` tool is not available in this session."
    )
    refused = offline_reply([user("cancel my recall")], [])
    assert refused.tool is None
    assert "`manage_recall`" in refused.text


def test_tool_results_are_summarized() -> None:
    ok = ToolReturnPart("cron", "Scheduled “stretch” (id j1).", tool_call_id="c1")
    bad = ToolReturnPart("manage_recall", "Error: there is no pending recall.", tool_call_id="c2")
    call = ModelResponse(parts=[ToolCallPart("cron", {"action": "list"}, "c1")])
    messages: list[ModelMessage] = [user("x"), call, ModelRequest(parts=[ok, bad])]
    reply = offline_reply(messages, ALL_TOOLS)
    assert reply == Reply(
        "(offline model) Done: Scheduled “stretch” (id j1).\n"
        "That did not work: Error: there is no pending recall."
    )


def test_failed_tool_outcome_is_reported_as_not_working() -> None:
    failed = ToolReturnPart("cron", "database is locked", tool_call_id="c1", outcome="failed")
    empty = ToolReturnPart("cron", "", tool_call_id="c2")
    reply = offline_reply([user("x"), ModelRequest(parts=[failed, empty])], ALL_TOOLS)
    assert reply.text == (
        "(offline model) That did not work: database is locked\nDone: (no result)"
    )


def test_nothing_to_answer() -> None:
    assert offline_reply([], ALL_TOOLS).text == "(offline model) I have nothing to answer."
    assert offline_reply([user("hi"), said("hello")], ALL_TOOLS).text.endswith("nothing to answer.")


# --- words per second ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "wps"),
    [
        (None, 20.0),
        ("", 20.0),
        ("   ", 20.0),
        ("5", 5.0),
        (" 2.5 ", 2.5),
        (7, 7.0),
        (0.5, 0.5),
        ("0", math.inf),
        (0, math.inf),
        ("inf", math.inf),
        (math.inf, math.inf),
    ],
)
def test_parse_wps(value: str | float | None, wps: float) -> None:
    assert parse_wps(value) == wps


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("fast", "AGENTCRON_OFFLINE_WPS must be a number of words per second"),
        ("-1", "must be >= 0"),
        (-0.5, "must be >= 0"),
        ("nan", "must be >= 0"),
        ("-inf", "must be >= 0"),
    ],
)
def test_parse_wps_rejects(value: str | float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_wps(value)


def test_wps_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WPS_ENV, raising=False)
    assert OfflineModel().words_per_second == 20.0
    monkeypatch.setenv(WPS_ENV, "4")
    assert OfflineModel().words_per_second == 4.0
    assert OfflineModel(10).words_per_second == 10.0  # the argument wins
    assert OfflineModel(0).words_per_second == math.inf
    monkeypatch.setenv(WPS_ENV, "0")
    assert OfflineModel().words_per_second == math.inf
    monkeypatch.setenv(WPS_ENV, "quick")
    with pytest.raises(ValueError, match=WPS_ENV):
        OfflineModel()


def test_model_names() -> None:
    model = OfflineModel(0)
    assert (model.system, model.model_name) == ("offline", "offline")


# --- the model inside a pydantic-ai agent --------------------------------------------------------


async def _events(ctx: Any, stream: Any) -> None:
    async for _ in stream:
        pass


async def test_streamed_and_plain_requests_answer_and_count_alike() -> None:
    agent: Agent[None, str] = Agent(OfflineModel(0), instructions="Be brief. " * 20)
    plain = await agent.run("tell me a joke")
    streamed = await agent.run("tell me a joke", event_stream_handler=_events)
    assert plain.output == streamed.output
    assert plain.output.startswith('(offline model) You said: "tell me a joke"')
    # Both count the words sent: 40 instruction words + 4 prompt words + a fixed overhead of 50.
    assert plain.usage.input_tokens == streamed.usage.input_tokens == 50 + 40 + 4
    # The plain path counts the words said; the streamed one uses pydantic-ai's own chunk estimate.
    assert plain.usage.output_tokens == len(plain.output.split())
    assert streamed.usage.output_tokens >= len(plain.output.split())


async def test_tool_calls_get_distinct_ids_and_the_result_is_summarized() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def cron(action: str, name: str | None = None) -> str:
        seen.append(("cron", {"action": action, "name": name}))
        return f"ran {action}"

    agent: Agent[None, str] = Agent(OfflineModel(0), tools=[Tool(cron)])
    first = await agent.run("list my automations")
    second = await agent.run("pause the automation nightly", message_history=first.all_messages())
    assert seen == [
        ("cron", {"action": "list", "name": None}),
        ("cron", {"action": "pause", "name": "nightly"}),
    ]
    assert first.output == "(offline model) Done: ran list"
    assert second.output == "(offline model) Done: ran pause"
    ids = [
        part.tool_call_id
        for message in second.all_messages()
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]
    assert ids == ["offline-call-1", "offline-call-2"]
