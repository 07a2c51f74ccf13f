"""A turn waiting for a tool call's approval holds its session but not an engine slot
(`runner.paused()`, used by the gate): other sessions' fires run meanwhile, the turn takes a
slot again after the decision, a stop or shutdown while it waits leaves every counter and the
slot pool exact, and the wait does not count against the turn's timeout.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest

from agentcron.agent.gate import UserTool
from agentcron.agent.offline import OfflineModel
from agentcron.agent.runner import (
    Outcome,
    SessionInfo,
    TurnEvents,
    TurnInput,
    paused,
    turn_pause,
)
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.approvals import CANCELLED_DECIDER, Approval, ApprovalState
from agentcron.domain.states import RunState, TurnState
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import CronFactory

MIN = timedelta(minutes=1)
calls: list[str] = []


def delete_file(path: str) -> str:
    """Delete a file."""
    calls.append(path)
    return f"deleted {path}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    calls.clear()


async def offline(make_cron: CronFactory, slots: int = 2, **kw: Any) -> AgentCron:
    settings = EngineSettings(max_concurrent_runs=slots, **kw.pop("settings", {}))
    return await make_cron(
        runner=None,
        model=OfflineModel(0),
        tools=[UserTool(delete_file, requires_approval=True)],
        settings=settings,
        **kw,
    )


async def waiting_approvals(cron: AgentCron, count: int) -> list[Approval]:
    """The pending approvals once `count` are requested (fails within a second if fewer are)."""
    for _ in range(200):
        found = await cron.approvals.list()
        if len(found) >= count:
            break
        await asyncio.sleep(0.005)
    await wait_settled(cron.engine, busy_ok=True)
    found = await cron.approvals.list()
    assert len(found) == count, [a.session_key for a in found]
    return found


async def until(cron: AgentCron, expected: tuple[int, int, int]) -> None:
    """Wait (at most 2 s) until (in runner, awaiting a slot, awaiting approval) is `expected`;
    then until the engine has settled.
    """
    for _ in range(1000):
        if counters(cron) == expected:
            break
        await asyncio.sleep(0.002)
    await wait_settled(cron.engine, busy_ok=True)
    assert counters(cron) == expected


def counters(cron: AgentCron) -> tuple[int, int, int]:
    status = cron.status()
    return status.turns_in_runner, status.awaiting_slot, status.awaiting_approval


def free_slots(cron: AgentCron) -> int:
    """The slot pool's free count (shared by turns and isolated runs)."""
    return cron.lanes.slots._free


async def test_turns_waiting_for_approval_hold_no_slot_so_other_fires_run(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron, slots=2)
    waiting = []
    for i in range(5):
        waiting.append(
            await cron.sessions.send(f"websocket:w{i}", f"call delete_file with path=/{i}")
        )
    # all five reach their approval though only two slots exist
    approvals = await waiting_approvals(cron, 5)
    assert counters(cron) == (0, 0, 5)
    assert free_slots(cron) == 2
    jobs = [
        await cron.jobs.create(
            name=f"ping {i}", when="in 1m", message="ping", session_key=f"websocket:o{i}"
        )
        for i in range(20)
    ]
    clock.advance(MIN)
    await wait_settled(cron.engine, busy_ok=True)
    async with asyncio.timeout(3):  # on a lane that keeps the slots, never (they time out)
        for job in jobs:
            (run,) = await cron.runs.list(job.id)
            assert (await cron.runs.wait(run.id, 1)).state is RunState.SUCCEEDED
    assert counters(cron) == (0, 0, 5)  # the five still wait, holding their sessions
    assert [(await cron.sessions.turn(t.id)).state for t in waiting] == [TurnState.RUNNING] * 5
    assert calls == []

    # approve one: it takes a slot again, its tool runs and its turn completes
    first = next(a for a in approvals if a.session_key == "websocket:w0")
    await cron.approvals.decide(first.id, "approve", by="ana")
    done = await cron.sessions.wait_turn(waiting[0].id, 2)
    assert done.state is TurnState.SUCCEEDED
    reply = next(
        m for m in await cron.sessions.messages("websocket:w0") if m.id == done.reply_message_id
    )
    assert reply.content == "(offline model) Done: deleted /0"
    assert calls == ["/0"]
    assert counters(cron) == (0, 0, 4)
    assert free_slots(cron) == 2
    for approval in approvals:
        if approval.id != first.id:
            await cron.approvals.decide(approval.id, "deny", by="ana")
    await wait_settled(cron.engine)
    assert counters(cron) == (0, 0, 0)
    assert free_slots(cron) == 2
    assert calls == ["/0"]


