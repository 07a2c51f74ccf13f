"""One execution (runtime/execution.py): its steps in order, the slot held exactly when it should
be on every way out (stop, shutdown, a failed start), and the pause for a person's answer.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest

from agentcron.agent.runner import (
    NO_RESULT,
    Outcome,
    OutcomeStatus,
    ToolRecord,
    paused,
    tool_ran,
    turn_pause,
)
from agentcron.runtime.execution import Execution
from agentcron.runtime.slots import SlotPool
from agentcron.runtime.turn_call import STOPPED
from agentcron.testing import FakeClock

T0 = datetime(2026, 1, 1, tzinfo=UTC)
Body = Callable[[], Awaitable[Outcome]]


def free(pool: SlotPool) -> int:
    return pool._free


async def works() -> Outcome:
    return Outcome.succeeded("done")


class Recorder:
    """Steps that record what they see at each step: the free slots, the counts, the pause."""

    def __init__(
        self, pool: SlotPool, body: Body = works, *, begins: bool = True, fails: bool = False
    ) -> None:
        self.pool, self.body, self.begins, self.fails = pool, body, begins, fails
        self.execution: Execution | None = None
        self.log: list[tuple[object, ...]] = []
        self.outcome: Outcome | None = None
        self.cut_with: tuple[ToolRecord, ...] | None = None

    def counts(self) -> tuple[int, int, int]:
        c = self.pool.turns
        return c.in_runner, c.awaiting_slot, c.awaiting_approval

    async def start(self) -> bool:
        self.log.append(("start", free(self.pool)))
        if self.fails:
            raise OSError("the start write failed")
        return self.begins

    async def started(self) -> None:
        self.log.append(("started", free(self.pool)))

    async def call(self) -> Outcome:
        self.log.append(
            ("call", free(self.pool), self.counts(), turn_pause.get() is self.execution)
        )
        return await self.body()

    async def end(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self.log.append(("end", free(self.pool), self.counts(), outcome.status))

    async def cut(self, tools: tuple[ToolRecord, ...]) -> None:
        self.cut_with = tools
        self.log.append(("cut", free(self.pool)))


def make(pool: SlotPool, clock: FakeClock | None = None, timeout: float | None = None) -> Execution:
    return Execution(pool, pool.turns, clock or FakeClock(T0), timeout)


async def test_the_steps_run_in_order_and_the_slot_goes_back_before_the_end() -> None:
    pool = SlotPool(2)
    execution = make(pool)
    steps = Recorder(pool)
    steps.execution = execution
    await execution.run(steps)
    assert steps.log == [
        ("start", 1),
        ("started", 1),
        ("call", 1, (1, 0, 0), True),  # in its runner, the pause set to this execution
        ("end", 2, (0, 0, 0), OutcomeStatus.SUCCEEDED),  # the end write holds no slot
    ]
    assert (free(pool), execution.held, turn_pause.get()) == (2, False, None)


async def test_a_start_that_did_not_begin_calls_nothing_more() -> None:
    pool = SlotPool(1)
    steps = Recorder(pool, begins=False)
    await make(pool).run(steps)
    assert steps.log == [("start", 0)]
    assert free(pool) == 1


async def test_a_failed_start_gives_the_slot_back_and_raises() -> None:
    pool = SlotPool(1)
    steps = Recorder(pool, fails=True)
    with pytest.raises(OSError, match="start write failed"):
        await make(pool).run(steps)
    assert steps.log == [("start", 0)]  # nothing began: nothing to cut
    assert free(pool) == 1


async def test_a_stop_before_the_runner_ends_it_cancelled_without_calling_it() -> None:
    pool = SlotPool(1)
    execution = make(pool)
    steps = Recorder(pool)
    assert execution.stop() is True
    await execution.run(steps)
    assert [entry[0] for entry in steps.log] == ["start", "started", "end"]
    assert steps.outcome == Outcome.cancelled(STOPPED)
    assert free(pool) == 1


async def test_a_shutdown_in_the_runner_cuts_what_began_and_gives_the_slot_back() -> None:
    pool = SlotPool(1)
    entered = asyncio.Event()

    async def hangs() -> Outcome:
        entered.set()
        await asyncio.Event().wait()
        raise AssertionError("never")

    execution = make(pool)
    steps = Recorder(pool, hangs)
    task = asyncio.create_task(execution.run(steps))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [entry[0] for entry in steps.log] == ["start", "started", "call", "cut"]
    assert (free(pool), steps.counts()) == (1, (0, 0, 0))


async def test_a_claimed_ahead_call_waits_for_its_time_holding_its_slot() -> None:
    pool = SlotPool(1)
    clock = FakeClock(T0)
    steps = Recorder(pool)
    task = asyncio.create_task(make(pool, clock).run(steps, at=T0 + timedelta(seconds=5)))
    for _ in range(5):
        await asyncio.sleep(0)
    assert steps.log == [("start", 0)]  # started early, stamped by its steps; holding the slot
    clock.advance(timedelta(seconds=5))
    await task
    assert [entry[0] for entry in steps.log] == ["start", "started", "call", "end"]
    assert free(pool) == 1


async def test_a_pause_gives_the_slot_back_and_takes_it_again() -> None:
    pool = SlotPool(1)
    execution = make(pool)
    seen: list[tuple[int, tuple[int, int, int]]] = []
    answer, other_done = asyncio.Event(), asyncio.Event()

    async def waits_for_a_person() -> Outcome:
        async with paused():
            seen.append((free(pool), steps.counts()))
            await answer.wait()
        seen.append((free(pool), steps.counts()))
        return Outcome.succeeded("answered")

    steps = Recorder(pool, waits_for_a_person)
    steps.execution = execution
    task = asyncio.create_task(execution.run(steps))
    for _ in range(20):
        await asyncio.sleep(0)
    assert seen == [(1, (0, 0, 1))]  # paused: no slot held, counted as awaiting approval

    # another call takes the free slot meanwhile; the paused one then waits for it
    async def holds() -> Outcome:
        await other_done.wait()
        return Outcome.succeeded("ok")

    other_task = asyncio.create_task(make(pool).run(Recorder(pool, holds)))
    for _ in range(20):
        await asyncio.sleep(0)
    answer.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert steps.counts() == (1, 1, 0)  # the other in its runner; this one awaits the slot
    other_done.set()
    await asyncio.gather(task, other_task)
    assert seen[1] == (0, (1, 0, 0))  # back in its runner, holding the slot
    assert steps.outcome == Outcome.succeeded("answered")
    assert (free(pool), steps.counts(), pool.paused) == (1, (0, 0, 0), set())


async def test_concurrent_waits_share_one_pause() -> None:
    pool = SlotPool(1)
    execution = make(pool)
    first, second = asyncio.Event(), asyncio.Event()
    seen: list[tuple[int, tuple[int, int, int]]] = []

    async def two_waits() -> Outcome:
        async def wait(event: asyncio.Event) -> None:
            async with paused():
                await event.wait()
            seen.append((free(pool), steps.counts()))

        await asyncio.gather(wait(first), wait(second))
        return Outcome.succeeded("both")

    steps = Recorder(pool, two_waits)
    task = asyncio.create_task(execution.run(steps))
    for _ in range(20):
        await asyncio.sleep(0)
    first.set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert seen == [(1, (0, 0, 1))]  # the other wait still pauses the call
    second.set()
    await task
    assert seen == [(1, (0, 0, 1)), (0, (1, 0, 0))]
    assert free(pool) == 1


async def test_the_pause_does_not_count_against_the_timeout() -> None:
    pool = SlotPool(1)

    async def slow_person() -> Outcome:
        async with paused():
            await asyncio.sleep(0.3)  # three timeouts long
        return Outcome.succeeded("in time")

    steps = Recorder(pool, slow_person)
    await make(pool, timeout=0.1).run(steps)
    assert steps.outcome == Outcome.succeeded("in time")


async def test_a_graceful_stop_cuts_a_paused_call_now_and_one_that_pauses_later() -> None:
    pool = SlotPool(2)
    working = asyncio.Event()
    go_on = asyncio.Event()

    async def pauses_now() -> Outcome:
        async with paused():
            await asyncio.Event().wait()
        raise AssertionError("never")

    async def pauses_later() -> Outcome:
        working.set()
        await go_on.wait()
        async with paused():
            await asyncio.Event().wait()
        raise AssertionError("never")

    now, later = Recorder(pool, pauses_now), Recorder(pool, pauses_later)
    tasks = [asyncio.create_task(make(pool).run(s)) for s in (now, later)]
    await working.wait()
    for _ in range(20):
        await asyncio.sleep(0)
    assert len(pool.paused) == 1
    pool.close()
    go_on.set()  # it pauses during the grace: cut as it pauses
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    assert [s.log[-1][0] for s in (now, later)] == ["cut", "cut"]
    assert (free(pool), now.counts(), pool.paused) == (2, (0, 0, 0), set())


async def test_without_slot_waits_holding_none_then_takes_one_again() -> None:
    pool = SlotPool(1)
    execution = make(pool)
    released = asyncio.Event()
    seen: list[int] = []

    class WaitsForItsSession(Recorder):
        async def start(self) -> bool:
            if not seen:
                seen.append(free(pool))

                async def session_let_go() -> None:
                    seen.append(free(pool))
                    await released.wait()

                await execution.without_slot(session_let_go())
                seen.append(free(pool))
            return True

    steps = WaitsForItsSession(pool)
    task = asyncio.create_task(execution.run(steps))
    for _ in range(5):
        await asyncio.sleep(0)
    released.set()
    await task
    assert seen == [0, 1, 0]  # held, given back for the wait, held again
    assert free(pool) == 1


async def test_a_finished_execution_is_held_by_nothing_but_its_owner() -> None:
    pool = SlotPool(1)
    execution = make(pool)
    await execution.run(Recorder(pool))
    await asyncio.sleep(0)  # the loop lets go of the guard's finished task
    # Only this frame's name (and getrefcount's argument): the guard's finished task and its
    # context do not keep it (a cycle would leave it to the collector).
    assert sys.getrefcount(execution) == 2


# The tool calls a runner reports as they happen (`tool_ran`) outlive a call that is cut.
PAID = ToolRecord("call-1", "pay", {"amount": 5}, "paid 5", True, 12)
DEPLOYING = ToolRecord("call-2", "deploy", {}, NO_RESULT, False)


def pays_then_hangs(entered: asyncio.Event) -> Body:
    """A runner that paid (the call answered), started a deploy, then never returns."""

    async def body() -> Outcome:
        tool_ran(ToolRecord("call-1", "pay", {"amount": 5}, NO_RESULT, False))
        tool_ran(PAID)  # its answer replaces the started call, in its place
        tool_ran(DEPLOYING)
        entered.set()
        await asyncio.Event().wait()
        raise AssertionError("never")

    return body


async def test_a_stopped_call_keeps_the_tool_calls_it_reported() -> None:
    pool = SlotPool(1)
    entered = asyncio.Event()
    execution = make(pool)
    steps = Recorder(pool, pays_then_hangs(entered))
    task = asyncio.create_task(execution.run(steps))
    await entered.wait()
    assert execution.stop() is True
    await task
    assert steps.outcome == Outcome.cancelled(STOPPED, tools=(PAID, DEPLOYING))


async def test_a_timed_out_call_keeps_the_tool_calls_it_reported() -> None:
    pool = SlotPool(1)
    steps = Recorder(pool, pays_then_hangs(asyncio.Event()))
    await make(pool, timeout=0.05).run(steps)
    assert steps.outcome is not None
    assert steps.outcome.status is OutcomeStatus.FAILED
    assert steps.outcome.error == "TimeoutError: the turn ran longer than 0.05 s"
    assert steps.outcome.tools == (PAID, DEPLOYING)


async def test_a_failed_call_keeps_the_tool_calls_it_reported() -> None:
    pool = SlotPool(1)

    async def pays_then_raises() -> Outcome:
        tool_ran(PAID)
        raise RuntimeError("the model went away")

    steps = Recorder(pool, pays_then_raises)
    await make(pool).run(steps)
    assert steps.outcome is not None
    assert (steps.outcome.error, steps.outcome.tools) == (
        "RuntimeError: the model went away",
        (PAID,),
    )


async def test_a_shutdown_cuts_with_the_tool_calls_reported_so_far() -> None:
    pool = SlotPool(1)
    entered = asyncio.Event()
    execution = make(pool)
    steps = Recorder(pool, pays_then_hangs(entered))
    task = asyncio.create_task(execution.run(steps))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert steps.cut_with == (PAID, DEPLOYING)


async def test_a_returned_outcome_keeps_its_own_tools_else_takes_the_reported_ones() -> None:
    pool = SlotPool(1)
    own = ToolRecord("own", "lookup", {"q": "x"}, "found x")

    async def reports_and_returns_its_own() -> Outcome:
        tool_ran(PAID)
        return Outcome.succeeded("done", tools=(own,))

    async def reports_and_returns_plain_text() -> str:
        tool_ran(PAID)
        return "done"

    first = Recorder(pool, reports_and_returns_its_own)
    await make(pool).run(first)
    second = Recorder(pool, reports_and_returns_plain_text)  # type: ignore[arg-type]
    await make(pool).run(second)
    assert first.outcome == Outcome.succeeded("done", tools=(own,))
    assert second.outcome == Outcome.succeeded("done", tools=(PAID,))


async def test_a_wait_before_the_start_holds_no_slot_counts_as_approval_and_a_stop_cuts_it() -> (
    None
):
    pool = SlotPool(1)
    execution = make(pool)
    decided = asyncio.Event()
    seen: list[tuple[object, ...]] = []

    class AsksFirst(Recorder):
        async def start(self) -> bool:
            async with execution.before_start():  # a gate's approval, before the start write
                seen.append((free(pool), self.counts(), execution in pool.paused))
                await decided.wait()
            seen.append((free(pool), self.counts(), execution in pool.paused))
            await execution.take()  # its caller takes a slot again to go on
            return True

    steps = AsksFirst(pool)
    task = asyncio.create_task(execution.run(steps))
    for _ in range(5):
        await asyncio.sleep(0)
    decided.set()
    await task
    assert seen == [(1, (0, 0, 1), True), (1, (0, 0, 0), False)]
    assert steps.outcome is not None
    assert steps.outcome.status is OutcomeStatus.SUCCEEDED
    assert free(pool) == 1
    # A graceful stop cuts such a wait at once, holding nothing.
    waiting = make(pool)

    async def asks() -> None:
        async with waiting.before_start():
            await asyncio.Event().wait()

    cut = asyncio.create_task(asks())
    for _ in range(5):
        await asyncio.sleep(0)
    assert pool.turns.awaiting_approval == 1
    pool.close()
    with pytest.raises(asyncio.CancelledError):
        await cut
    assert (free(pool), pool.turns.awaiting_approval, pool.paused) == (1, 0, set())
