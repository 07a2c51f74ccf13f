"""The offline model: sentence -> tool call table, replies, pacing settings and token counts."""

from __future__ import annotations

import math
from datetime import UTC, datetime
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
from agentcron.agent.offline_parse import ToolIntent, parse_request, short_name
from agentcron.schedule import AtSpec, parse_when

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)  # a Sunday
ALL_TOOLS = ("cron", "schedule_recall", "manage_recall")


def add(when: str, message: str, name: str | None = None) -> ToolIntent:
    args = {"action": "add", "name": name or message, "when": when, "message": message}
    return ToolIntent("cron", args)


def recall_once(when: str, task: str) -> ToolIntent:
    return ToolIntent(
        "schedule_recall",
        {
            "call_type": "once",
            "when": when,
            "additional_context_message": task,
            "internal_comment": f"follow up: {task}",
        },
    )


def recall_every(seconds: int, task: str) -> ToolIntent:
    return ToolIntent(
        "schedule_recall",
        {
            "call_type": "recurring",
            "interval_seconds": seconds,
            "additional_context_message": task,
            "internal_comment": f"follow up: {task}",
        },
    )


def cron(action: str, name: str | None = None) -> ToolIntent:
    return ToolIntent("cron", {"action": action} | ({"name": name} if name else {}))


def recall(action: str) -> ToolIntent:
    return ToolIntent("manage_recall", {"action": action})


