"""Time for the engine: the only way it reads the clock or waits (real or fake)."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current instant, aware UTC."""
        ...

    async def sleep_until(self, deadline: datetime | None, wake: asyncio.Event) -> None:
        """Return at `deadline` (None = no deadline) or as soon as `wake` is set."""
        ...


class SystemClock:
    """Wall-clock time; waits are capped so a jump of the system clock is noticed."""

    def __init__(self, max_wait: timedelta = timedelta(minutes=5)) -> None:
        self.max_wait = max_wait.total_seconds()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, deadline: datetime | None, wake: asyncio.Event) -> None:
        timeout = self.max_wait
        if deadline is not None:
            timeout = min(timeout, max(0.0, (deadline - self.now()).total_seconds()))
        if timeout <= 0 or wake.is_set():
            await asyncio.sleep(0)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout)


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
