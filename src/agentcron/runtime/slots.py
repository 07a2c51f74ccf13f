"""The `max_concurrent_runs` slots that turns and isolated runs share, and their counts."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Protocol

__all__ = ["SlotCounts", "SlotPool"]


class SlotCounts:
    """Where the executions of one kind (session turns, or isolated runs) stand now. Each
    execution is in at most one of the three at a time (`Execution` moves it).
    """

    __slots__ = ("awaiting_approval", "awaiting_slot", "in_runner")

    def __init__(self) -> None:
        self.in_runner = 0  # inside the runner call, holding a slot
        self.awaiting_slot = 0  # ready to start, or back from a pause, waiting for a slot
        self.awaiting_approval = 0  # paused in the runner (`runner.paused()`), no slot held

    @property
    def settled(self) -> int:
        """Executions in their runner, paused in it or waiting for a slot: all of this kind's
        work when an engine counts as quiet with `busy_ok`.
        """
        return self.in_runner + self.awaiting_slot + self.awaiting_approval


class Cuttable(Protocol):
    """A call paused for the outside world that a graceful stop cuts (an `Execution`)."""

    def cut_if_closing(self) -> None: ...


class SlotPool:
    """One process's `max_concurrent_runs` slots, shared by the lanes' turns and the engine's
    isolated runs, with their counts (`turns`, `runs`: the metrics report the turns in their
    runner apart; the waits are summed), the calls paused now and the graceful stop's cut of
    them (`close`). Slots go first come, first served: a slot given back goes to the longest
    waiter, and `try_take` never takes one ahead of a waiter.
    """

    __slots__ = ("_free", "_waiters", "closing", "paused", "runs", "turns")

    def __init__(self, size: int) -> None:
        self._free = size
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.turns = SlotCounts()  # session turns (the lanes)
        self.runs = SlotCounts()  # isolated runs (system and delivery jobs)
        self.paused: set[Cuttable] = set()  # calls waiting for the outside world now
        self.closing = False  # a graceful stop began: paused calls are cut

    async def take(self, counts: SlotCounts) -> None:
        """Take a slot, counted in `counts` as awaiting one meanwhile. A cancelled take takes
        none.
        """
        if self.try_take():
            return
        counts.awaiting_slot += 1
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed this slot, then cancelled before it went on: pass it on
            elif waiter in self._waiters:  # a give() may have dropped it already (cancelled)
                self._waiters.remove(waiter)
            raise
        finally:
            counts.awaiting_slot -= 1

    def try_take(self) -> bool:
        """Take a free slot now if nobody waits for one (never ahead of a waiter)."""
        if self._free and not self._waiters:
            self._free -= 1
            return True
        return False

    def give(self) -> None:
        """Give a taken slot back: to the longest waiter, else to the free ones."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    def locked(self) -> bool:
        """Every slot is taken: a call that starts now waits."""
        return not self._free or bool(self._waiters)

    @property
    def awaiting_slot(self) -> int:
        """Turns and isolated runs waiting for a slot (to start, or to go on after a pause)."""
        return self.turns.awaiting_slot + self.runs.awaiting_slot

    @property
    def awaiting_approval(self) -> int:
        """Turns and isolated runs paused for the outside world (an approval), no slot held."""
        return self.turns.awaiting_approval + self.runs.awaiting_approval

    def close(self) -> None:
        """A graceful stop began: a person's answer is not work in progress that a grace lets
        finish, so the calls paused now are cut, and one that pauses from now on is cut as it
        pauses. Once; later calls do nothing.
        """
        if self.closing:
            return
        self.closing = True
        for call in list(self.paused):
            call.cut_if_closing()