PARSE = [
    # reminders, time first
    ("remind me in 10 minutes to stretch", add("in 10 minutes", "stretch")),
    ("Remind me in 10 minutes to stretch.", add("in 10 minutes", "stretch")),
    ("remind me in 10 minutes: stretch", add("in 10 minutes", "stretch")),
    ("remind me in 10 minutes, stretch", add("in 10 minutes", "stretch")),
    ("remind me in 10 minutes stretch", add("in 10 minutes", "stretch")),
    ("remind me in 10 mins to stretch", add("in 10 mins", "stretch")),
    ("remind me in 10m to stretch", add("in 10m", "stretch")),
    ("remind me in 10 minutes from now to stretch", add("in 10 minutes from now", "stretch")),
    ("remind me in 1h 30m to take a break", add("in 1h 30m", "take a break")),
    ("remind me in an hour to take a break", add("in an hour", "take a break")),
    (
        "remind me in 10 minutes and 30 seconds to stretch",
        add("in 10 minutes and 30 seconds", "stretch"),
    ),
    ("remind me in 10 minutes that the oven is on", add("in 10 minutes", "the oven is on")),
    ("remind me in 10 minutes to check in", add("in 10 minutes", "check in")),
    (
        "remind me in 10 minutes to stretch and drink water",
        add("in 10 minutes", "stretch and drink water"),
    ),
    ('remind me in 10 minutes to "stretch"', add("in 10 minutes", "stretch")),
    ("remind me at 17:30 to leave", add("at 17:30", "leave")),
    ("remind me at 5pm on friday to leave", add("at 5pm on friday", "leave")),
    ("remind me at 9 a.m. to stretch", add("at 9 a.m.", "stretch")),
    ("remind me on monday at 9am to file the report", add("on monday at 9am", "file the report")),
    ("remind me tomorrow at noon to eat", add("tomorrow at noon", "eat")),
    ("remind me at 9 tomorrow to water the plants", add("at 9 tomorrow", "water the plants")),
    (
        "remind me every weekday at 9am to check the build",
        add("every weekday at 9am", "check the build"),
    ),
    (
        "remind me every monday and wednesday at 9 to go running",
        add("every monday and wednesday at 9", "go running"),
    ),
    # reminders, task first
    ("remind me to call mom tomorrow at 9", add("tomorrow at 9", "call mom")),
    ("remind me to stretch in 10 minutes.", add("in 10 minutes", "stretch")),
    ("remind me to call mom at 9 tomorrow", add("at 9 tomorrow", "call mom")),
    ("remind me to stretch at 9 a.m.", add("at 9 a.m.", "stretch")),
    ("remind me to call mom at 5pm on friday", add("at 5pm on friday", "call mom")),
    ("remind me about the meeting tomorrow at 9", add("tomorrow at 9", "the meeting")),
    # bare "<when> <task>"
    ("every weekday at 9 check the build", add("every weekday at 9", "check the build")),
    ("every weekday at 9: check the build", add("every weekday at 9", "check the build")),
    ("every weekday at 9 - check the build", add("every weekday at 9", "check the build")),
    (
        "every weekday at 9, remind me to check the build",
        add("every weekday at 9", "check the build"),
    ),
    ("every weekday check the build", add("every weekday", "check the build")),
    ("every 2 hours check the queue", add("every 2 hours", "check the queue")),
    ("every hour check the queue", add("every hour", "check the queue")),
    ("tomorrow at 9 call the dentist", add("tomorrow at 9", "call the dentist")),
    # time zones stay in the time phrase
    (
        "every day at 7:30 Europe/Berlin water the plants",
        add("every day at 7:30 Europe/Berlin", "water the plants"),
    ),
    (
        "remind me every day at 7:30 Europe/Berlin to water the plants",
        add("every day at 7:30 Europe/Berlin", "water the plants"),
    ),
    (
        "remind me to water the plants every day at 7:30 Europe/Berlin",
        add("every day at 7:30 Europe/Berlin", "water the plants"),
    ),
    (
        "Remind me to call mom tomorrow at 9am America/New_York",
        add("tomorrow at 9am America/New_York", "call mom"),
    ),
    ("remind me every day at 7:30 UTC to drink water", add("every day at 7:30 UTC", "drink water")),
    # politeness and punctuation
    ("please remind me in 10 minutes to stretch", add("in 10 minutes", "stretch")),
    ("can you remind me in 10 minutes to stretch?", add("in 10 minutes", "stretch")),
    ("Could you please remind me in 5 min to drink water!", add("in 5 min", "drink water")),
    ("hey, remind me in 10 minutes to stretch please", add("in 10 minutes", "stretch")),
    ("ok please remind me in 10 minutes to stretch!!", add("in 10 minutes", "stretch")),
    ("remind me to stretch at 9 a.m., please", add("at 9 a.m.", "stretch")),
    ("remind\u00a0me   in 10 minutes   to stretch", add("in 10 minutes", "stretch")),
    # a long task gets a short name that does not end on a filler word
    (
        "remind me in 1 hour to call mom about the trip to Rome",
        add("in 1 hour", "call mom about the trip to Rome", name="call mom about the trip"),
    ),
    # follow-ups (recalls)
    ("follow up in 30 seconds and check the logs", recall_once("in 30 seconds", "check the logs")),
    ("follow up in 30 seconds, and check the logs", recall_once("in 30 seconds", "check the logs")),
    ("follow up to check the logs in 30 minutes", recall_once("in 30 minutes", "check the logs")),
    (
        "check back in 2 hours to see if the build passed",
        recall_once("in 2 hours", "see if the build passed"),
    ),
    (
        "get back to me in 1 hour and tell me the score",
        recall_once("in 1 hour", "tell me the score"),
    ),
    (
        "check in with me tomorrow at 9 and ask about sleep",
        recall_once("tomorrow at 9", "ask about sleep"),
    ),
    ("please follow up in 2h and check the deploy.", recall_once("in 2h", "check the deploy")),
    ("follow up every 10 minutes and check the deploy", recall_every(600, "check the deploy")),
    ("follow up every hour and check the queue", recall_every(3600, "check the queue")),
    ("follow up every 1.5 hours and check the queue", recall_every(5400, "check the queue")),
    ("follow up every 1h 30m and check the queue", recall_every(5400, "check the queue")),
    ("follow up every day and ask how I slept", recall_every(86400, "ask how I slept")),
    ("follow up every 2 weeks and review the budget", recall_every(1209600, "review the budget")),
    # listing
    ("list my automations", cron("list")),
    ("list automations", cron("list")),
    ("show all my automations", cron("list")),
    ("list my jobs", cron("list")),
    ("list the schedules", cron("list")),
    ("show my crons", cron("list")),
    ("show me my reminders", cron("list")),
    ("what are my reminders", cron("list")),
    ("What are my reminders?", cron("list")),
    ("what are my automations right now", cron("list")),
    ("what's scheduled", cron("list")),
    ("what\u2019s scheduled for me?", cron("list")),
    ("what's scheduled for me now", cron("list")),
    ("what is scheduled?", cron("list")),
    ("please list my automations.", cron("list")),
    # managing an automation by name
    ("pause the automation daily build", cron("pause", "daily build")),
    ("pause automation daily build", cron("pause", "daily build")),
    ("resume the automation daily build", cron("resume", "daily build")),
    ("unpause the job nightly", cron("resume", "nightly")),
    ("cancel the automation X", cron("remove", "X")),
    ("delete the reminder called water plants", cron("remove", "water plants")),
    ("stop my automation named 'daily build'.", cron("remove", "daily build")),
    ("remove the cron job nightly backup", cron("remove", "nightly backup")),
    # the recall
    ("cancel my recall", recall("cancel")),
    ("can you please cancel my recall?", recall("cancel")),
    ("delete the follow-up", recall("cancel")),
    ("stop the pending recall", recall("cancel")),
    ("list my recalls", recall("list")),
    ("show my follow-ups", recall("list")),
    # not requests
    ("hello there", None),
    ("what time is it", None),
    ("tell me a joke", None),
    ("what did I say before", None),
    ("every time I call you answer", None),
    ("remind me", None),
    ("remind me to stretch", None),  # no time
    ("in 10 minutes", None),  # no task
    ("every 10 minutes", None),
    ("every day at 7:30 Europe/Berlin", None),  # the zone is not a task
    ("remind me at 5pm on friday", None),  # "on friday" is part of the time, not a task
    ("remind me in 10 minutes to", None),
    ("remind me in 10 minutes to ...", None),
    ("remind me in 10 minutes to the", None),
    ("remind me at 9 p.m. please", None),  # "p.m" is part of the time, not a task
    ("follow up every 10 minutes", None),
    ("follow up every weekday at 9 and check the build", None),  # a recall repeats by interval
    ("cancel the automation", None),
    ("pause", None),
    ("", None),
    ("   ", None),
    ("please", None),
    ("?!", None),
]


