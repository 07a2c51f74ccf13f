"""The built-in agent on the offline model, end to end: sentences become jobs, fires become turns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentcron.agent.offline import OfflineModel
from agentcron.app import AgentCron
from agentcron.domain.events import Event, FireStarted, JobEvent, TextDelta, ToolCalled, ToolStarted
from agentcron.domain.jobs import CreatedBy, JobKind
from agentcron.domain.states import RunState, TurnState
from agentcron.schedule import AtSpec, CronSpec, EverySpec
from agentcron.service.sessions import Deletion
from agentcron.testing import FakeClock, wait_settled
from agentcron.turns.prompts import get_prompt
from tests.conftest import T0, CronFactory

MIN = timedelta(minutes=1)
KEY = "websocket:chat-1"


async def offline(make_cron: CronFactory, **kw: Any) -> AgentCron:
    kw.setdefault("model", OfflineModel(0))
    return await make_cron(runner=None, **kw)


async def say(cron: AgentCron, text: str, key: str = KEY) -> str:
    """Send a user message, wait for its turn, return the assistant's reply."""
    turn = await cron.sessions.send(key, text)
    await wait_settled(cron.engine)
    done = await cron.sessions.turn(turn.id)
    assert done.state is TurnState.SUCCEEDED, done.error
    messages = await cron.sessions.messages(key)
    reply = next(m for m in messages if m.id == done.reply_message_id)
    return reply.content


async def advance(cron: AgentCron, clock: FakeClock, delta: timedelta) -> None:
    clock.advance(delta)
    await wait_settled(cron.engine)


async def test_a_reminder_from_a_sentence_arrives_as_a_turn_of_the_session(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron)
    events: list[Event] = []
    cron.subscribe(events.append)

    reply = await say(cron, "remind me in 10 minutes to stretch")
    assert reply.startswith("(offline model) Done: Scheduled “stretch”")
    (job,) = await cron.jobs.list()
    assert (job.session_key, job.kind, job.created_by) == (KEY, JobKind.AGENT_TURN, CreatedBy.AGENT)
    assert job.spec == AtSpec(at=T0 + 10 * MIN)
    tool_events = [type(e) for e in events if isinstance(e, (ToolStarted, ToolCalled))]
    assert tool_events == [ToolStarted, ToolCalled]

    events.clear()
    await advance(cron, clock, 9 * MIN)
    asked, call, done = await cron.sessions.messages(KEY)  # nothing yet
    # The tool call is in the transcript, between the request and the reply (seed 004).
    assert (asked.role, call.role, done.role) == ("user", "tool", "assistant")
    assert call.meta["name"] == "cron"
    assert call.meta["args"]["action"] == "add"
    assert call.content.startswith("Scheduled “stretch”")
    await advance(cron, clock, MIN)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    trigger, answer = (await cron.sessions.messages(KEY))[3:]
    assert trigger.role == "user"
    assert trigger.content == "Scheduled automation triggered: stretch\n\nstretch"
    assert trigger.meta["automation_prompt_ref"] == get_prompt("cron.agent_turn.reminder").ref
    assert "[scheduled]" not in trigger.content  # the rendered prompt is only in the run record
    assert run.prompt is not None
    assert "[scheduled]" in run.prompt
    assert answer.content == "(offline model) Reminder: stretch."
    assert answer.meta["automation_run_id"] == run.id
    assert run.usage is not None
    assert run.usage["input_tokens"] > 0
    assert run.usage["model"] == "offline"
    # the scheduled turn streamed to listeners exactly like a user turn, between job updates
    actions = [e.action for e in events if isinstance(e, JobEvent)]
    # settled: the job's update is committed; a one-shot is then removed (deleted)
    assert actions == ["fired", "finished", "settled", "deleted"]
    turn_kinds = [e.type for e in events
                  if e.session_key == KEY and not isinstance(e, (JobEvent, FireStarted))]  # fmt: skip
    assert turn_kinds[0] == "stream_start"
    assert "text_delta" in turn_kinds
    assert turn_kinds[-2:] == ["stream_end", "session_sync"]
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert streamed == answer.content
    assert await cron.jobs.list() == []  # a one-shot reminder is removed after its run
    totals = await cron.sessions.usage(KEY)
    assert totals["counted"] == 2
    assert totals["input_tokens"] > run.usage["input_tokens"]


