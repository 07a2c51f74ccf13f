"""The facade's parts: jobs, runs, sessions, deliveries and system jobs of one AgentCron.

`AgentCron` (app.py) wires the store, engine, lanes and bus and hands each part the instance;
the parts hold what a library user, the service layer and the agent tools call.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import enum
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from agentcron.agent.runner import (
    TurnSource,
)
from agentcron.config import (
    UNIFIED_SESSION_KEY,
    check_model_name,
)
from agentcron.engine.isolated import SystemHandler
from agentcron.engine.policies import arm
from agentcron.errors import InvalidInputError
from agentcron.events import Event, JobAction
from agentcron.schedule import EverySpec, parse_when
from agentcron.schedule.zones import get_zone
from agentcron.store.deliveries import Delivery, DeliveryCursor, DeliveryState
from agentcron.store.errors import VersionConflictError
from agentcron.store.ids import new_id
from agentcron.store.models import (
    AnySpec,
    Catchup,
    CreatedBy,
    Job,
    JobKind,
    JobPolicy,
    MemoryScope,
    Message,
    NewJob,
    Overlap,
    Recall,
    RecallState,
    Run,
    RunState,
    Session,
    Turn,
)
from agentcron.store.sessions import SessionStore
from agentcron.store.sql import SqlStore
from agentcron.store.writes import ArmedJob, InsertJobs, JobsInserted

if TYPE_CHECKING:
    from agentcron.app import AgentCron


_CAS_RETRIES = 5


class Keep(enum.Enum):
    """`KEEP`: leave a field as it is (where None is a value of its own)."""

    KEEP = "keep"


KEEP = Keep.KEEP
WEB_PREFIX = "websocket:"  # the web UI's chats (threads)
# Unified mode: the shared automations' session and every web thread are one memory.
UNIFIED_MEMORY = MemoryScope(keys=(UNIFIED_SESSION_KEY,), prefixes=(WEB_PREFIX,))


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
        overlap: Overlap = Overlap.BUFFER_ONE,
        catchup: Catchup = Catchup.LATEST,
        catchup_window: timedelta = timedelta(hours=24),
        max_failures: int = 5,
        max_runs: int | None = None,
        end_at: datetime | None = None,
        delete_after_run: bool = False,
        jitter: bool = False,
        idempotency_key: str | None = None,
        enabled: bool = True,
        model: str | None = None,
    ) -> Job:
        """Create one job from `when` (anything parse_when reads) or a ready `spec`; `model`
        names the model its turns run on (None: the runner's default).
        """
        now = self._cron.clock.now()
        if (when is None) == (spec is None):
            raise InvalidInputError("give exactly one of `when` or `spec`")
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
            model=check_model_name(model),
        )
        return (await self.create_many([new]))[0]

    async def create_many(self, new_jobs: Sequence[NewJob]) -> list[Job]:
        """Create many jobs in one transaction."""
        now = self._cron.clock.now()
        # Through the group commit: concurrent creates (API clients) share a transaction.
        inserted = await self._cron.journal.write(
            InsertJobs(
                [self._armed(n, now) for n in new_jobs],
                now,
                max_jobs=self._cron.settings.max_jobs,
            )
        )
        if not isinstance(inserted, JobsInserted):
            raise TypeError(f"creating jobs was answered with {inserted!r}")
        created = inserted.jobs
        self._cron.engine.due_at(
            min((j.next_run_at for j in created if j.next_run_at), default=None)
        )
        for job in created:
            await self._cron.publish_job(JobAction.CREATED, job)
        return created

    async def get(self, job_id: str) -> Job:
        return await self._store.get_job(job_id)

    async def usage(self, job_id: str) -> dict[str, Any]:
        """Tokens and cost summed over the job's run records: what this schedule costs."""
        return await self._store.usage_totals(job_id=job_id)

    async def for_session(self, session_key: str) -> builtins.list[Job]:
        """The automations and recall a chat shows: its own, and in unified mode also those
        of `unified:default` (which every web chat lists).
        """
        keys = dict.fromkeys([session_key, self._cron.automation_owner(session_key)])
        found: builtins.list[Job] = []
        for key in keys:
            found.extend(await self.list(session_key=key))
        return found

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
        model: str | Keep | None = KEEP,
        **policy_changes: Any,
    ) -> Job:
        """Change a job. A new schedule re-computes the next fire at once; `model=None` goes
        back to the runner's default model.

        `expected_version` makes it a compare-and-set (VersionConflictError when the job moved
        on); without it the update retries on concurrent changes.
        """

        def compute(job: Job, now: datetime) -> dict[str, Any]:
            changes: dict[str, Any] = {}
            if name is not None:
                changes["name"] = name
            if message is not None:
                changes["message"] = message
            if not isinstance(model, Keep):
                changes["model"] = check_model_name(model)
            new_spec = spec
            if when is not None:
                new_spec = parse_when(when, now, tz or job.spec.tz)
            elif tz is not None and new_spec is None:
                get_zone(tz)  # an unknown zone is the caller's error (InvalidZoneError)
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

        return await self._change(job_id, compute, JobAction.UPDATED, expected_version)

    async def pause(self, job_id: str, reason: str = "paused by user") -> Job:
        def compute(job: Job, now: datetime) -> dict[str, Any]:
            return {
                "enabled": False,
                "paused_reason": reason,
                "paused_at": now,
                "next_fire_at": None,
                "next_run_at": None,
            }

        return await self._change(job_id, compute, JobAction.PAUSED)

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

        return await self._change(job_id, compute, JobAction.RESUMED)

    async def skip_next(self, job_id: str) -> Job:
        """Skip the job's next fire; the one after it is computed from now at the earliest,
        so a skip never schedules into the past.
        """

        def compute(job: Job, now: datetime) -> dict[str, Any]:
            after = max(job.next_fire_at or now, now)
            fire, due = arm(job.spec, job.policy, job.id, after, job.remaining_runs)
            return {"next_fire_at": fire, "next_run_at": due}

        return await self._change(job_id, compute, JobAction.SKIPPED)

    async def _change(
        self,
        job_id: str,
        compute: Callable[[Job, datetime], dict[str, Any]],
        action: JobAction,
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
            # A later or removed fire needs nothing: the engine finds it at its next wake-up.
            self._cron.engine.due_at(updated.next_run_at)
            await self._cron.publish_job(action, updated)
            return updated
        raise AssertionError("unreachable")  # pragma: no cover

    async def delete(self, job_id: str, *, allow_system: bool = False) -> Job:
        """Delete a job; a deleted recall is cancelled and stays readable in `recalls`."""
        job = await self._store.delete_job(
            job_id, allow_system=allow_system, now=self._cron.clock.now()
        )
        await self._cron.publish_job(JobAction.DELETED, job)
        return job

    async def recalls(
        self,
        session_key: str,
        *,
        states: Iterable[RecallState] | None = None,
        limit: int = 100,
    ) -> builtins.list[Recall]:
        """A session's recalls (seed 003): the pending one first, then those that fired or
        were cancelled, newest first; `states` keeps only some of them.
        """
        wanted = None if states is None else set(states)
        found: builtins.list[Recall] = []
        if wanted is None or RecallState.PENDING in wanted:
            pending = await self._store.list_jobs(session_key=session_key, kind=JobKind.RECALL)
            found.extend(Recall.of_job(j, RecallState.PENDING) for j in pending)
        ended = None if wanted is None else wanted - {RecallState.PENDING}
        if ended is None or ended:
            found.extend(await self._store.recall_history(session_key, states=ended, limit=limit))
        return found[:limit]


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

    async def wait(self, run_id: str, seconds: float) -> Run:
        """The run once it is terminal, or as it is after `seconds`."""
        engine = self._cron.engine
        with engine.run_waiters.watch(run_id) as done:
            return await _wait_for(
                lambda: self.get(run_id),
                lambda r: r.state.terminal,
                done,
                seconds,
                lambda: self._cron.stopping,
            )


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
            key or f"api:{new_id()}",
            self._cron.clock.now(),
            title=title,
            tz=tz,
            channel_meta=channel_meta,
        )

    async def get(self, key: str) -> Session:
        return await self._sessions.get_session(key)

    async def list(self, *, limit: int | None = None) -> list[Session]:
        return await self._sessions.list_sessions(limit=limit)

    async def note(self, key: str, content: str) -> Message:
        """A message in the transcript that starts no turn (seed 004 `triggerAgent=false`): the
        agent sees it as history in the session's next turn.
        """
        _check_text(content)
        return await self._cron.lanes.posts.post(key, "user", content, {"source": "note"})

    async def deliver(self, key: str, text: str) -> Message:
        """Send `text` out through the session's channel without the agent (seed 004 `send`):
        an assistant entry marked `sent_by: operator`, delivered by the channels like a reply.
        """
        _check_text(text)
        meta = {"source": "operator", "sent_by": "operator"}
        return await self._cron.lanes.posts.post(key, "assistant", text, meta)

    async def send(self, key: str, content: str, *, source: TurnSource = TurnSource.USER) -> Turn:
        """Submit a message (from the user, or a hook): it runs as a turn after any turn in
        progress.
        """
        _check_text(content)
        # A new chat is named after its first message.
        return await self._cron.lanes.submit_message(
            key, content, source=source, title=_title(content)
        )

    def running_turn(self, key: str) -> str | None:
        """The id of the session's turn running in this process now, if any."""
        return self._cron.lanes.running_turn(key)

    def replay(self, key: str) -> builtins.list[Event]:
        """The events of the session's turn in progress (for a client that just subscribed)."""
        return self._cron.lanes.replay(key)

    async def messages(
        self, key: str, *, after: int | None = None, limit: int | None = None
    ) -> builtins.list[Message]:
        return await self._sessions.list_messages(key, after=after, limit=limit)

    async def turns(self, key: str, *, limit: int | None = None) -> builtins.list[Turn]:
        """The session's turns (user and scheduled), oldest first."""
        return await self._sessions.list_turns(key, limit=limit)

    async def usage(self, key: str) -> dict[str, Any]:
        """Tokens and cost summed over the session's turns, user and scheduled."""
        return await self._cron.store.usage_totals(session_key=key)

    async def turn(self, turn_id: str) -> Turn:
        return await self._sessions.get_turn(turn_id)

    async def wait_turn(self, turn_id: str, seconds: float) -> Turn:
        """The turn once it has ended, or as it is after `seconds`."""
        with self._cron.lanes.turn_waiters.watch(turn_id) as done:
            return await _wait_for(
                lambda: self.turn(turn_id),
                lambda t: t.state.terminal,
                done,
                seconds,
                lambda: self._cron.stopping,
            )

    async def stop(self, key: str) -> bool:
        """Stop the session's running turn (user or scheduled)."""
        return await self._cron.lanes.stop(key)

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
        await self._cron.lanes.stop(key)
        await self._sessions.delete_session(key)
        return {"deleted": True, "deleted_automations": [j.id for j in blocking]}


