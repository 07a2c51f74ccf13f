"""Waiting (bounded, in real time) for a record to reach a terminal state: HTTP long polls."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

_T = TypeVar("_T")
# A record finished by another process sends no wake-up here: look again this often.
_RECHECK_S = 2.0


async def wait_for(
    read: Callable[[], Awaitable[_T]],
    finished: Callable[[_T], bool],
    done: asyncio.Event,
    seconds: float,
    stopping: Callable[[], bool] = lambda: False,
) -> _T:
    """Read a record until `finished` (woken by `done`), for at most `seconds` of real time
    (this serves callers outside the engine, such as HTTP long polls), or until agentcron
    begins to stop: then the record is returned as it is, so no caller holds up a shutdown.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, seconds)
    while True:
        done.clear()
        record = await read()
        left = deadline - loop.time()
        if finished(record) or left <= 0 or stopping():
            return record
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), min(left, _RECHECK_S))
