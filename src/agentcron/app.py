"""The library facade: `async with AgentCron(db=..., runner=...) as cron` wires store and engine."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from agentcron.agent.runner import Runner, TurnCallable, as_runner
from agentcron.config import EngineSettings, default_db_path
from agentcron.engine.clock import Clock, SystemClock
from agentcron.engine.policies import arm
from agentcron.engine.scheduler import Engine
from agentcron.schedule import parse_when
from agentcron.store.errors import VersionConflictError
from agentcron.store.ids import new_id
from agentcron.store.models import (
    AnySpec,
    Catchup,
    CreatedBy,
    Job,
    JobKind,
    JobPolicy,
    Message,
    NewJob,
    Overlap,
    Run,
    RunState,
    Session,
    Turn,
)
from agentcron.store.sessions import SessionStore
from agentcron.store.sql import ArmedJob, SqlStore, sqlite_url

_CAS_RETRIES = 5


class Jobs:
    """Create, read, change and remove jobs; every change wakes the engine."""

    def __init__(self, cron: AgentCron) -> None:
        self._cron = cron

    @property
    def _store(self) -> SqlStore:
        return self._cron.store

    def _armed(self, new: NewJob, now: datetime) -> ArmedJob:
        job_id = new_id()
        fire, due = arm(new.spec, new.policy, job_id, now, new.policy.max_runs)
        return ArmedJob(job_id, new, fire, due)

    async def create(
        self,
        *,
        name: str,
        when: str | None = None,
        spec: AnySpec | None = None,
        tz: str = "UTC",
        message: str = "",
        session_key: str | None = None,
        kind: JobKind = JobKind.AGENT_TURN,
        created_by: CreatedBy = CreatedBy.API,
        overlap: Overlap = Overlap.DEFER,
        catchup: Catchup = Catchup.LATEST,
        catchup_window: timedelta = timedelta(hours=24),
        max_failures: int = 5,
        max_runs: int | None = None,
        end_at: datetime | None = None,
        delete_after_run: bool = False,
        jitter: bool = False,
        idempotency_key: str | None = None,
        enabled: bool = True,
    ) -> Job:
        """Create one job from `when` (anything parse_when reads) or a ready `spec`."""
        now = self._cron.clock.now()
        if (when is None) == (spec is None):
            raise ValueError("give exactly one of `when` or `spec`")
        resolved = spec if spec is not None else parse_when(when or "", now, tz)
        policy = JobPolicy(
            overlap=Overlap(overlap),
            catchup=Catchup(catchup),
            catchup_window=catchup_window,
            max_failures=max_failures,
            max_runs=max_runs,
            end_at=end_at,
            delete_after_run=delete_after_run,
            jitter=jitter,
        )
        new = NewJob(
            name=name,
            spec=resolved,
            message=message,
            session_key=session_key,
            kind=JobKind(kind),
            created_by=CreatedBy(created_by),
            policy=policy,
            idempotency_key=idempotency_key,
            enabled=enabled,
        )
        return (await self.create_many([new]))[0]

    async def create_many(self, new_jobs: Sequence[NewJob]) -> list[Job]:
        """Create many jobs in one transaction."""
        now = self._cron.clock.now()
        created = await self._store.insert_jobs([self._armed(n, now) for n in new_jobs], now)
        self._cron.engine.wake()
        return created

    async def get(self, job_id: str) -> Job:
        return await self._store.get_job(job_id)

    async def list(
        self,
        *,
        session_key: str | None = None,
        kind: JobKind | None = None,
        enabled: bool | None = None,
        limit: int | None = None,
    ) -> list[Job]:
        return await self._store.list_jobs(
            session_key=session_key, kind=kind, enabled=enabled, limit=limit
        )

    async def update(
        self,
        job_id: str,
        *,
        name: str | None = None,
        message: str | None = None,
        when: str | None = None,
        spec: AnySpec | None = None,
        tz: str | None = None,
        expected_version: int | None = None,
        **policy_changes: Any,
    ) -> Job:
        """Change a job. A new schedule re-computes the next fire at once.

        `expected_version` makes it a compare-and-set (VersionConflictError when the job moved
        on); without it the update retries on concurrent changes.
        """

        def compute(job: Job, now: datetime) -> dict[str, Any]:
            changes: dict[str, Any] = {}
            if name is not None:
                changes["name"] = name
            if message is not None:
                changes["message"] = message
            new_spec = spec
            if when is not None:
                new_spec = parse_when(when, now, tz or job.spec.tz)
            elif tz is not None and new_spec is None:
                new_spec = type(job.spec).model_validate({**job.spec.model_dump(), "tz": tz})
            policy = replace(job.policy, **policy_changes) if policy_changes else job.policy
            if policy_changes:
                changes["policy"] = policy
            if new_spec is not None or policy_changes:
                changes["spec"] = new_spec or job.spec
                remaining = job.remaining_runs
                if "max_runs" in policy_changes:
                    remaining = (
                        None if policy.max_runs is None else max(policy.max_runs - job.run_count, 0)
                    )
                    changes["remaining_runs"] = remaining
                if job.enabled:
                    fire, due = arm(changes["spec"], policy, job.id, now, remaining)
                    changes.update(next_fire_at=fire, next_run_at=due)
            return changes

        return await self._change(job_id, compute, expected_version)

    async def pause(self, job_id: str, reason: str = "paused by user") -> Job:
        def compute(job: Job, now: datetime) -> dict[str, Any]:
            return {
                "enabled": False,
                "paused_reason": reason,
                "paused_at": now,
                "next_fire_at": None,
                "next_run_at": None,
            }

        return await self._change(job_id, compute)

    async def resume(self, job_id: str) -> Job:
        """Re-enable a job from now on (fires due while it was paused do not run)."""

        def compute(job: Job, now: datetime) -> dict[str, Any]:
            fire, due = arm(job.spec, job.policy, job.id, now, job.remaining_runs)
            return {
                "enabled": True,
                "paused_reason": None,
                "paused_at": None,
                "consecutive_failures": 0,
                "next_fire_at": fire,
                "next_run_at": due,
            }

        return await self._change(job_id, compute)

    async def skip_next(self, job_id: str) -> Job:
        """Skip the job's next fire; the one after it is computed from now at the earliest,
        so a skip never schedules into the past.
        """

        def compute(job: Job, now: datetime) -> dict[str, Any]:
            after = max(job.next_fire_at or now, now)
            fire, due = arm(job.spec, job.policy, job.id, after, job.remaining_runs)
            return {"next_fire_at": fire, "next_run_at": due}

        return await self._change(job_id, compute)

    async def _change(
        self,
        job_id: str,
        compute: Callable[[Job, datetime], dict[str, Any]],
        expected_version: int | None = None,
    ) -> Job:
        """Read, compute the changes, compare-and-set; retry on a concurrent change unless the
        caller pinned `expected_version`. Wakes the engine: the next fire may have moved.
        """
        for attempt in range(_CAS_RETRIES):
            job = await self._store.get_job(job_id)
            now = self._cron.clock.now()
            try:
                updated = await self._store.update_job(
                    job_id, compute(job, now), now, expected_version=expected_version or job.version
                )
            except VersionConflictError:
                if expected_version is not None or attempt == _CAS_RETRIES - 1:
                    raise
                continue
            self._cron.engine.wake()
            return updated
        raise AssertionError("unreachable")  # pragma: no cover

    async def delete(self, job_id: str, *, allow_system: bool = False) -> Job:
        job = await self._store.delete_job(job_id, allow_system=allow_system)
        self._cron.engine.wake()
        return job


class Runs:
    """Read run records."""

    def __init__(self, cron: AgentCron) -> None:
        self._cron = cron

    async def list(
        self,
        job_id: str | None = None,
        *,
        session_key: str | None = None,
        states: Sequence[RunState] | None = None,
        limit: int | None = 100,
    ) -> list[Run]:
        return await self._cron.store.list_runs(
            job_id=job_id, session_key=session_key, states=states, limit=limit
        )

    async def get(self, run_id: str) -> Run:
        return await self._cron.store.get_run(run_id)


class Sessions:
    """Sessions, their transcripts and turns; messages go through the session's lane."""

    def __init__(self, cron: AgentCron) -> None:
        self._cron = cron

    @property
    def _sessions(self) -> SessionStore:
        return self._cron.store.sessions

    async def create(
        self,
        key: str | None = None,
        *,
        title: str | None = None,
        tz: str = "UTC",
        channel_meta: dict[str, Any] | None = None,
    ) -> Session:
        """Create (or return) a session; a key `api:<id>` is generated when none is given."""
        if tz != "UTC":
            parse_when("in 1m", self._cron.clock.now(), tz)  # validates the zone name
        return await self._sessions.ensure_session(
            key or f"api:{new_id()}", self._cron.clock.now(), title=title, tz=tz,
            channel_meta=channel_meta,
        )  # fmt: skip

    async def get(self, key: str) -> Session:
        return await self._sessions.get_session(key)

    async def list(self, *, limit: int | None = None) -> list[Session]:
        return await self._sessions.list_sessions(limit=limit)

    async def send(self, key: str, content: str) -> Turn:
        """Submit a user message: it runs as a turn after any turn in progress."""
        if not content.strip():
            raise ValueError("a message needs some content")
        return await self._cron.engine.lanes.submit_message(key, content)

    async def messages(
        self, key: str, *, after: int | None = None, limit: int | None = None
    ) -> builtins.list[Message]:
        return await self._sessions.list_messages(key, after=after, limit=limit)

    async def turn(self, turn_id: str) -> Turn:
        return await self._sessions.get_turn(turn_id)

    async def stop(self, key: str) -> bool:
        """Stop the session's running turn (user or scheduled)."""
        return await self._cron.engine.lanes.stop(key)

    async def delete(self, key: str, *, confirm: bool = False) -> dict[str, Any]:
        """Delete a session. With bound automations it is two-step: without `confirm` nothing
        is deleted and the blocking automations are listed; with it they go first.
        System and legacy jobs never block; the session's recall is cancelled with it.
        """
        await self._sessions.get_session(key)
        owned = await self._cron.jobs.list(session_key=key)
        blocking = [j for j in owned if j.kind is JobKind.AGENT_TURN and not j.legacy]
        if blocking and not confirm:
            return {
                "deleted": False,
                "blocked_by_automations": True,
                "automations": [
                    {"id": j.id, "name": j.name, "enabled": j.enabled} for j in blocking
                ],
            }
        for job in [*blocking, *(j for j in owned if j.kind is JobKind.RECALL)]:
            await self._cron.jobs.delete(job.id)
        await self._cron.engine.lanes.stop(key)
        await self._sessions.delete_session(key)
        return {"deleted": True, "deleted_automations": [j.id for j in blocking]}


class AgentCron:
    """agentcron as a library: a store, an engine and a runner, started and stopped together."""

    def __init__(
        self,
        db: str | Path | None = None,
        *,
        url: str | None = None,
        runner: Runner | TurnCallable,
        clock: Clock | None = None,
        settings: EngineSettings | None = None,
    ) -> None:
        if db is not None and url is not None:
            raise ValueError("give `db` (a SQLite file) or `url`, not both")
        self.clock: Clock = clock or SystemClock()
        self.store = SqlStore(url or sqlite_url(db if db is not None else default_db_path()))
        self.engine = Engine(self.store, as_runner(runner), clock=self.clock, settings=settings)
        self.jobs = Jobs(self)
        self.runs = Runs(self)
        self.sessions = Sessions(self)

    async def start(self) -> None:
        await self.store.open()
        await self.engine.start()

    async def close(self, grace: float | None = None) -> None:
        """Stop the engine (running turns get `grace` seconds to finish) and the store."""
        try:
            await self.engine.stop(grace)
        finally:
            await self.store.close()

    async def __aenter__(self) -> AgentCron:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
