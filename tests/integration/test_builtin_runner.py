"""The built-in runner driven directly: streaming, tools on a real AgentCron, limits and failures."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic_ai import Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel

from agentcron.agent.builtin import (
    DEFAULT_SYSTEM_PROMPT,
    BuiltinRunner,
    history_to_messages,
    resolve_model,
)
from agentcron.agent.offline import RECALL_CONTEXT_HEADER, OfflineModel
from agentcron.agent.pricing import cost_usd, load_prices
from agentcron.agent.runner import (
    HistoryEntry,
    Outcome,
    OutcomeStatus,
    SessionInfo,
    TurnInput,
    TurnSource,
)
from agentcron.agent.tools import ToolDeps, scheduling_tools
from agentcron.app import AgentCron
from agentcron.domain.attachments import Attachment
from agentcron.domain.jobs import CreatedBy, JobKind
from agentcron.schedule import AtSpec
from agentcron.testing import FakeClock
from tests.conftest import T0, CronFactory

SESSION = SessionInfo(key="websocket:abc", channel="websocket", chat_id="abc", tz="Europe/Berlin")


class Events:
    """Records every event a turn emits (optionally into a shared log)."""

    def __init__(self, log: list[Any] | None = None) -> None:
        self.log: list[Any] = [] if log is None else log

    async def emit(self, event: dict[str, Any]) -> None:
        self.log.append(event)

    @property
    def events(self) -> list[dict[str, Any]]:
        return [e for e in self.log if isinstance(e, dict)]

    def text(self) -> str:
        return "".join(e["text"] for e in self.events if e["type"] == "text_delta")

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]


def turn(prompt: str, **kw: Any) -> TurnInput:
    kw.setdefault("now", T0)
    return TurnInput(turn_id="t1", source=kw.pop("source", TurnSource.USER), prompt=prompt, **kw)


def tool_runner(app: AgentCron, clock: FakeClock, **kw: Any) -> BuiltinRunner:
    """A runner with the real scheduling tools bound to `app` (the way the app wires it)."""

    def deps(session: SessionInfo, turn: TurnInput) -> ToolDeps:
        return ToolDeps(
            jobs=app.jobs,  # type: ignore[arg-type]
            session_key=session.key,
            now=clock.now(),
            tz=session.tz,
            in_scheduled_turn=turn.source is not TurnSource.USER,
        )

    kw.setdefault("model", OfflineModel(0))
    return BuiltinRunner(tools=scheduling_tools(), deps_factory=deps, **kw)


# --- streaming ----------------------------------------------------------------------------------


async def test_text_deltas_stream_word_by_word_and_make_up_the_outcome() -> None:
    runner = BuiltinRunner(OfflineModel(0))
    events = Events()
    outcome = await runner.run_turn(SESSION, turn("tell me a joke"), events)
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.text is not None
    assert outcome.text.startswith('(offline model) You said: "tell me a joke".')
    assert set(events.types()) == {"text_delta"}
    assert len(events.events) == len(outcome.text.split())  # one delta per word
    assert events.text() == outcome.text
    assert outcome.extra == {}


async def test_paced_stream_sleeps_between_words_while_streaming() -> None:
    log: list[Any] = []

    async def sleep(delay: float) -> None:
        log.append(delay)

    runner = BuiltinRunner(OfflineModel(words_per_second=4, sleep=sleep))
    events = Events(log)
    outcome = await runner.run_turn(SESSION, turn("hello there"), events)
    assert outcome.text is not None
    words = len(outcome.text.split())
    delays = [entry for entry in log if isinstance(entry, float)]
    assert delays == [0.25] * (words - 1)  # one gap per pair of words, at 1/wps
    # Streamed, not buffered: every word reaches the listener before the next pause.
    kinds = ["sleep" if isinstance(entry, float) else "text" for entry in log]
    assert kinds == ["text", "sleep"] * (words - 1) + ["text"]
    assert events.text() == outcome.text


async def test_unpaced_model_never_sleeps() -> None:
    delays: list[float] = []

    async def sleep(delay: float) -> None:
        delays.append(delay)

    runner = BuiltinRunner(OfflineModel(words_per_second=math.inf, sleep=sleep))
    outcome = await runner.run_turn(SESSION, turn("hello there"), Events())
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert delays == []


# --- tools --------------------------------------------------------------------------------------


async def test_tool_sentence_streams_the_call_and_binds_the_job_to_the_session(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    runner = tool_runner(app, clock)
    events = Events()
    outcome = await runner.run_turn(SESSION, turn("remind me in 10 minutes to stretch"), events)

    args = {"action": "add", "name": "stretch", "when": "in 10 minutes", "message": "stretch"}
    started, called, *rest = events.events
    assert started == {"type": "tool_started", "name": "cron", "args": args}
    assert called["type"] == "tool_call"
    assert (called["name"], called["args"]) == ("cron", args)
    assert called["result"].startswith("Scheduled “stretch”: ")
    assert {e["type"] for e in rest} == {"text_delta"}

    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.text == f"(offline model) Done: {called['result']}"
    assert events.text() == outcome.text

    (job,) = await app.jobs.list()
    assert job.session_key == SESSION.key
    assert job.kind is JobKind.AGENT_TURN
    assert job.created_by is CreatedBy.AGENT
    assert job.message == "stretch"
    assert job.spec == AtSpec(at=T0 + timedelta(minutes=10), tz="Europe/Berlin")
    assert job.id not in called["result"]  # a person reads it: the name says which
    assert outcome.usage is not None
    assert (outcome.usage["requests"], outcome.usage["tool_calls"]) == (2, 1)


async def test_follow_up_sentence_schedules_a_recall_with_an_async_deps_factory(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()

    async def deps(session: SessionInfo, turn: TurnInput) -> ToolDeps:
        await asyncio.sleep(0)
        return ToolDeps(jobs=app.jobs, session_key=session.key, now=clock.now())  # type: ignore[arg-type]

    runner = BuiltinRunner(OfflineModel(0), tools=scheduling_tools(), deps_factory=deps)
    events = Events()
    prompt = "follow up in 30 seconds and check the logs"
    outcome = await runner.run_turn(SESSION, turn(prompt), events)
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.text is not None
    assert outcome.text.startswith("(offline model) Done: Recall scheduled")
    assert events.types()[:2] == ["tool_started", "tool_call"]
    (job,) = await app.jobs.list()
    assert (job.kind, job.session_key, job.message) == (
        JobKind.RECALL,
        SESSION.key,
        "check the logs",
    )
    assert job.spec == AtSpec(at=T0 + timedelta(seconds=30))


async def test_failing_tool_result_is_reported(make_cron: CronFactory, clock: FakeClock) -> None:
    app = await make_cron()
    events = Events()
    outcome = await tool_runner(app, clock).run_turn(SESSION, turn("cancel my recall"), events)
    (called,) = [e for e in events.events if e["type"] == "tool_call"]
    assert called["result"] == "Error: there is no pending recall in this session."
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.text == (
        "(offline model) That did not work: Error: there is no pending recall in this session."
    )
    (record,) = outcome.tools
    assert (record.name, record.ok) == ("manage_recall", False)  # failed, as the reply says


async def test_an_ambiguous_name_is_a_failed_call_with_the_choice_and_the_id_works(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    runner = tool_runner(app, clock)
    await runner.run_turn(SESSION, turn("every weekday at 9 check the build"), Events())
    await runner.run_turn(SESSION, turn("every day at 18:00 check the build logs"), Events())
    daily, weekday = sorted(await app.jobs.list(), key=lambda j: j.name, reverse=True)
    events = Events()
    refused = await runner.run_turn(SESSION, turn("remove job check"), events)
    (record,) = refused.tools
    assert record.ok is False  # "Error: ..." is a failed call, not a green one
    assert record.result.startswith("Error: 'check' matches 2 automations; say which")
    assert f"- “{weekday.name}”: every weekday at 09:00 (Europe/Berlin), job_id {weekday.id}" in (
        record.result
    )
    assert f"every day at 18:00 (Europe/Berlin), job_id {daily.id}" in record.result
    assert len(await app.jobs.list()) == 2
    # the advice followed: the id (here shortened, as a person copies it) names the one
    removed = await runner.run_turn(SESSION, turn(f"remove job {daily.id[:-4]}…"), Events())
    (record,) = removed.tools
    assert record.ok is True, record.result
    assert record.result == f"Removed “{daily.name}”."
    assert [j.id for j in await app.jobs.list()] == [weekday.id]


async def test_list_sees_only_this_sessions_automations(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    runner = tool_runner(app, clock)
    other = SessionInfo(key="websocket:other")
    await runner.run_turn(SESSION, turn("every weekday at 9 check the build"), Events())
    await runner.run_turn(other, turn("remind me in 1 hour to call mom"), Events())
    mine = await runner.run_turn(SESSION, turn("list my automations"), Events())
    assert mine.text is not None
    assert "check the build" in mine.text
    assert "call mom" not in mine.text


async def test_without_tools_a_request_is_refused_in_text() -> None:
    events = Events()
    outcome = await BuiltinRunner(OfflineModel(0)).run_turn(
        SESSION, turn("remind me in 10 minutes to stretch"), events
    )
    assert set(events.types()) == {"text_delta"}
    assert outcome.text == (
        "(offline model) I cannot do that here: the `cron` tool is not available in this session."
    )


async def test_scheduled_turn_restates_the_task_and_schedules_nothing(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    prompt = (
        '[scheduled] This turn was started by the scheduled automation "stretch" (id j1, run r1).'
        "\n\nTask:\nremind me in 10 minutes to stretch"
    )
    events = Events()
    outcome = await tool_runner(app, clock).run_turn(
        SESSION, turn(prompt, source=TurnSource.AUTOMATION), events
    )
    assert outcome.text == "(offline model) Reminder: remind me in 10 minutes to stretch."
    assert set(events.types()) == {"text_delta"}
    assert await app.jobs.list() == []


async def test_recall_turn_follows_its_self_instruction(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    prompt = "[scheduled] This is a recall you scheduled for yourself earlier in this session."
    outcome = await tool_runner(app, clock).run_turn(
        SESSION,
        turn(prompt, source=TurnSource.RECALL, system_context="  Read /tmp/build.log and report  "),
        Events(),
    )
    assert outcome.text == "(offline model) Follow-up: Read /tmp/build.log and report."


# --- instructions -------------------------------------------------------------------------------


def test_instructions_hold_the_local_time_and_zone() -> None:
    runner = BuiltinRunner(OfflineModel(0))
    session = SessionInfo(key="telegram:42", tz="America/New_York", title="Ops chat")
    text = runner.instructions(session, turn("hi", now=datetime(2026, 7, 4, 16, 5, tzinfo=UTC)))
    assert text.startswith(DEFAULT_SYSTEM_PROMPT)
    assert (
        "Current time: Saturday 2026-07-04 12:05 in America/New_York, the session's time zone "
        "(2026-07-04T16:05Z UTC)."
    ) in text
    assert "Session: Ops chat." in text
    assert RECALL_CONTEXT_HEADER not in text


def test_instructions_in_winter_and_for_an_untitled_session() -> None:
    runner = BuiltinRunner(OfflineModel(0), system_prompt="Be terse.")
    text = runner.instructions(SESSION, turn("hi"))  # T0 = Sunday 2026-11-22 12:00 UTC
    assert text.split("\n\n") == [
        "Be terse.",
        "Current time: Sunday 2026-11-22 13:00 in Europe/Berlin, the session's time zone "
        "(2026-11-22T12:00Z UTC).",
        "Session: websocket:abc.",
    ]


def test_instructions_end_with_the_recall_self_instruction() -> None:
    runner = BuiltinRunner(OfflineModel(0))
    text = runner.instructions(SESSION, turn("go", system_context="\nRead /tmp/build.log\n"))
    assert text.endswith(f"\n\n{RECALL_CONTEXT_HEADER}\nRead /tmp/build.log")
    blank = runner.instructions(SESSION, turn("go", system_context="   "))
    assert RECALL_CONTEXT_HEADER not in blank


def test_instructions_fall_back_to_utc_and_treat_naive_now_as_utc() -> None:
    runner = BuiltinRunner(OfflineModel(0))
    session = SessionInfo(key="api:x", tz="Mars/Olympus_Mons")
    text = runner.instructions(session, turn("hi", now=datetime(2026, 1, 2, 3, 4)))
    assert "Current time: Friday 2026-01-02 03:04 in UTC, the session's time zone" in text
    assert "Mars" not in text


def test_instructions_without_a_time_use_the_current_time() -> None:
    runner = BuiltinRunner(OfflineModel(0))
    before = datetime.now(UTC)
    text = runner.instructions(SessionInfo(key="k"), turn("hi", now=None))
    stamps = {f"({t:%Y-%m-%dT%H:%MZ} UTC)" for t in (before, datetime.now(UTC))}
    assert any(stamp in text for stamp in stamps)


async def test_the_model_reads_a_note_of_the_files_the_message_came_with() -> None:
    prompts: list[str] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        prompts.extend(p.content for p in last.parts if isinstance(p, UserPromptPart))  # type: ignore[misc]
        yield "ok"

    runner = BuiltinRunner(FunctionModel(stream_function=stream))
    photo = Attachment("photo", "cat.jpg", "image/jpeg", data=b"\xff\xd8 cat")
    doc = Attachment("document", "a.pdf", "application/pdf", url="https://files.example/a.pdf")
    await runner.run_turn(SESSION, turn("what is this?", attachments=(photo, doc)), Events())
    assert prompts == [
        "what is this?\n\n"
        "[attached photo “cat.jpg”: image/jpeg, 6 bytes, sent inline]\n"
        "[attached document “a.pdf”: application/pdf, https://files.example/a.pdf]"
    ]


async def test_the_model_receives_the_instructions_and_tools() -> None:
    seen: list[AgentInfo] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        seen.append(info)
        yield "ok"

    runner = BuiltinRunner(FunctionModel(stream_function=stream), tools=scheduling_tools())
    await runner.run_turn(SESSION, turn("hi", system_context="check the logs"), Events())
    (info,) = seen
    assert info.instructions == runner.instructions(
        SESSION, turn("hi", system_context="check the logs")
    )
    # Plain text (or nothing) is the answer: no extra output tool is offered to the model.
    assert info.allow_text_output
    assert info.output_tools == []
    assert sorted(t.name for t in info.function_tools) == [
        "cron",
        "manage_recall",
        "schedule_recall",
    ]


# --- step bound, failures, empty results, cancellation -----------------------------------------


def always_calls_ping(say: str = "") -> FunctionModel:
    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        if say:
            yield say
        yield {0: DeltaToolCall("ping", json.dumps({}), tool_call_id=f"call-{len(messages)}")}

    return FunctionModel(stream_function=stream)


async def test_reaching_max_steps_counts_as_success() -> None:
    pings: list[int] = []

    def ping() -> str:
        """Ping."""
        pings.append(1)
        return "pong"

    runner = BuiltinRunner(always_calls_ping(), tools=[Tool(ping)], max_steps=3)
    events = Events()
    outcome = await runner.run_turn(SESSION, turn("go"), events)
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.extra == {"stopped": "max_steps", "max_steps": 3}
    assert outcome.text == "(stopped after 3 steps)"
    assert len(pings) == 3  # three model requests, each asked for one call
    assert events.types() == ["tool_started", "tool_call"] * 3
    assert all(e["result"] == "pong" for e in events.events if e["type"] == "tool_call")
    assert outcome.usage is not None
    assert outcome.usage["requests"] == 3


async def test_max_steps_keeps_what_the_model_said() -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    runner = BuiltinRunner(always_calls_ping("still working"), tools=[Tool(ping)], max_steps=2)
    outcome = await runner.run_turn(SESSION, turn("go"), Events())
    assert outcome.status is OutcomeStatus.SUCCEEDED
    assert outcome.text == "still working\n\nstill working"
    assert outcome.extra["stopped"] == "max_steps"


def test_max_steps_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_steps must be at least 1, got 0"):
        BuiltinRunner(OfflineModel(0), max_steps=0)


def raising_model(exc: Exception) -> FunctionModel:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        raise exc
        yield ""  # pragma: no cover - makes this an async generator

    return FunctionModel(stream_function=stream)


async def test_model_error_is_a_short_failure_with_details() -> None:
    runner = BuiltinRunner(raising_model(RuntimeError("provider exploded\nretry later\n  hint")))
    outcome = await runner.run_turn(SESSION, turn("hi"), Events())
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error == "RuntimeError: provider exploded"
    assert outcome.text is None
    details = outcome.error_details
    assert details is not None
    assert details["type"] == "builtins.RuntimeError"
    assert details["message"] == "provider exploded\nretry later\n  hint"
    assert details["traceback"].startswith("Traceback (most recent call last):")
    assert "in stream" in details["traceback"]  # where it was raised
    assert (
        details["traceback"]
        .rstrip()
        .endswith("RuntimeError: provider exploded\nretry later\n  hint")
    )
    assert outcome.usage is not None
    assert outcome.usage["output_tokens"] == 0


async def test_long_error_is_cut_to_one_line_of_at_most_300_chars() -> None:
    message = "x" * 1000 + "\nsecond line"
    outcome = await BuiltinRunner(raising_model(ValueError(message))).run_turn(
        SESSION, turn("hi"), Events()
    )
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error is not None
    assert len(outcome.error) == 300
    assert "\n" not in outcome.error
    assert outcome.error.startswith("ValueError: xxx")
    assert outcome.error.endswith("…")
    assert outcome.error_details is not None
    assert outcome.error_details["message"] == message


async def test_error_without_a_message_is_named_by_its_type() -> None:
    outcome = await BuiltinRunner(raising_model(KeyError())).run_turn(SESSION, turn("hi"), Events())
    assert outcome.error == "KeyError"


async def test_failing_deps_factory_is_a_failed_turn() -> None:
    def deps(session: SessionInfo, turn: TurnInput) -> ToolDeps:
        raise LookupError("no such session")

    outcome = await BuiltinRunner(OfflineModel(0), deps_factory=deps).run_turn(
        SESSION, turn("hi"), Events()
    )
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.error == "LookupError: no such session"


async def test_scheduled_turn_with_nothing_to_report_is_empty() -> None:
    events = Events()
    prompt = '[scheduled] This turn was started by the scheduled automation "x".\n\nTask:\n'
    outcome = await BuiltinRunner(OfflineModel(0)).run_turn(
        SESSION, turn(prompt, source=TurnSource.AUTOMATION), events
    )
    assert outcome.status is OutcomeStatus.EMPTY
    assert outcome.text is None
    assert events.text() == ""
    assert outcome.usage is not None
    assert outcome.usage["requests"] == 1  # taken as the answer, not re-prompted


@pytest.mark.parametrize("answer", ["", "   \n "])
async def test_blank_model_answer_is_empty(answer: str) -> None:
    calls: list[int] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        calls.append(1)
        yield answer

    outcome = await BuiltinRunner(FunctionModel(stream_function=stream)).run_turn(
        SESSION, turn("anything new?"), Events()
    )
    assert outcome == Outcome.empty(usage=outcome.usage)
    assert calls == [1]


async def test_cancelling_a_running_turn_propagates() -> None:
    paused = asyncio.Event()
    never = asyncio.Event()
    delays: list[float] = []

    async def slow_sleep(delay: float) -> None:
        delays.append(delay)
        paused.set()
        await never.wait()  # a very slow stream: stuck between two words

    runner = BuiltinRunner(OfflineModel(words_per_second=2, sleep=slow_sleep))
    events = Events()
    task = asyncio.create_task(runner.run_turn(SESSION, turn("tell me a joke"), events))
    await asyncio.wait_for(paused.wait(), 5)
    assert events.text() == "(offline "  # the first word went out before the pause
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert delays == [0.5]
    assert events.text() == "(offline "


# --- usage and cost -----------------------------------------------------------------------------


async def test_usage_counts_tokens_and_prices_the_offline_model() -> None:
    table = {"offline": {"input_per_mtok": 1000.0, "output_per_mtok": 3000.0}}
    runner = BuiltinRunner(OfflineModel(0), prices=table)
    history = [HistoryEntry("user", "one two three"), HistoryEntry("assistant", "four five")]
    session_turn = turn("tell me a joke", history=history)
    outcome = await runner.run_turn(SESSION, session_turn, Events())
    usage = outcome.usage
    assert usage is not None
    instructions = runner.instructions(SESSION, session_turn)
    # words sent: overhead 50 + instructions + history (3 + 2) + prompt (4)
    assert usage["input_tokens"] == 50 + len(instructions.split()) + 5 + 4
    assert usage["output_tokens"] >= len((outcome.text or "").split()) > 0
    assert (usage["requests"], usage["tool_calls"], usage["model"]) == (1, 0, "offline")
    expected = cost_usd(
        load_prices(table), "offline", usage["input_tokens"], usage["output_tokens"]
    )
    assert usage["cost_usd"] == expected
    assert usage["cost_usd"] == pytest.approx(
        (usage["input_tokens"] * 1000 + usage["output_tokens"] * 3000) / 1e6
    )


async def test_usage_of_a_tool_turn_adds_up_both_requests(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    app = await make_cron()
    plain = await BuiltinRunner(OfflineModel(0)).run_turn(SESSION, turn("hello"), Events())
    tooled = await tool_runner(app, clock).run_turn(SESSION, turn("list my automations"), Events())
    assert plain.usage is not None
    assert tooled.usage is not None
    assert tooled.usage["requests"] == 2
    assert tooled.usage["input_tokens"] > 2 * 50  # two requests, each with its overhead
    assert plain.usage["cost_usd"] == tooled.usage["cost_usd"] == 0.0  # no price table


def test_invalid_price_table_is_rejected_at_construction() -> None:
    with pytest.raises(ValueError, match="must be a finite number >= 0"):
        BuiltinRunner(OfflineModel(0), prices={"offline": {"input_per_mtok": -1}})


# --- model resolution ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "env",
    [{}, {"AGENTCRON_MODEL": "offline"}, {"AGENTCRON_MODEL": " Offline "}, {"AGENTCRON_MODEL": ""}],
)
def test_resolve_model_defaults_to_offline(env: dict[str, str]) -> None:
    model, model_id = resolve_model(env=env)
    assert isinstance(model, OfflineModel)
    assert model_id == "offline"


def test_resolve_model_argument_wins_over_the_environment() -> None:
    model, model_id = resolve_model("offline", env={"AGENTCRON_MODEL": "openai:gpt-4.1-mini"})
    assert (type(model), model_id) == (OfflineModel, "offline")
    mine = OfflineModel(3)
    assert resolve_model(mine, env={"AGENTCRON_MODEL": "openai:gpt-4.1-mini"}) == (mine, "offline")


def test_resolve_model_keeps_a_model_instance() -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "ok"

    model = FunctionModel(stream_function=stream, model_name="scripted")
    assert resolve_model(model, env={}) == (model, "function:scripted")


@pytest.mark.parametrize("spec", ["openai:llama3", "openai-chat:llama3", "llama3"])
def test_resolve_model_with_a_base_url_is_openai_compatible(
    spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    env = {"AGENTCRON_MODEL": spec, "AGENTCRON_BASE_URL": "http://127.0.0.1:9/v1"}
    model, model_id = resolve_model(env=env)  # builds a client; opens no connection
    assert isinstance(model, OpenAIChatModel)
    assert model.model_name == "llama3"
    assert model_id == "openai:llama3"
    assert model.base_url.rstrip("/") == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("env", "key"),
    [
        ({}, "api-key-not-set"),  # a proxy that needs none, as on the OpenAI side
        ({"ANTHROPIC_API_KEY": "sk-ant-env"}, "sk-ant-env"),
        ({"ANTHROPIC_API_KEY": "sk-ant-env", "AGENTCRON_API_KEY": "sk-mine"}, "sk-mine"),
    ],
)
def test_resolve_model_with_a_base_url_speaks_anthropic_for_anthropic_names(
    env: dict[str, str], key: str
) -> None:
    from pydantic_ai.models.anthropic import AnthropicModel

    env = {
        **env,
        "AGENTCRON_MODEL": "anthropic:claude-x",
        "AGENTCRON_BASE_URL": "http://127.0.0.1:9",
    }
    model, model_id = resolve_model(env=env)  # builds a client; opens no connection
    assert isinstance(model, AnthropicModel)
    assert (model.model_name, model_id) == ("claude-x", "anthropic:claude-x")
    assert model.base_url.rstrip("/") == "http://127.0.0.1:9"
    assert model.client.api_key == key


def test_runner_resolves_its_model_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTCRON_MODEL", "offline")
    monkeypatch.setenv("AGENTCRON_OFFLINE_WPS", "0")
    runner = BuiltinRunner()
    assert isinstance(runner.model, OfflineModel)
    assert runner.model_id == "offline"
    assert runner.model.words_per_second == math.inf


# --- history ------------------------------------------------------------------------------------


def test_history_groups_neighbours_of_one_side() -> None:
    history = [
        HistoryEntry("user", "a"),
        HistoryEntry("user", "b"),
        HistoryEntry("assistant", "c"),
        HistoryEntry("assistant", "d"),
        HistoryEntry("system", "s"),
        HistoryEntry("user", "e"),
        HistoryEntry("assistant", "  "),  # blank entries are dropped
        HistoryEntry("user", ""),
        HistoryEntry("assistant", "f"),
    ]
    messages = history_to_messages(history)
    shape = [(type(m).__name__, [(type(p).__name__, p.content) for p in m.parts]) for m in messages]
    assert shape == [
        ("ModelRequest", [("UserPromptPart", "a"), ("UserPromptPart", "b")]),
        ("ModelResponse", [("TextPart", "c"), ("TextPart", "d")]),
        ("ModelRequest", [("SystemPromptPart", "s"), ("UserPromptPart", "e")]),
        ("ModelResponse", [("TextPart", "f")]),
    ]
    assert isinstance(messages[0], ModelRequest)
    assert isinstance(messages[1], ModelResponse)
    assert isinstance(messages[2].parts[0], SystemPromptPart)
    assert isinstance(messages[2].parts[1], UserPromptPart)
    assert isinstance(messages[3].parts[0], TextPart)


def test_earlier_messages_say_what_files_they_carried() -> None:
    sent = {"attachments": [{"kind": "photo", "name": "cat.jpg", "mime_type": "image/jpeg",
                             "size": 6, "inline": True}]}  # fmt: skip
    answered = {"attachments": [{"kind": "document", "url": "https://files.example/a.pdf"}]}
    asked, replied = history_to_messages(
        [HistoryEntry("user", "look", sent), HistoryEntry("assistant", "here", answered)]
    )
    assert [p.content for p in asked.parts] == [
        "look\n\n[attached photo “cat.jpg”: image/jpeg, 6 bytes, sent inline]"
    ]
    assert [p.content for p in replied.parts] == [  # type: ignore[union-attr]
        "here\n\n[attached document: type unknown, https://files.example/a.pdf]"
    ]


def test_history_edges() -> None:
    assert history_to_messages([]) == []
    (only,) = history_to_messages([HistoryEntry("user", "hi")])
    assert isinstance(only, ModelRequest)
    assert [p.content for p in only.parts] == ["hi"]
    (answer,) = history_to_messages([HistoryEntry("assistant", "hello")])
    assert isinstance(answer, ModelResponse)


async def test_history_reaches_the_model() -> None:
    history = [
        HistoryEntry("user", "my name is Ada"),
        HistoryEntry("assistant", "hello Ada"),
        HistoryEntry("user", "remind me in 10 minutes to stretch"),
        HistoryEntry("assistant", "Done"),
    ]
    outcome = await BuiltinRunner(OfflineModel(0)).run_turn(
        SESSION, turn("what did I say before?", history=history), Events()
    )
    assert outcome.text == (
        '(offline model) Before this you said: "remind me in 10 minutes to stretch"'
    )


def test_a_model_object_is_priced_by_provider_and_name_once() -> None:
    from pydantic_ai.providers.openai import OpenAIProvider

    chat = OpenAIChatModel("gpt-4.1-mini", provider=OpenAIProvider(api_key="sk-test"))
    assert resolve_model(chat)[1] == "openai:gpt-4.1-mini"
    # a name that already starts with its provider is not prefixed twice
    assert resolve_model(FunctionModel(lambda m, i: ModelResponse(parts=[])))[1] == (
        "function:<lambda>:"
    )


async def test_a_model_that_cannot_be_reached_says_the_cause_in_the_notice_and_the_log(
    make_cron: CronFactory, caplog: pytest.LogCaptureFixture
) -> None:
    import socket

    from openai import AsyncOpenAI
    from pydantic_ai.providers.openai import OpenAIProvider

    with socket.socket() as closed:  # a port nothing listens on: refused at once
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    client = AsyncOpenAI(base_url=f"http://user:pw@127.0.0.1:{port}/v1", api_key="k", max_retries=0)
    model = OpenAIChatModel("m", provider=OpenAIProvider(openai_client=client))
    cron = await make_cron(runner=BuiltinRunner(model))
    await cron.sessions.create("websocket:x")
    turn_id = (await cron.sessions.send("websocket:x", "hello")).id
    ended = await cron.sessions.wait_turn(turn_id, 10)
    cause = f"cannot reach the model at http://127.0.0.1:{port}/v1: Connection refused"
    assert ended.error == f"ModelConnectionError: {cause}"
    notice = (await cron.sessions.messages("websocket:x"))[-1].content
    assert notice == f"This turn failed (ModelConnectionError: {cause})."
    assert "pw" not in notice
    assert any(cause in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
