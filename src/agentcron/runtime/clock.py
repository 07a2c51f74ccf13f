"""Time for the engine: the only way it reads the clock or waits (`agentcron.testing` has
the fake one tests move by hand)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Protocol


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