async def test_a_message_to_a_waiting_session_runs_after_the_decision(
    make_cron: CronFactory,
) -> None:
    cron = await offline(make_cron, slots=1)
    key = "websocket:chat"
    first = await cron.sessions.send(key, "call delete_file with path=/a")
    (approval,) = await waiting_approvals(cron, 1)
    second = await cron.sessions.send(key, "hello there")
    await wait_settled(cron.engine, busy_ok=True)
    # the session is held: the message waits behind the paused turn, though a slot is free
    assert (await cron.sessions.turn(second.id)).state is TurnState.QUEUED
    assert cron.status().turns_waiting == 1
    assert free_slots(cron) == 1
    await cron.approvals.decide(approval.id, "approve", by="ana")
    await wait_settled(cron.engine)
    turns = [await cron.sessions.turn(t.id) for t in (first, second)]
    assert [t.state for t in turns] == [TurnState.SUCCEEDED] * 2
    assert turns[0].finished_at is not None
    assert turns[1].started_at is not None
    assert turns[0].finished_at <= turns[1].started_at
    entries = [(m.role, m.meta.get("turn_id")) for m in await cron.sessions.messages(key)]
    assert [turn for _, turn in entries] == [first.id] * 3 + [second.id] * 2  # not interleaved
    assert calls == ["/a"]


async def test_a_person_stops_a_turn_while_it_waits(make_cron: CronFactory) -> None:
    cron = await offline(make_cron, slots=1)
    key = "websocket:chat"
    turn = await cron.sessions.send(key, "call delete_file with path=/a")
    (approval,) = await waiting_approvals(cron, 1)
    assert await cron.sessions.stop(key) is True
    await wait_settled(cron.engine)
    assert (await cron.sessions.turn(turn.id)).state is TurnState.CANCELLED
    gone = await cron.approvals.get(approval.id)
    assert (gone.state, gone.decided_by) == (ApprovalState.EXPIRED, CANCELLED_DECIDER)
    assert counters(cron) == (0, 0, 0)
    assert free_slots(cron) == 1
    # the slot really is free: the next turn runs
    after = await cron.sessions.send("websocket:other", "hello")
    await wait_settled(cron.engine)
    assert (await cron.sessions.turn(after.id)).state is TurnState.SUCCEEDED
    assert free_slots(cron) == 1


async def test_a_graceful_stop_while_turns_wait_cancels_their_approvals(
    make_cron: CronFactory,
) -> None:
    cron = await offline(make_cron, slots=1)
    turns = [
        await cron.sessions.send(f"websocket:{i}", "call delete_file with path=/a")
        for i in range(3)
    ]
    approvals = await waiting_approvals(cron, 3)
    await cron.close(grace=0.05)
    assert counters(cron) == (0, 0, 0)
    assert free_slots(cron) == 1
    again = await make_cron(runner=None, model=OfflineModel(0))  # the record, read back
    for approval in approvals:
        gone = await again.approvals.get(approval.id)
        assert (gone.state, gone.decided_by) == (ApprovalState.EXPIRED, CANCELLED_DECIDER)
    for turn in turns:
        assert (await again.sessions.turn(turn.id)).state is TurnState.INTERRUPTED
    assert calls == []


async def test_the_approval_wait_does_not_count_against_the_turn_timeout(
    make_cron: CronFactory,
) -> None:
    cron = await offline(make_cron, settings={"turn_timeout": 0.2})
    turn = await cron.sessions.send("websocket:chat", "call delete_file with path=/a")
    (approval,) = await waiting_approvals(cron, 1)
    await asyncio.sleep(0.4)  # twice the turn's timeout, waiting for the person
    await cron.approvals.decide(approval.id, "approve", by="ana")
    await wait_settled(cron.engine)
    done = await cron.sessions.turn(turn.id)
    assert done.state is TurnState.SUCCEEDED, done.error
    assert calls == ["/a"]


