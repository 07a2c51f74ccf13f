"""One runner call's hold on an engine slot, given back while its runner waits outside (`paused()`).

A session turn (`sessions/lane.py`) and an isolated run (`engine/isolated.py`) hold one of the
`max_concurrent_runs` slots while their runner works. A runner that waits for something outside
the call (a tool call's approval) wraps the wait in `agentcron.agent.runner.paused()`, which
enters `SlotHold.pause`: the slot is given back for the wait and taken again after it, and the
wait does not count against the call's timeout. The two owners differ only in their counters,
in how they take a slot back and in what a graceful stop cancels; those are the hooks.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, MutableSet
from contextlib import asynccontextmanager

from agentcron.runtime.turn_call import TurnCall

__all__ = ["SlotHold"]


class SlotHold(ABC):
    """`held` says whether the call holds a slot now, so that every way out releases exactly
    what it holds. Several waits of one call (parallel tool calls) share one pause: the slot
    comes back when the last ends. A wait that is cancelled (a stop, a shutdown) does not take
    a slot again: the call is ending. A graceful stop does not wait for a paused call (a
    person's answer is not work in progress a grace lets finish): the owner cuts the calls
    paused when it begins (`cut_if_closing`), and a call that pauses during the grace is cut
    as it pauses.
    """

    __slots__ = ("_paused", "_waits", "guard", "held")

    def __init__(self, *, held: bool, guard: TurnCall | None = None) -> None:
        self.held = held
        self.guard = guard  # the call's timeout: its clock stops for the wait
        self._waits = 0  # waits in progress
        self._paused = False  # the slot was given back for them

    @property
    @abstractmethod
    def _slots(self) -> asyncio.Semaphore:
        """The owner's slot pool."""

    @property
    @abstractmethod
    def _closing(self) -> bool:
        """A graceful stop has begun."""

    @property
    @abstractmethod
    def _registry(self) -> MutableSet[SlotHold]:
        """The owner's set of calls waiting for the outside world now (a stop cuts them)."""

    @abstractmethod
    def _task(self) -> asyncio.Task[object] | None:
        """What a graceful stop cancels to cut the call."""

    @abstractmethod
    def _given_back(self) -> None:
        """Count the call as waiting for approval (its slot was just given back)."""

    @abstractmethod
    def _back(self) -> None:
        """Count the call out of waiting for approval (its wait ended, or was cut)."""

    @abstractmethod
    async def _reacquire(self) -> None:
        """Take a slot again, counted as awaiting one meanwhile."""

    @abstractmethod
    def _wait_ended(self) -> None:
        """Last, whether or not a slot came back (the lane counts its turn in its runner)."""

    def release(self) -> None:
        if self.held:
            self.held = False
            self._slots.release()

    def cut_if_closing(self) -> None:
        """During a graceful stop, cut the call now if it waits for the outside world."""
        task = self._task()
        if self._closing and self._waits and task is not None and not task.done():
            task.cancel()

    @asynccontextmanager
    async def pause(self) -> AsyncIterator[None]:
        self._waits += 1
        if self._waits == 1:
            self._registry.add(self)
        if self._waits == 1 and self.held:
            self._paused = True
            self._given_back()
            if self.guard is not None:
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
                self._registry.discard(self)
            if self._waits == 0 and self._paused:
                self._paused = False
                self._back()
                try:
                    if resume:
                        await self._reacquire()
                        self.held = True
                finally:
                    self._wait_ended()
                    if self.guard is not None:
                        self.guard.resume_clock()
