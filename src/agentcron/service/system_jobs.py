"""System jobs (heartbeat, dream, ...): owned by the host application, run by their handlers."""

from __future__ import annotations

import builtins
from collections.abc import MutableMapping

from agentcron.domain.jobs import AnySpec, Catchup, CreatedBy, Job, JobKind
from agentcron.engine.isolated import SystemHandler
from agentcron.runtime.clock import Clock
from agentcron.schedule import EverySpec, parse_when
from agentcron.service.jobs import Jobs


class SystemJobs:
    """System jobs: their own path, not session turns.

    A system job runs through the handler registered for its name (or, without one, as an
    isolated run of the runner). Users cannot delete them; the host application owns them.
    """

    def __init__(
        self, jobs: Jobs, handlers: MutableMapping[str, SystemHandler], clock: Clock
    ) -> None:
        self._jobs = jobs
        self._handlers = handlers  # the engine's, by job name
        self._clock = clock

    def register(self, name: str, handler: SystemHandler) -> None:
        """Run system job `name` with `handler(trigger) -> Outcome | str | None`."""
        self._handlers[name] = handler

    async def ensure(
        self,
        name: str,
        when: str,
        *,
        message: str = "",
        tz: str = "UTC",
        handler: SystemHandler | None = None,
    ) -> Job:
        """Create system job `name` once (idempotent across restarts); a changed schedule or
        message updates it. Returns the stored job.
        """
        if handler is not None:
            self.register(name, handler)
        existing = [
            j
            for j in await self._jobs.list(kind=JobKind.SYSTEM_EVENT)
            if j.name == name and j.session_key is None
        ]
        if not existing:
            return await self._jobs.create(
                name=name,
                when=when,
                tz=tz,
                message=message,
                kind=JobKind.SYSTEM_EVENT,
                created_by=CreatedBy.SYSTEM,
                idempotency_key=f"system:{name}",
                catchup=Catchup.LATEST,
            )
        job = existing[0]
        spec = parse_when(when, self._clock.now(), tz)
        if _same_schedule(job.spec, spec) and job.message == message:
            return job
        return await self._jobs.update(job.id, spec=spec, message=message)

    async def list(self) -> builtins.list[Job]:
        return await self._jobs.list(kind=JobKind.SYSTEM_EVENT)


def _same_schedule(a: AnySpec, b: AnySpec) -> bool:
    """Equal schedules; an `every` re-parsed now has a new anchor but the same interval."""
    if isinstance(a, EverySpec) and isinstance(b, EverySpec):
        return a.seconds == b.seconds and a.tz == b.tz
    return a == b
