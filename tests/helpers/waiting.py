"""Waiting in a test for what the system does on its own: a check polled until it holds."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll `check` every 5 ms until it holds; fail naming `what` after about 10 s."""
    for _ in range(2000):
        if await check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never: {what}")