class PausingRunner:
    """A runner of one's own that works `before` s, waits `wait` s paused (no slot, no turn
    clock), then works `after` s.
    """

    def __init__(self, before: float, wait: float, after: float) -> None:
        self.before, self.wait, self.after = before, wait, after
        self.phases: list[str] = []
        self.seen: list[tuple[int, int, int]] = []
        self.cron: AgentCron | None = None

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        assert self.cron is not None
        self.phases.append("before")
        await asyncio.sleep(self.before)
        async with paused():
            self.phases.append("paused")
            self.seen.append(counters(self.cron))
            await asyncio.sleep(self.wait)
        self.seen.append(counters(self.cron))
        self.phases.append("after")
        await asyncio.sleep(self.after)
        self.phases.append("done")
        return Outcome.succeeded("worked")


async def run_pausing(make_cron: CronFactory, runner: PausingRunner) -> tuple[Any, float]:
    cron = await make_cron(
        runner=runner, settings=EngineSettings(max_concurrent_runs=1, turn_timeout=0.3)
    )
    runner.cron = cron
    started = time.monotonic()
    turn = await cron.sessions.send("api:own", "work")
    await wait_settled(cron.engine)
    took = time.monotonic() - started
    assert counters(cron) == (0, 0, 0)
    assert free_slots(cron) == 1
    return await cron.sessions.turn(turn.id), took


async def test_a_runner_of_ones_own_pauses_and_only_its_working_time_counts(
    make_cron: CronFactory,
) -> None:
    runner = PausingRunner(before=0.05, wait=0.5, after=0.05)
    turn, took = await run_pausing(make_cron, runner)
    assert turn.state is TurnState.SUCCEEDED, turn.error  # 0.6 s in all, 0.1 s of work
    assert took >= 0.6
    assert runner.phases == ["before", "paused", "after", "done"]
    assert runner.seen == [(0, 0, 1), (1, 0, 0)]


async def test_the_turn_clock_goes_on_from_where_the_pause_stopped_it(
    make_cron: CronFactory,
) -> None:
    runner = PausingRunner(before=0.2, wait=0.3, after=0.4)
    turn, took = await run_pausing(make_cron, runner)
    assert turn.state is TurnState.FAILED
    assert turn.error is not None
    assert "longer than 0.3 s" in turn.error
    assert runner.phases == ["before", "paused", "after"]  # cut in its work after the pause
    assert took >= 0.6  # 0.2 of work + 0.3 paused + the 0.1 left


async def test_paused_is_a_no_op_outside_a_lanes_turn() -> None:
    assert turn_pause.get() is None
    async with paused():
        pass


class TwoSessions:
    """`api:paused` pauses until `resume`, then needs its slot back; `api:busy` holds the
    only slot until `hold` is set.
    """

    def __init__(self) -> None:
        self.resume = asyncio.Event()
        self.hold = asyncio.Event()

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        if session.key == "api:paused":
            async with paused():
                await self.resume.wait()
        elif session.key == "api:busy":
            await self.hold.wait()
        return Outcome.succeeded("ok")


@pytest.mark.parametrize("how", ["stop", "close"])
async def test_cut_while_taking_its_slot_back_leaves_the_pool_exact(
    make_cron: CronFactory, how: str
) -> None:
    runner = TwoSessions()
    cron = await make_cron(runner=runner, settings=EngineSettings(max_concurrent_runs=1))
    waiting = await cron.sessions.send("api:paused", "wait")
    await until(cron, (0, 0, 1))
    busy = await cron.sessions.send("api:busy", "work")
    await until(cron, (1, 0, 1))
    runner.resume.set()  # its wait is over, but the only slot is taken
    await until(cron, (1, 1, 0))
    assert free_slots(cron) == 0
    if how == "stop":
        assert await cron.sessions.stop("api:paused") is True
        await until(cron, (1, 0, 0))
        assert (await cron.sessions.turn(waiting.id)).state is TurnState.CANCELLED
        runner.hold.set()
        await wait_settled(cron.engine)
        assert (await cron.sessions.turn(busy.id)).state is TurnState.SUCCEEDED
        after = await cron.sessions.send("api:other", "next")
        await wait_settled(cron.engine)
        assert (await cron.sessions.turn(after.id)).state is TurnState.SUCCEEDED
    else:
        await cron.close(grace=0.05)
    assert counters(cron) == (0, 0, 0)
    assert free_slots(cron) == 1


