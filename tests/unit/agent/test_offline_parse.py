"""The offline model's reading of a sentence: the sentence -> tool call table, the time phrases it
passes on, short job names, and direct tool-call sentences (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentcron.agent.offline_parse import ToolIntent, parse_request, parse_tool_call, short_name
from agentcron.schedule import AtSpec, parse_when

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)  # a Sunday


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


def test_direct_tool_call_sentences() -> None:
    names = ["lookup", "delete_file"]
    assert parse_tool_call("use lookup", names) == ToolIntent("lookup")
    assert parse_tool_call('call lookup with {"q": "a b"}', names) == ToolIntent(
        "lookup", {"q": "a b"}
    )
    assert parse_tool_call(
        "Please run the delete_file tool with path=/tmp/a, force=true.", names
    ) == ToolIntent("delete_file", {"path": "/tmp/a", "force": True})
    assert parse_tool_call('use lookup with q="two words" n=3', names) == ToolIntent(
        "lookup", {"q": "two words", "n": 3}
    )
    assert parse_tool_call("call mom", names) is None  # not a tool here
    assert parse_tool_call("use lookup with {bad json", names) is None
    assert parse_tool_call("use lookup with [1, 2]", names) is None