async def test_a_recurring_sentence_becomes_a_wall_clock_automation(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron)
    await cron.sessions.create(KEY, tz="Europe/Berlin")
    reply = await say(cron, "every weekday at 9 check the build")
    assert "every weekday at 09:00 (Europe/Berlin)" in reply
    (job,) = await cron.jobs.list()
    assert job.spec == CronSpec(expr="0 9 * * 1-5", tz="Europe/Berlin")
    # T0 is Sunday 2026-11-22 12:00 UTC; the next weekday 09:00 Berlin is Monday 08:00 UTC
    assert job.next_fire_at == T0 + timedelta(hours=20)
    await advance(cron, clock, timedelta(hours=20))
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    last = (await cron.sessions.messages(KEY))[-1]
    assert last.content == "(offline model) Reminder: check the build."
    assert (await cron.jobs.get(job.id)).next_fire_at == T0 + timedelta(hours=44)


async def test_a_recall_from_a_sentence_runs_with_its_self_instruction(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron)
    reply = await say(cron, "follow up in 30 seconds and check the logs")
    assert "Recall scheduled" in reply
    (recall,) = await cron.jobs.list()
    assert recall.kind is JobKind.RECALL
    assert recall.message == "check the logs"
    # one pending recall per session: a second one is refused, readably
    refused = await say(cron, "follow up in 5 minutes and check the disk")
    assert "That did not work" in refused
    assert "already has a pending recall" in refused
    assert len(await cron.jobs.list()) == 1

    await advance(cron, clock, timedelta(seconds=30))
    (run,) = await cron.runs.list(recall.id)
    assert run.state is RunState.SUCCEEDED
    assert run.prompt_ref == get_prompt("cron.recall").ref
    trigger, answer = (await cron.sessions.messages(KEY))[-2:]
    assert trigger.meta["_recall_turn"] is True
    assert trigger.content == "Scheduled recall triggered: follow up: check the logs"
    assert answer.content == "(offline model) Follow-up: check the logs."
    assert await cron.jobs.list() == []


async def test_list_pause_resume_and_cancel_by_sentence(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron)
    assert "No automations" in await say(cron, "list my automations")
    await say(cron, "every day at 7:30 water the plants")
    listed = await say(cron, "list my automations")
    assert "water the plants" in listed
    assert "every day at 07:30 (UTC)" in listed
    assert "Paused" in await say(cron, "pause the automation water the plants")
    (job,) = await cron.jobs.list()
    assert not job.enabled
    assert job.paused_reason == "paused by the agent"
    assert "Resumed" in await say(cron, "resume the automation water the plants")
    assert (await cron.jobs.get(job.id)).enabled
    missing = await say(cron, "cancel the automation feed the cat")
    assert "no automation 'feed the cat'" in missing
    assert "Removed" in await say(cron, "cancel the automation water the plants")
    assert await cron.jobs.list() == []