async def test_concurrent_waits_of_one_turn_share_one_pause(make_cron: CronFactory) -> None:
    first, second, done = asyncio.Event(), asyncio.Event(), asyncio.Event()
    seen: list[tuple[int, int, int]] = []

    class Parallel:
        async def run_turn(
            self, session: SessionInfo, turn: TurnInput, events: TurnEvents
        ) -> Outcome:
            async def wait(event: asyncio.Event) -> None:
                async with paused():
                    await event.wait()
                seen.append(counters(cron))

            await asyncio.gather(wait(first), wait(second))
            await done.wait()
            return Outcome.succeeded("ok")

    cron = await make_cron(runner=Parallel(), settings=EngineSettings(max_concurrent_runs=1))
    turn = await cron.sessions.send("api:p", "go")
    await until(cron, (0, 0, 1))
    assert free_slots(cron) == 1
    first.set()
    for _ in range(1000):
        if seen:
            break
        await asyncio.sleep(0.002)
    assert seen == [(0, 0, 1)]  # one wait ended, the other still pauses the turn
    assert free_slots(cron) == 1
    second.set()
    await until(cron, (1, 0, 0))
    assert seen == [(0, 0, 1), (1, 0, 0)]  # the last one took the slot back
    assert free_slots(cron) == 0
    done.set()
    await wait_settled(cron.engine)
    assert (await cron.sessions.turn(turn.id)).state is TurnState.SUCCEEDED
    assert (counters(cron), free_slots(cron)) == ((0, 0, 0), 1)


async def delivery_run(cron: AgentCron, clock: FakeClock, message: str) -> tuple[Any, Any]:
    """A delivery job (no session: an isolated run) saying `message`, fired; its run."""
    job = await cron.jobs.create(name="cleanup", when="in 1m", message=message)
    assert job.session_key is None
    clock.advance(MIN)
    await wait_settled(cron.engine, busy_ok=True)
    (run,) = await cron.runs.list(job.id)
    return job, run


async def test_a_delivery_jobs_run_waiting_for_approval_holds_no_slot(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron, slots=1)
    job, run = await delivery_run(cron, clock, "call delete_file with path=/d")
    (approval,) = await waiting_approvals(cron, 1)
    # the isolated run's tools know its own session (its memory) and its run as the turn
    assert (approval.session_key, approval.turn_id) == (f"cron:{job.id}", run.id)
    assert [a.id for a in await cron.approvals.list(f"cron:{job.id}")] == [approval.id]
    assert counters(cron) == (0, 0, 1)
    assert free_slots(cron) == 1
    # the only slot is free: another delivery job's fire and a session's fire run meanwhile
    others = [
        await cron.jobs.create(name="ping", when="in 1m", message="ping"),
        await cron.jobs.create(
            name="ping", when="in 1m", message="ping", session_key="websocket:o"
        ),
    ]
    clock.advance(MIN)
    await wait_settled(cron.engine, busy_ok=True)
    async with asyncio.timeout(3):  # with the slot kept by the waiting run, never
        for other in others:
            (other_run,) = await cron.runs.list(other.id)
            done = await cron.runs.wait(other_run.id, 1)
            assert done.state is RunState.SUCCEEDED, done.error
            assert done.tool_calls is None  # no calls: NULL
    assert (await cron.runs.get(run.id)).state is RunState.RUNNING
    assert calls == []

    # approve: it takes the slot again, its tool runs, the run records the call
    await cron.approvals.decide(approval.id, "approve", by="ana")
    done = await cron.runs.wait(run.id, 2)
    assert done.state is RunState.SUCCEEDED, done.error
    assert done.output == "(offline model) Done: deleted /d"
    assert calls == ["/d"]
    assert done.tool_calls is not None
    (call,) = done.tool_calls
    assert (call["name"], call["args"], call["result"], call["ok"]) == (
        "delete_file",
        {"path": "/d"},
        "deleted /d",
        True,
    )
    await wait_settled(cron.engine)
    assert (counters(cron), free_slots(cron)) == ((0, 0, 0), 1)


async def test_a_delivery_jobs_denied_call_is_on_its_run(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron, slots=1)
    _, run = await delivery_run(cron, clock, "call delete_file with path=/d")
    (approval,) = await waiting_approvals(cron, 1)
    await cron.approvals.decide(approval.id, "deny", by="ana")
    done = await cron.runs.wait(run.id, 2)
    assert done.state is RunState.SUCCEEDED, done.error
    assert done.tool_calls is not None
    ((name, result),) = [(c["name"], c["result"]) for c in done.tool_calls]
    assert name == "delete_file"
    assert "Denied by ana" in result
    assert calls == []
    assert (counters(cron), free_slots(cron)) == ((0, 0, 0), 1)