@pytest.mark.parametrize(("sentence", "expected"), PARSE, ids=[s or "<empty>" for s, _ in PARSE])
def test_parse_request(sentence: str, expected: ToolIntent | None) -> None:
    assert parse_request(sentence) == expected


WHENS = sorted(
    {
        (i.args.get("when"), i.args["action"] if i.tool == "cron" else i.args["call_type"])
        for _, i in PARSE
        if i is not None and i.args.get("when")
    }
)


@pytest.mark.parametrize(("when", "kind"), WHENS, ids=[w for w, _ in WHENS])
def test_every_parsed_time_phrase_is_accepted_by_the_tools(when: str, kind: str) -> None:
    """The model passes time phrases verbatim; the server-side parser must read each of them."""
    spec = parse_when(when, NOW, "UTC")
    if kind == "once":  # a once recall needs a single instant
        assert isinstance(spec, AtSpec)


@pytest.mark.parametrize(
    ("task", "name"),
    [
        ("stretch", "stretch"),
        ("check in", "check in"),  # short enough: keeps its last word
        ("turn the lights on", "turn the lights on"),
        ("one two three four five six seven eight", "one two three four five six"),
        ("call mom about the trip to Rome", "call mom about the trip"),  # cut: no dangling "to"
        ("call mom about the weather forecast tomorrow", "call mom about the weather forecast"),
        (
            "supercalifragilistic expialidocious wonderful extraordinarily long words",
            "supercalifragilistic expialidocious wonderful",  # whole words within 48 chars
        ),
        ("x" * 60, "x" * 48),
        ("  spaced   out   task  ", "spaced out task"),
    ],
)
def test_short_name(task: str, name: str) -> None:
    assert short_name(task) == name
    assert len(short_name(task)) <= 48


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
