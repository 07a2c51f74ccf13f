"""Helpers for tests and benchmarks of code built on agentcron: a clock that moves only when
told, and waiting until an engine has settled after it moved. Not used by agentcron itself.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentcron.engine.scheduler import Engine

__all__ = ["FakeClock", "wait_settled"]


class FakeClock:
    """A clock that moves only when a test says so; waiters wake in deadline order."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs an aware start time")
        self._now = start.astimezone(UTC)
        self._waiters: list[tuple[datetime, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self._now

    async def sleep_until(self, deadline: datetime | None, wake: asyncio.Event) -> None:
        if wake.is_set() or (deadline is not None and deadline <= self._now):
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        timer: asyncio.Future[None] = loop.create_future()
        if deadline is not None:
            heapq.heappush(self._waiters, (deadline, next(self._seq), timer))
        waker: asyncio.Future[Any] = asyncio.ensure_future(wake.wait())
        pending: set[asyncio.Future[Any]] = {timer, waker}
        try:
            await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waker.cancel()
            if not timer.done():
                timer.cancel()

    def set(self, instant: datetime) -> None:
        """Move to `instant` (never backwards) and wake every waiter now due."""
        instant = instant.astimezone(UTC)
        if instant < self._now:
            raise ValueError("FakeClock cannot move backwards")
        self._now = instant
        while self._waiters and self._waiters[0][0] <= instant:
            _, _, timer = heapq.heappop(self._waiters)
            if not timer.done():
                timer.set_result(None)

    def advance(self, delta: timedelta) -> None:
        self.set(self._now + delta)


async def wait_settled(engine: Engine, limit: float = 10.0, *, busy_ok: bool = False) -> None:
    """Wait until `engine` is idle (`Engine.idle`) twice in a row, a millisecond apart: after
    moving a FakeClock, every fire it made due has run and every write is committed. With
    `busy_ok`, turns may still be inside their runners or waiting for a slot.
    """
    async with asyncio.timeout(limit):
        quiet = 0
        while quiet < 2:
            await asyncio.sleep(0.001)
            quiet = quiet + 1 if engine.idle(busy_ok=busy_ok) else 0
