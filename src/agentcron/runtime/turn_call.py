"""One guard around every runner call: errors, timeouts, a person's stop and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from agentcron.agent.runner import Outcome, ToolLog, ToolRecord, as_outcome, turn_tools

log = logging.getLogger(__name__)

STOPPED = "stopped by the user"


class TurnCall:
    """Runs one runner call as its own task, so that a person can stop it (`stop()`: the turn
    ends cancelled with STOPPED, which is not a failure) and a shutdown can cut it (the
    caller's cancellation propagates after the call is cancelled: the caller records the turn
    interrupted).

    A raised exception becomes a failed Outcome with the traceback in its details; running
    past `timeout` seconds, a failed Outcome that says so; an answer that is not an Outcome
    is read as `as_outcome` reads a plain callable's answer. Time between `hold_clock` and
    `resume_clock` (the runner waits for something outside the turn, `runner.paused()`) does
    not count against `timeout`.

    The tool calls the runner reports as they happen (`runner.tool_ran`) are kept (`tools`):
    an outcome the guard makes (stopped, timed out, raised) carries them, so does an answer
    without tools of its own, and a caller that is cut reads them to close the turn.
    """

    def __init__(self, timeout: float | None = None) -> None:
        self._timeout = timeout
        self._task: asyncio.Task[Any] | None = None
        self._stopped = False
        self._timer: asyncio.Timeout | None = None  # the running call's timeout
        self._left: float | None = None  # seconds of the timeout left while the clock is held
        self._tools = ToolLog()

    @property
    def tools(self) -> tuple[ToolRecord, ...]:
        """The tool calls the runner has reported so far."""
        return self._tools.records

    @property
    def active(self) -> bool:
        return self._task is not None and not self._task.done()

    def stop(self) -> bool:
        """Stop the call: a running one is cancelled; one not started yet will not call the
        runner at all (`run` answers cancelled at once). False once the call has ended.
        """
        if self._task is None:
            self._stopped = True
            return True
        if self._task.done():
            return False
        self._stopped = True
        self._task.cancel()
        return True

    async def run(
        self, call: Callable[[], Awaitable[Any]], ctx: dict[str, Any] | None = None
    ) -> Outcome:
        if self._stopped:  # stopped before the runner was called: it never is
            return Outcome.cancelled(STOPPED)
        tools = self._tools

        async def invoke() -> Any:
            # Set inside the runner's task: the runner and the tasks it starts report to it.
            turn_tools.set(tools)
            return await call()

        task = self._task = asyncio.create_task(invoke())
        try:
            async with asyncio.timeout(self._timeout) as timer:
                self._timer = timer
                try:
                    result = await asyncio.shield(task)
                finally:
                    self._timer = None
        except TimeoutError:
            await _cancel(task)
            log.warning("turn timed out after %s s", self._timeout, extra=ctx)
            return Outcome.failed(
                f"TimeoutError: the turn ran longer than {self._timeout:g} s", tools=self.tools
            )
        except asyncio.CancelledError:
            if self._stopped and task.cancelled():
                return Outcome.cancelled(STOPPED, tools=self.tools)
            await _cancel(task)  # we are being cancelled (shutdown): stop the turn too
            raise
        except Exception as exc:
            log.warning("turn failed: %s", exc, extra=ctx)
            return Outcome.failed(
                f"{type(exc).__name__}: {exc}",
                error_details={"traceback": traceback.format_exc(limit=20)},
                tools=self.tools,
            )
        if not isinstance(result, Outcome):
            if result is not None and not isinstance(result, str):
                return Outcome.failed(
                    f"runner returned {type(result).__name__}, not an Outcome", tools=self.tools
                )
            result = as_outcome(result)
        if result.tools:
            return result
        reported = self.tools
        return replace(result, tools=reported) if reported else result

    def hold_clock(self) -> None:
        """Stop the timeout's clock (the runner waits for something outside the turn)."""
        timer = self._timer
        if timer is None or timer.expired() or self._left is not None:
            return
        when = timer.when()
        if when is None:  # no timeout
            return
        self._left = max(0.0, when - asyncio.get_running_loop().time())
        timer.reschedule(None)

    def resume_clock(self) -> None:
        """Let the timeout's clock run on from where `hold_clock` stopped it."""
        timer, left = self._timer, self._left
        self._left = None
        if timer is None or left is None or timer.expired():
            return
        timer.reschedule(asyncio.get_running_loop().time() + left)


async def _cancel(task: asyncio.Task[Any]) -> None:
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
