"""Bound fires as session turns: lanes, deferral, transcript entries, closures, deletion."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput, TurnSource
from agentcron.config import EngineSettings
from agentcron.domain.jobs import Overlap
from agentcron.domain.states import RunState, TurnState
from agentcron.service.sessions import Deletion
from agentcron.store import SqlStore
from agentcron.store.writes import TurnStart
from agentcron.testing import FakeClock, wait_settled
from agentcron.turns.prompts import get_prompt
from tests.conftest import BACKENDS, CronFactory

MIN = timedelta(minutes=1)
KEY = "websocket:chat-1"


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """Every scenario here runs on SQLite and on PostgreSQL."""
    return str(request.param)


class ScriptedAgent:
    """A Runner that streams a scripted reply; turns can be held open to make a session busy."""

    def __init__(self) -> None:
        self.turns: list[TurnInput] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.started = asyncio.Event()
        self.fail_with: Exception | None = None
        self.reply: str | None = None

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        self.turns.append(turn)
        self.started.set()
        await events.emit({"type": "text_delta", "text": "thinking"})
        await self.hold.wait()
        if self.fail_with is not None:
            raise self.fail_with
        reply = self.reply if self.reply is not None else f"reply to: {turn.prompt[:40]}"
        return Outcome.succeeded(reply) if reply else Outcome.empty()


async def close_as_the_turn_ends(cron: Any, agent: ScriptedAgent) -> None:
    """Stop `cron` gracefully while its held turn is let go a moment later (it finishes inside
    the grace period; whatever waits behind it is handed back for the next start).
    """

    async def finish_soon() -> None:
        await asyncio.sleep(0.05)
        agent.hold.set()

    task = asyncio.create_task(finish_soon())
    await cron.close(grace=5)
    await task


async def settle(cron: Any, clock: FakeClock, delta: timedelta = timedelta(0)) -> None:
    clock.advance(delta)
    await wait_settled(cron.engine, busy_ok=True)


@pytest.fixture
def agent() -> ScriptedAgent:
    return ScriptedAgent()


async def test_a_fire_is_a_turn_of_its_session_with_a_readable_entry(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    cron = await make_cron(runner=agent)
    await cron.sessions.create(KEY, tz="Europe/Berlin")
    job = await cron.jobs.create(
        name="daily monitor", when="in 1m", message="Check the build", session_key=KEY
    )
    await settle(cron, clock, MIN)
    await wait_settled(cron.engine)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    entries = await cron.sessions.messages(KEY)
    assert [e.role for e in entries] == ["user", "assistant"]
    trigger, reply = entries
    assert trigger.content == "Scheduled automation triggered: daily monitor\n\nCheck the build"
    template = get_prompt("cron.agent_turn.reminder")
    assert trigger.meta["_automation_turn"] is True
    assert trigger.meta["automation_id"] == job.id
    assert trigger.meta["automation_name"] == "daily monitor"
    assert trigger.meta["automation_run_id"] == run.id
    assert trigger.meta["automation_prompt_ref"] == template.ref
    assert len(template.ref["sha256"]) == 64
    # the rendered prompt lives in the run record only, never in the transcript
    assert run.prompt is not None
    assert "Check the build" in run.prompt
    assert "[scheduled]" in run.prompt
    assert "[scheduled]" not in trigger.content
    assert run.prompt_ref == template.ref
    assert run.prompt_vars is not None
    assert run.prompt_vars["tz"] == "Europe/Berlin"
    assert agent.turns[0].prompt == run.prompt
    assert agent.turns[0].source is TurnSource.AUTOMATION
    assert reply.content.startswith("reply to: [scheduled]")
    assert reply.meta["automation_run_id"] == run.id
    assert run.message_id == reply.id


async def test_a_fire_while_a_user_turn_streams_waits_and_runs_right_after(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    cron = await make_cron(runner=agent)
    job = await cron.jobs.create(name="ping", when="in 1m", message="ping", session_key=KEY)
    agent.hold.clear()
    user_turn = await cron.sessions.send(KEY, "tell me a long story")
    await agent.started.wait()
    await settle(cron, clock, MIN)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.DEFERRED  # queued behind the answer in progress
    assert len(agent.turns) == 1  # the running turn never saw the trigger
    assert all("ping" not in t.prompt for t in agent.turns)
    agent.hold.set()
    await wait_settled(cron.engine)
    assert [t.source for t in agent.turns] == [TurnSource.USER, TurnSource.AUTOMATION]
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    assert run.deferred_at == clock.now()
    roles = [(e.role, e.meta.get("turn_id")) for e in await cron.sessions.messages(KEY)]
    assert roles[:2] == [("user", user_turn.id), ("assistant", user_turn.id)]  # not interleaved
    assert (await cron.sessions.turn(user_turn.id)).state is TurnState.SUCCEEDED


async def test_two_fires_of_one_job_while_busy_follow_the_overlap_policy(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    cron = await make_cron(runner=agent)
    buffering = await cron.jobs.create(name="b", when="every 1m", session_key=KEY)  # default
    deferring = await cron.jobs.create(
        name="d", when="every 1m", session_key=KEY, overlap=Overlap.DEFER
    )
    skipping = await cron.jobs.create(
        name="s", when="every 1m", session_key="websocket:other", overlap=Overlap.SKIP
    )
    agent.hold.clear()
    await cron.sessions.send(KEY, "busy")
    await cron.sessions.send("websocket:other", "busy too")
    await settle(cron, clock, MIN)
    await settle(cron, clock, MIN)
    agent.hold.set()
    await wait_settled(cron.engine)
    assert [r.state for r in reversed(await cron.runs.list(deferring.id))] == [
        RunState.SUCCEEDED,
        RunState.SUCCEEDED,
    ]
    # by default at most one fire of a job waits: the second one, behind it, is skipped
    runs = list(reversed(await cron.runs.list(buffering.id)))
    assert [r.state for r in runs] == [RunState.SUCCEEDED, RunState.SKIPPED]
    assert runs[1].error is not None
    assert runs[1].error.startswith("skipped:")
    assert [r.state for r in reversed(await cron.runs.list(skipping.id))] == [
        RunState.SUCCEEDED,
        RunState.SKIPPED,
    ]


async def test_a_deferred_trigger_survives_a_restart(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    cron = await make_cron(runner=agent)
    job = await cron.jobs.create(name="ping", when="in 1m", message="ping", session_key=KEY)
    agent.hold.clear()
    await cron.sessions.send(KEY, "long answer")
    await agent.started.wait()
    await settle(cron, clock, MIN)
    assert (await cron.runs.list(job.id))[0].state is RunState.DEFERRED

    await close_as_the_turn_ends(cron, agent)  # the deferred trigger is released
    again = ScriptedAgent()
    cron2 = await make_cron(runner=again)
    await wait_settled(cron2.engine)
    (run,) = await cron2.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    assert [t.source for t in again.turns] == [TurnSource.AUTOMATION]


async def test_a_failing_model_leaves_a_short_failure_and_details_in_the_run(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    agent.fail_with = ConnectionError("api.example: 503 Service Unavailable, body: <html>...")
    cron = await make_cron(runner=agent)
    job = await cron.jobs.create(name="digest", when="in 1m", session_key=KEY)
    await settle(cron, clock, MIN)
    await wait_settled(cron.engine)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.FAILED
    assert run.error is not None
    assert "503" in run.error
    assert run.error_details is not None
    assert "Traceback" in run.error_details["traceback"]
    closing = (await cron.sessions.messages(KEY))[-1]
    assert closing.role == "assistant"
    assert closing.content == (
        "Scheduled automation “digest” failed (ConnectionError). Details are in its run record."
    )
    assert "503" not in closing.content


async def test_an_empty_result_leaves_a_status_message(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    agent.reply = ""
    cron = await make_cron(runner=agent)
    job = await cron.jobs.create(name="quiet", when="in 1m", session_key=KEY)
    await settle(cron, clock, MIN)
    await wait_settled(cron.engine)
    assert (await cron.runs.list(job.id))[0].state is RunState.EMPTY
    closing = (await cron.sessions.messages(KEY))[-1]
    assert closing.content == "Scheduled automation “quiet” ran and had nothing to report."


async def test_history_reaches_the_runner_and_stop_ends_a_turn(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    cron = await make_cron(runner=agent)
    first = await cron.sessions.send(KEY, "my name is Ada")
    await wait_settled(cron.engine)
    agent.hold.clear()
    agent.started.clear()
    second = await cron.sessions.send(KEY, "what is my name?")
    await agent.started.wait()
    assert [h.content for h in agent.turns[1].history] == [
        "my name is Ada",
        "reply to: my name is Ada",
    ]
    assert await cron.sessions.stop(KEY) is True
    await wait_settled(cron.engine)
    stopped = await cron.sessions.turn(second.id)
    assert stopped.state is TurnState.CANCELLED
    assert stopped.error == "stopped by the user"
    assert (await cron.sessions.turn(first.id)).state is TurnState.SUCCEEDED
    assert await cron.sessions.stop(KEY) is False


async def test_stop_before_the_runner_is_called_is_not_lost(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    """A turn that is current but still waits for a slot (here: the one slot is taken by
    another session's turn) is stopped too: it ends cancelled and the runner never sees it.
    """
    cron = await make_cron(runner=agent, settings=EngineSettings(max_concurrent_runs=1))
    agent.hold.clear()
    busy = await cron.sessions.send("websocket:other", "hold the only slot")
    await agent.started.wait()
    waiting = await cron.sessions.send(KEY, "never reaches the runner")
    async with asyncio.timeout(5):
        # the lane makes the turn current on its next step; no event marks that instant
        while cron.sessions.running_turn(KEY) is None:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    assert await cron.sessions.stop(KEY) is True
    agent.hold.set()
    await wait_settled(cron.engine)
    assert [t.prompt for t in agent.turns] == ["hold the only slot"]
    stopped = await cron.sessions.turn(waiting.id)
    assert stopped.state is TurnState.CANCELLED
    assert stopped.error == "stopped by the user"
    assert (await cron.sessions.turn(busy.id)).state is TurnState.SUCCEEDED
    assert await cron.sessions.stop(KEY) is False


async def test_session_delete_is_two_step_with_bound_automations(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    cron = await make_cron(runner=agent)
    await cron.sessions.create(KEY)
    bound = await cron.jobs.create(name="monitor", when="every 1h", session_key=KEY)
    from agentcron.domain.jobs import JobKind

    system = await cron.jobs.create(
        name="heartbeat", when="every 30m", session_key=KEY, kind=JobKind.SYSTEM_EVENT
    )
    answer = await cron.sessions.delete(KEY)
    assert not answer.deleted
    assert [(j.id, j.name, j.enabled) for j in answer.blocking] == [(bound.id, "monitor", True)]
    assert await cron.sessions.get(KEY)  # nothing was lost
    answer = await cron.sessions.delete(KEY, confirm=True)
    assert answer == Deletion(True, deleted_automations=[bound.id])
    assert [j.id for j in await cron.jobs.list()] == [system.id]


async def test_concurrency_slots_are_shared_by_user_and_scheduled_turns(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    cron = await make_cron(runner=agent, settings=EngineSettings(max_concurrent_runs=2))
    agent.hold.clear()
    for i in range(3):
        await cron.sessions.send(f"websocket:{i}", "hi")
    await wait_settled(cron.engine, busy_ok=True)
    await asyncio.sleep(0.05)
    assert len(agent.turns) == 2
    # the saturation the metrics show: two turns in their runner, one waiting for a slot
    status = cron.status()
    assert (status.turns_in_runner, status.awaiting_slot) == (2, 1)
    agent.hold.set()
    await wait_settled(cron.engine)
    assert len(agent.turns) == 3
    status = cron.status()
    assert (status.turns_in_runner, status.awaiting_slot) == (0, 0)


async def test_usage_is_recorded_on_runs_and_turns_and_summed(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    class Metered(ScriptedAgent):
        async def run_turn(
            self, session: SessionInfo, turn: TurnInput, events: TurnEvents
        ) -> Outcome:
            self.turns.append(turn)
            usage = {"input_tokens": 100, "output_tokens": 20, "requests": 1, "cost_usd": 0.0005}
            return Outcome.succeeded("ok", usage=usage)

    cron = await make_cron(runner=Metered())
    job = await cron.jobs.create(name="m", when="every 1m", session_key=KEY)
    await cron.sessions.send(KEY, "hello")
    for _ in range(3):
        await settle(cron, clock, MIN)
    await wait_settled(cron.engine)
    (run, *_) = await cron.runs.list(job.id)
    assert run.usage == {
        "input_tokens": 100,
        "output_tokens": 20,
        "requests": 1,
        "cost_usd": 0.0005,
    }
    assert await cron.store.usage_totals(job_id=job.id) == {
        "counted": 3, "input_tokens": 300, "output_tokens": 60, "cost_usd": 0.0015,
        "unpriced": 0,
    }  # fmt: skip
    assert await cron.store.usage_totals(session_key=KEY) == {
        "counted": 4, "input_tokens": 400, "output_tokens": 80, "cost_usd": 0.002,
        "unpriced": 0,
    }  # fmt: skip


async def test_waiting_for_a_turn_and_a_run_wakes_when_they_end(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    cron = await make_cron(runner=agent)
    job = await cron.jobs.create(name="ping", when="in 1m", message="ping", session_key=KEY)
    agent.hold.clear()
    turn = await cron.sessions.send(KEY, "hold on")
    await agent.started.wait()
    still = await cron.sessions.wait_turn(turn.id, 0.05)  # the wait ends: returned as it is
    assert still.state is TurnState.RUNNING
    await settle(cron, clock, MIN)
    (run,) = await cron.runs.list(job.id)
    waiting_turn = asyncio.create_task(cron.sessions.wait_turn(turn.id, 30))
    waiting_run = asyncio.create_task(cron.runs.wait(run.id, 30))
    await asyncio.sleep(0.05)
    assert not waiting_turn.done()
    assert not waiting_run.done()
    agent.hold.set()
    async with asyncio.timeout(5):  # woken by the end, not by the 30 s bound
        assert (await waiting_turn).state is TurnState.SUCCEEDED
        assert (await waiting_run).state is RunState.SUCCEEDED
    assert (await cron.runs.wait(run.id, 0)).state is RunState.SUCCEEDED


async def test_a_stopped_scheduled_turn_is_cancelled_not_a_failure(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    cron = await make_cron(runner=agent)
    job = await cron.jobs.create(name="digest", when="every 1m", session_key=KEY, max_failures=3)
    for _ in range(5):  # more stops than max_failures
        agent.hold.clear()
        agent.started.clear()
        clock.advance(MIN)
        await agent.started.wait()
        assert await cron.sessions.stop(KEY) is True
        await wait_settled(cron.engine)
    runs = await cron.runs.list(job.id)
    assert [r.state for r in runs] == [RunState.CANCELLED] * 5
    assert all(r.error == "stopped by the user" for r in runs)
    job = await cron.jobs.get(job.id)
    assert job.enabled  # not auto-paused
    assert job.consecutive_failures == 0
    assert job.next_fire_at == clock.now() + MIN  # no backoff: the next fire is on its grid
    turns = await cron.sessions.turns(KEY)
    assert [t.state for t in turns] == [TurnState.CANCELLED] * 5
    closing = (await cron.sessions.messages(KEY))[-1]
    assert closing.content == "Scheduled automation “digest” was stopped."
    assert closing.meta["status"] == "cancelled"


async def test_a_turn_that_waited_for_a_slot_starts_when_it_gets_one(
    make_cron: CronFactory, clock: FakeClock, agent: ScriptedAgent
) -> None:
    """Its start time, its trigger entry's time and its lease count from the slot, not from
    when it began to wait (the soak saw turns 'running' for seconds before their runner).
    """
    settings = EngineSettings(max_concurrent_runs=1)
    cron = await make_cron(runner=agent, settings=settings)
    agent.hold.clear()
    first = await cron.sessions.send("websocket:a", "hi")
    await wait_settled(cron.engine, busy_ok=True)
    waiting = await cron.sessions.send("websocket:b", "hello")
    await wait_settled(cron.engine, busy_ok=True)
    assert cron.status().awaiting_slot == 1
    clock.advance(10 * MIN)  # the second turn waits 10 minutes for the only slot
    agent.hold.set()
    await wait_settled(cron.engine)
    t0 = (await cron.sessions.turn(first.id)).started_at
    turn = await cron.sessions.turn(waiting.id)
    assert t0 is not None
    assert turn.state is TurnState.SUCCEEDED
    assert turn.started_at == t0 + 10 * MIN
    (trigger, *_) = await cron.sessions.messages("websocket:b")
    assert trigger.created_at == t0 + 10 * MIN


async def test_a_stop_while_a_turn_start_is_being_written_closes_that_turn(
    make_cron: CronFactory, cron_url: str, agent: ScriptedAgent
) -> None:
    """The soak's stray `running` turn: a graceful stop cancels a lane while its start is in
    the group commit. The start still commits, so the turn must end (interrupted, visible
    notice, session lease let go) instead of staying `running` with its lease held.
    """
    cron = await make_cron(runner=agent)
    await cron.sessions.create(KEY)
    gate, entered = asyncio.Event(), asyncio.Event()
    apply = cron.store.apply

    async def slow_apply(writes: Any, finisher: Any) -> Any:
        if any(isinstance(w, TurnStart) for w in writes):
            entered.set()
            await gate.wait()
        return await apply(writes, finisher)

    cron.store.apply = slow_apply  # type: ignore[method-assign]
    turn = await cron.sessions.send(KEY, "hi")
    await asyncio.wait_for(entered.wait(), 10)

    async def open_gate_soon() -> None:
        await asyncio.sleep(0.3)  # after the grace has run out and the lane was cancelled
        gate.set()

    opener = asyncio.create_task(open_gate_soon())
    await cron.close(grace=0.05)
    await opener
    assert agent.turns == []  # it never reached its runner
    store = SqlStore(cron_url)
    await store.open()
    try:
        ended = await store.sessions.get_turn(turn.id)
        session = await store.sessions.get_session(KEY)
        entries = await store.sessions.list_messages(KEY)
    finally:
        await store.close()
    assert ended.state is TurnState.INTERRUPTED
    assert session.turn_owner is None
    assert [m.role for m in entries] == ["user", "assistant"]  # its trigger, then the notice


async def test_a_stop_while_the_next_turn_starts_with_the_ends_write_closes_both_turns(
    make_cron: CronFactory, cron_url: str, clock: FakeClock, agent: ScriptedAgent
) -> None:
    """Back-to-back turns: a fire's start is written with the end of the turn before it (one
    transaction). A graceful stop that comes while that transaction is under way hands the
    fire back no more: its start commits, so it ends interrupted with its notice (its run
    too) and the session's lease let go; the first turn ends with its reply.
    """
    agent.hold.clear()
    cron = await make_cron(runner=agent)
    job = await cron.jobs.create(name="ping", when="in 1m", message="ping", session_key=KEY)
    gate, entered = asyncio.Event(), asyncio.Event()
    apply = cron.store.apply

    async def slow_apply(writes: Any, finisher: Any) -> Any:
        if any(isinstance(w, TurnStart) for w in writes) and len(writes) > 1:
            entered.set()  # the first turn's end with the fire's start
            await gate.wait()
        return await apply(writes, finisher)

    cron.store.apply = slow_apply  # type: ignore[method-assign]
    first = await cron.sessions.send(KEY, "one")
    await asyncio.wait_for(agent.started.wait(), 10)
    await settle(cron, clock, MIN)  # the fire is claimed, deferred behind the first turn
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.DEFERRED
    agent.hold.set()
    await asyncio.wait_for(entered.wait(), 10)

    async def open_gate_soon() -> None:
        await asyncio.sleep(0.3)  # after the stop took the fire's turn out of its lane
        gate.set()

    opener = asyncio.create_task(open_gate_soon())
    await cron.close(grace=0.05)
    await opener
    assert [t.prompt for t in agent.turns] == ["one"]  # the fire never reached its runner
    store = SqlStore(cron_url)
    await store.open()
    try:
        ended = await store.sessions.get_turn(first.id)
        (run,) = await store.list_runs(job_id=job.id)
        session = await store.sessions.get_session(KEY)
        entries = await store.sessions.list_messages(KEY)
        fired = await store.sessions.get_turn(entries[2].meta["turn_id"])  # its trigger's
    finally:
        await store.close()
    assert ended.state is TurnState.SUCCEEDED
    assert fired.state is TurnState.INTERRUPTED
    assert run.state is RunState.INTERRUPTED
    assert session.turn_owner is None
    assert [m.role for m in entries] == ["user", "assistant", "user", "assistant"]
    assert entries[1].content == "reply to: one"