def _check_text(text: str) -> None:
    if not text.strip():
        raise InvalidInputError("a message needs some content")


class Deliveries:
    """What the channels did with the sessions' messages (delivery records)."""

    def __init__(self, cron: AgentCron) -> None:
        self._store = cron.store.deliveries

    async def page(
        self,
        *,
        session_key: str | None = None,
        state: DeliveryState | None = None,
        channel: str | None = None,
        limit: int = 50,
        before: DeliveryCursor | None = None,
    ) -> builtins.list[Delivery]:
        """Newest first, `limit` at most, after the cursor `before` (see `DeliveryStore.page`)."""
        return await self._store.page(
            session_key=session_key, state=state, channel=channel, limit=limit, before=before
        )


class SystemJobs:
    """System jobs (heartbeat, dream, ...): their own path, not session turns.

    A system job runs through the handler registered for its name (or, without one, as an
    isolated run of the runner). Users cannot delete them; the host application owns them.
    """

    def __init__(self, cron: AgentCron) -> None:
        self._cron = cron

    def register(self, name: str, handler: SystemHandler) -> None:
        """Run system job `name` with `handler(trigger) -> Outcome | str | None`."""
        self._cron.engine.system_handlers[name] = handler

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
            for j in await self._cron.jobs.list(kind=JobKind.SYSTEM_EVENT)
            if j.name == name and j.session_key is None
        ]
        if not existing:
            return await self._cron.jobs.create(
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
        spec = parse_when(when, self._cron.clock.now(), tz)
        if _same_schedule(job.spec, spec) and job.message == message:
            return job
        return await self._cron.jobs.update(job.id, spec=spec, message=message)

    async def list(self) -> builtins.list[Job]:
        return await self._cron.jobs.list(kind=JobKind.SYSTEM_EVENT)


def _title(content: str, words: int = 8, chars: int = 60) -> str:
    text = " ".join(content.split()[:words])
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


_T = TypeVar("_T")
# A record finished by another process sends no wake-up here: look again this often.
_RECHECK_S = 2.0


async def _wait_for(
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


def _same_schedule(a: AnySpec, b: AnySpec) -> bool:
    """Equal schedules; an `every` re-parsed now has a new anchor but the same interval."""
    if isinstance(a, EverySpec) and isinstance(b, EverySpec):
        return a.seconds == b.seconds and a.tz == b.tz
    return a == b
