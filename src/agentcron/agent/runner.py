"""The runner protocol: what executes a turn for a fire, plus an adapter for plain callables."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Trigger:
    """The inbound session event one fire produces."""

    run_id: str
    job_id: str
    job_name: str
    kind: str
    session_key: str | None
    message: str
    fire_at: datetime
    scheduled_by: str = "agentcron"


class OutcomeStatus(enum.StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EMPTY = "empty"


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a turn ended: success with text, failure with an error, or an empty result."""

    status: OutcomeStatus
    text: str | None = None
    error: str | None = None
    error_details: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def succeeded(cls, text: str, **kw: Any) -> Outcome:
        return cls(OutcomeStatus.SUCCEEDED, text=text, **kw)

    @classmethod
    def failed(cls, error: str, **kw: Any) -> Outcome:
        return cls(OutcomeStatus.FAILED, error=error, **kw)

    @classmethod
    def empty(cls, **kw: Any) -> Outcome:
        return cls(OutcomeStatus.EMPTY, **kw)


class Runner(Protocol):
    async def run_turn(self, session_key: str | None, trigger: Trigger) -> Outcome: ...


TurnCallable = Callable[[Trigger], Awaitable[Outcome | str | None]]


class CallableRunner:
    """Adapts `async def fn(trigger) -> Outcome | str | None`: text = success, None/"" = empty."""

    def __init__(self, fn: TurnCallable) -> None:
        self._fn = fn

    async def run_turn(self, session_key: str | None, trigger: Trigger) -> Outcome:
        result = await self._fn(trigger)
        if isinstance(result, Outcome):
            return result
        if result is None or not result.strip():
            return Outcome.empty()
        return Outcome.succeeded(result)


def as_runner(runner: Runner | TurnCallable) -> Runner:
    """Accept a Runner or a plain async callable."""
    if isinstance(runner, CallableRunner) or hasattr(runner, "run_turn"):
        return runner
    return CallableRunner(runner)