async def test_a_delivery_runs_approval_wait_does_not_count_against_its_timeout(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron, settings={"turn_timeout": 0.2})
    _, run = await delivery_run(cron, clock, "call delete_file with path=/d")
    (approval,) = await waiting_approvals(cron, 1)
    await asyncio.sleep(0.4)  # twice the run's timeout, waiting for the person
    await cron.approvals.decide(approval.id, "approve", by="ana")
    done = await cron.runs.wait(run.id, 2)
    assert done.state is RunState.SUCCEEDED, done.error
    assert calls == ["/d"]


async def test_a_graceful_stop_while_a_delivery_run_waits_leaves_the_pool_exact(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    cron = await offline(make_cron, slots=1)
    _, run = await delivery_run(cron, clock, "call delete_file with path=/d")
    (approval,) = await waiting_approvals(cron, 1)
    assert counters(cron) == (0, 0, 1)
    started = time.monotonic()
    await cron.close(grace=5)  # a person's answer gets no grace: cut at once
    assert time.monotonic() - started < 2
    assert (counters(cron), free_slots(cron)) == ((0, 0, 0), 1)
    again = await make_cron(runner=None, model=OfflineModel(0))  # the records, read back
    gone = await again.approvals.get(approval.id)
    assert (gone.state, gone.decided_by) == (ApprovalState.EXPIRED, CANCELLED_DECIDER)
    assert (await again.runs.get(run.id)).state is RunState.INTERRUPTED
    assert calls == []


class IsolatedPausing:
    """A runner whose isolated runs (`cron:` sessions) pause until `resume`, then need their
    slot back; `api:busy` holds the only slot until `hold` is set.
    """

    def __init__(self) -> None:
        self.resume = asyncio.Event()
        self.hold = asyncio.Event()

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        if session.key.startswith("cron:"):
            async with paused():
                await self.resume.wait()
        elif session.key == "api:busy":
            await self.hold.wait()
        return Outcome.succeeded("ok")


async def test_a_delivery_run_cut_while_taking_its_slot_back_leaves_the_pool_exact(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    runner = IsolatedPausing()
    cron = await make_cron(runner=runner, settings=EngineSettings(max_concurrent_runs=1))
    _, run = await delivery_run(cron, clock, "wait")
    await until(cron, (0, 0, 1))
    assert free_slots(cron) == 1
    busy = await cron.sessions.send("api:busy", "work")
    await until(cron, (1, 0, 1))
    runner.resume.set()  # its wait is over, but the only slot is taken
    await until(cron, (1, 1, 0))
    assert free_slots(cron) == 0
    await cron.close(grace=0.05)
    assert (counters(cron), free_slots(cron)) == ((0, 0, 0), 1)
    again = await make_cron(runner=runner)
    assert (await again.runs.get(run.id)).state is RunState.INTERRUPTED
    assert (await again.sessions.turn(busy.id)).state is TurnState.INTERRUPTED


async def test_a_delivery_run_that_pauses_during_the_grace_is_cut_as_it_pauses(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    working = asyncio.Event()
    phases: list[str] = []

    class WorksThenWaits:
        async def run_turn(
            self, session: SessionInfo, turn: TurnInput, events: TurnEvents
        ) -> Outcome:
            working.set()
            await asyncio.sleep(0.2)  # working when the stop begins: it gets the grace
            phases.append("worked")
            async with paused():
                await asyncio.Event().wait()  # a person who never answers
            phases.append("after")
            return Outcome.succeeded("ok")

    cron = await make_cron(runner=WorksThenWaits(), settings=EngineSettings(max_concurrent_runs=1))
    job = await cron.jobs.create(name="cleanup", when="in 1m", message="wait")
    clock.advance(MIN)
    async with asyncio.timeout(2):
        await working.wait()
    started = time.monotonic()
    await cron.close(grace=5)
    assert 0.15 < time.monotonic() - started < 2
    assert phases == ["worked"]
    assert (counters(cron), free_slots(cron)) == ((0, 0, 0), 1)
    again = await make_cron(runner=WorksThenWaits())
    (run,) = await again.runs.list(job.id)
    assert run.state is RunState.INTERRUPTED
