"""One execution of a runner call, the same for a session turn and an isolated run: a slot, the
start write, the guarded runner call that may pause for a person, the slot given back, the end.

    run:  take a slot (awaiting_slot)
          -> steps.start()        the start write, through the journal (False: not begun)
          -> claimed ahead: sleep until `at`, holding the slot
          -> steps.started()      events (FireStarted, the stream's start)
          -> steps.call()         under the guard (`TurnCall`: timeout, a person's stop,
                                  shutdown), counted in_runner, `turn_pause` set to this
                                  execution: `runner.paused()` gives the slot back for a wait
          -> slot given back
          -> steps.end(outcome)   the end write and its events

A cancellation (a shutdown) after the start was submitted and before the outcome makes
`steps.cut(tools)` close what began, with the tool calls the runner reported so far. Every way
out gives back exactly what is held (`held`). What differs between a session turn
(`turns/lanes.py`) and an isolated run (`engine/isolated.py`) is their `Steps`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Protocol

from agentcron.agent.runner import Outcome, ToolRecord, turn_pause
from agentcron.runtime.clock import Clock
from agentcron.runtime.slots import SlotCounts, SlotPool
from agentcron.runtime.turn_call import TurnCall

__all__ = ["Execution", "Steps"]


class Steps(Protocol):
    """What one kind of execution does at each of its steps."""

    async def start(self) -> bool:
        """Write the start, holding a slot (`Execution.without_slot` lets it wait for
        something without one). False: it did not begin; the steps closed it themselves.
        """
        ...

    async def started(self) -> None:
        """The start is durable and the fire's time has come: say so."""
        ...

    async def call(self) -> Outcome:
        """Read what the runner needs and call it (under the execution's guard)."""
        ...

    async def end(self, outcome: Outcome) -> None:
        """The runner's outcome, its slot given back: the end write and its events."""
        ...

    async def cut(self, tools: tuple[ToolRecord, ...]) -> None:
        """Cancelled before the outcome (a shutdown; shielded): close what began, if the
        start was submitted at all, keeping `tools` (the calls the runner reported so far).
        """
        ...


class Execution:
    """One runner call's execution and its hold on a slot of `pool` (`held` says whether it
    holds one now). It is the `TurnPause` of its runner call: a wait inside `runner.paused()`
    gives the slot back (the call counts as awaiting_approval, its timeout's clock stops) and
    takes one again after it (awaiting_slot, then in_runner, the clock goes on). Concurrent
    waits of one call (parallel tool calls) share one pause: the slot goes at the first and
    comes back after the last. A cancelled wait takes no slot again: the call is ending. A
    graceful stop (`SlotPool.close`) cuts a paused call, now or as it pauses: the task that
    runs the execution is cancelled.
    """

    __slots__ = ("_paused", "_task", "_waits", "clock", "counts", "guard", "held", "pool")

    def __init__(
        self, pool: SlotPool, counts: SlotCounts, clock: Clock, timeout: float | None
    ) -> None:
        self.pool = pool
        self.counts = counts  # the pool's counts of this kind (turns, or isolated runs)
        self.clock = clock
        # From now on a person's stop is not lost, even before the runner is called.
        self.guard = TurnCall(timeout)
        self.held = False
        self._task: asyncio.Task[Any] | None = None  # what a graceful stop cancels
        self._waits = 0  # waits in progress inside the runner
        self._paused = False  # the slot was given back for them

    def stop(self) -> bool:
        """A person's stop (see `TurnCall.stop`); False once the call has ended."""
        return self.guard.stop()

    async def run(
        self,
        steps: Steps,
        *,
        at: datetime | None = None,
        ctx: dict[str, Any] | None = None,
        holding: bool = False,
    ) -> None:
        """Execute `steps` (see the module's docstring); `at`: the fire's time, when it was
        claimed ahead of it; `ctx`: the log fields of the runner call's failures; `holding`:
        a slot was already taken for it (`SlotPool.try_take`), which it now holds.
        """
        self._task = asyncio.current_task()
        if not holding:
            await self.pool.take(self.counts)  # a cancelled take holds nothing
        self.held = True
        try:
            try:
                if not await steps.start():
                    return
                if at is not None and at > self.clock.now():
                    # Claimed ahead, its start already durable: the runner is called on the
                    # dot, with the claim and the start write off the fire's lateness.
                    await self.clock.sleep_until(at, asyncio.Event())
                await steps.started()

                async def runner() -> Outcome:
                    # Set inside the guard's task, and reset before it ends (the finished
                    # task's context must not hold on to this execution): the runner may
                    # give the slot back while it waits (`runner.paused()`), and so may the
                    # tasks it starts.
                    token = turn_pause.set(self)
                    try:
                        return await steps.call()
                    finally:
                        turn_pause.reset(token)

                counts = self.counts
                counts.in_runner += 1
                try:
                    outcome = await self.guard.run(runner, ctx)
                finally:
                    # The guard awaits the runner's task to its end: a pause has ended by now.
                    counts.in_runner -= 1
            except asyncio.CancelledError:
                await asyncio.shield(steps.cut(self.guard.tools))
                raise
            self.release()  # the end write needs no slot: the next call starts meanwhile
            await steps.end(outcome)
        finally:
            self.release()  # only what it holds: a pause may have given it back

    async def take(self) -> None:
        """Take a slot (counted as awaiting one meanwhile)."""
        await self.pool.take(self.counts)
        self.held = True

    def release(self) -> None:
        """Give the slot back if it is held."""
        if self.held:
            self.held = False
            self.pool.give()

    async def without_slot(self, wait: Awaitable[None]) -> None:
        """Wait for `wait` holding no slot, then take one again (a start that waits for its
        session to be let go elsewhere). Cancelled, it holds none.
        """
        self.release()
        await wait
        await self.take()

    def cut_if_closing(self) -> None:
        """During a graceful stop, cut the call now if it waits for the outside world."""
        task = self._task
        if self.pool.closing and self._waits and task is not None and not task.done():
            task.cancel()

    @asynccontextmanager
    async def before_start(self) -> AsyncIterator[None]:
        """A wait for a person before the runner call (a gate's approval): no slot held (one
        held is given back; the caller takes one again), counted awaiting_approval, and cut at
        once by a graceful stop, like a paused call.
        """
        self.release()
        self._task = asyncio.current_task()
        counts = self.counts
        counts.awaiting_approval += 1
        self._waits += 1
        self.pool.paused.add(self)
        try:
            self.cut_if_closing()
            yield
        finally:
            self._waits -= 1
            self.pool.paused.discard(self)
            counts.awaiting_approval -= 1

    @asynccontextmanager
    async def pause(self) -> AsyncIterator[None]:
        """`runner.paused()` inside this execution's runner call."""
        pool, counts = self.pool, self.counts
        self._waits += 1
        if self._waits == 1:
            pool.paused.add(self)
            if self.held:
                self._paused = True
                counts.in_runner -= 1
                counts.awaiting_approval += 1
                self.guard.hold_clock()
                self.release()
        self.cut_if_closing()
        resume = False
        try:
            yield
            resume = True
        except Exception:
            resume = True  # the runner may handle it and go on: with a slot
            raise
        finally:
            self._waits -= 1
            if self._waits == 0:
                pool.paused.discard(self)
                if self._paused:
                    self._paused = False
                    counts.awaiting_approval -= 1
                    try:
                        if resume:
                            await self.take()
                    finally:
                        counts.in_runner += 1  # counted out by `_call`
                        self.guard.resume_clock()