async def test_a_failing_model_leaves_a_short_failure_and_the_details_in_the_run(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    async def broken(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        raise ConnectionError("api.example.com: 503 Service Unavailable\n<html>...</html>")
        yield ""  # an async generator, as a streaming model is

    cron = await offline(make_cron, model=FunctionModel(stream_function=broken))
    job = await cron.jobs.create(name="digest", when="in 1m", message="sum up", session_key=KEY)
    await advance(cron, clock, MIN)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.FAILED
    assert run.error is not None
    assert run.error.startswith("ConnectionError: api.example.com: 503")
    assert run.error_details is not None
    assert "<html>" in run.error_details["message"]
    closing = (await cron.sessions.messages(KEY))[-1]
    assert closing.content == (
        "Scheduled automation “digest” failed (ConnectionError). Details are in its run record."
    )


async def test_stop_ends_a_streaming_turn_and_a_waiting_fire_runs_after_it(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    gate = asyncio.Event()
    streaming = asyncio.Event()
    words: list[float] = []

    async def slow(delay: float) -> None:
        words.append(delay)
        streaming.set()
        await gate.wait()

    cron = await offline(make_cron, model=OfflineModel(5, sleep=slow))
    job = await cron.jobs.create(name="ping", when="in 1m", message="ping", session_key=KEY)
    turn = await cron.sessions.send(KEY, "tell me something long")
    await streaming.wait()  # the reply is streaming, paced at 5 words/s
    assert words[0] == pytest.approx(0.2)
    clock.advance(MIN)
    await wait_settled(cron.engine, busy_ok=True)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.DEFERRED  # it waits; it never enters the streaming turn
    assert await cron.sessions.stop(KEY) is True
    gate.set()
    await wait_settled(cron.engine)
    stopped = await cron.sessions.turn(turn.id)
    assert stopped.state is TurnState.CANCELLED
    assert stopped.error == "stopped by the user"
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED


async def test_unified_mode_binds_web_chat_automations_to_the_unified_session(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron, unified_session=True)
    await say(cron, "every day at 8 read the news", key="websocket:a")
    (job,) = await cron.jobs.list()
    assert job.session_key == "unified:default"
    # every web chat lists it
    assert "read the news" in await say(cron, "list my automations", key="websocket:b")
    assert [j.id for j in await cron.jobs.for_session("websocket:b")] == [job.id]
    # other channels keep their own automations
    await say(cron, "every day at 9 stretch", key="telegram:42")
    assert {j.session_key for j in await cron.jobs.list()} == {"unified:default", "telegram:42"}
    # deleting one web thread neither blocks on nor deletes the unified automations
    assert await cron.sessions.delete("websocket:a") == Deletion(True)
    assert job.id in [j.id for j in await cron.jobs.list()]
    # the fire is the unified session's, its turn runs in the thread last talked in (b)
    await advance(cron, clock, timedelta(hours=20))
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    assert run.session_key == "unified:default"
    last = (await cron.sessions.messages("websocket:b"))[-1]
    assert last.content == "(offline model) Reminder: read the news."


async def test_toggling_unified_mode_migrates_nothing(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron, unified_session=True)
    await say(cron, "every day at 8 read the news", key="websocket:a")
    await cron.close()
    plain = await offline(make_cron, unified_session=False)
    (job,) = await plain.jobs.list()
    assert job.session_key == "unified:default"  # kept as stored
    await say(plain, "every day at 9 stretch", key="websocket:a")
    assert {j.session_key for j in await plain.jobs.list()} == {"unified:default", "websocket:a"}
    assert [j.name for j in await plain.jobs.for_session("websocket:a")] == ["stretch"]


async def test_the_scheduling_tools_need_a_session_context(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron)
    from agentcron.agent.runner import SessionInfo, TurnInput, TurnSource

    deps = cron.tool_deps(
        SessionInfo(key="telegram:7", tz="Asia/Tokyo"),
        TurnInput(turn_id="t", source=TurnSource.AUTOMATION, prompt="x", now=clock.now()),
    )
    assert (deps.session_key, deps.owner, deps.tz) == ("telegram:7", "telegram:7", "Asia/Tokyo")
    assert deps.in_scheduled_turn
    assert deps.now == T0


async def test_too_frequent_schedules_from_the_agent_are_refused_readably(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron)
    refused = await say(cron, "follow up every 10 seconds and check the queue")
    assert "That did not work: Error: a recurring recall needs interval_seconds >= 60" in refused
    assert "recurring automations may run at most every 5 minutes" in (
        await say(cron, "every 1 minute check the queue")
    )
    assert await cron.jobs.list() == []
    accepted = await say(cron, "follow up every 10 minutes and check the queue")
    assert "Recall scheduled" in accepted
    (recall,) = await cron.jobs.list()
    assert recall.spec == EverySpec(seconds=600, anchor=T0)


async def test_deleting_a_session_cancels_its_recall_without_blocking(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron)
    await say(cron, "follow up in 10 minutes and check the logs")
    await say(cron, "follow up in 10 minutes and check the logs", key="websocket:other")
    assert len(await cron.jobs.list(kind=JobKind.RECALL)) == 2
    # a recall is not a user automation: it does not block the delete, it goes with the session
    assert await cron.sessions.delete(KEY) == Deletion(True)
    (left,) = await cron.jobs.list()
    assert left.session_key == "websocket:other"
    await advance(cron, clock, 10 * MIN)
    assert [r.session_key for r in await cron.runs.list(left.id)] == ["websocket:other"]
    with pytest.raises(LookupError):
        await cron.sessions.get(KEY)
