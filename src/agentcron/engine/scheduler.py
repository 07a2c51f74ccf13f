"""The engine: sleeps until the next due fire, claims it, runs it, records every outcome."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import Counter, deque
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from ulid import ULID

from agentcron.agent.guard import TurnCall
from agentcron.agent.runner import (
    HistoryEntry,
    NullEvents,
    Outcome,
    Runner,
    SessionInfo,
    TurnInput,
    as_outcome,
    fire_source,
    fire_trigger,
)
from agentcron.config import EngineSettings
from agentcron.engine.clock import Clock, SystemClock
from agentcron.engine.legacy import (
    Evaluation,
    Evaluator,
    MemoryReader,
    SystemHandler,
    delivery_meta,
    evaluate,
    evaluate_response,
    legacy_target_key,
    memory_key,
    remember_exchange,
)
from agentcron.engine.policies import plan_fires
from agentcron.engine.waiters import Waiters
from agentcron.events import (
    EventBus,
    FireStarted,
    SessionSync,
    SystemEventFired,
    publish_fire_settled,
)
from agentcron.store.interface import FireLedger
from agentcron.store.journal import Journal
from agentcron.store.models import STOPPED_MID_TURN, ClaimedFire, FirePlan, Job, JobKind, RunState
from agentcron.store.writes import (
    InsertJobs,
    JobOutcome,
    Remember,
    RunEnd,
    Transition,
    TurnFinished,
    Write,
    WriteResult,
)

log = logging.getLogger(__name__)

_RETRY_AFTER_ERROR = timedelta(seconds=1)
_FIRST_CLAIM = 50  # due jobs in the first claim of a burst (then x4 per claim, to batch_size)


def make_owner() -> str:
    """This engine's identity in leases: host, pid and a unique suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{ULID()}"


def owner_is_dead(owner: str) -> bool:
    """True only when `owner` is certainly gone: a process of this host that no longer exists."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False  # another engine in this process: only its lease can tell
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class TurnSink(Protocol):
    """Where session-turn fires go (the sessions' lanes, wired by AgentCron): it carries each
    fire it takes to a terminal state, through the same journal.
    """

    async def submit_fire(self, fire: ClaimedFire) -> None: ...

    async def recover(self, is_dead: Callable[[str], bool]) -> None: ...

    async def shutdown(self, grace: float) -> None: ...

    @property
    def holds_leases(self) -> bool: ...

    def quiet(self, *, busy_ok: bool = False) -> bool: ...


class Engine:
    """Claims due fires and carries each to a terminal state. One per process; several may
    share a database.

    A session-turn fire is handed to the turn sink (the lanes) as soon as it is claimed; the
    claim already opened its turn. Any other fire (a system job, a legacy unbound job) runs
    here, isolated. Time comes only from `clock`; every run change goes through the journal.
    """

    def __init__(
        self,
        store: FireLedger,
        runner: Runner,
        *,
        journal: Journal,
        turns: TurnSink,
        slots: asyncio.Semaphore,
        bus: EventBus,
        clock: Clock | None = None,
        settings: EngineSettings | None = None,
        owner: str | None = None,
        evaluator: Evaluator = evaluate_response,
        deliver: Callable[..., Coroutine[Any, Any, Any]] | None = None,
        memory: MemoryReader | None = None,
    ) -> None:
        self.store = store
        self.runner = runner
        self.journal = journal
        self.turns = turns
        self.bus = bus
        self.evaluator = evaluator
        self._deliver = deliver  # posts a legacy job's result into its target session
        # Reads a legacy job's memory (`cron:{job_id}`); None: the runner keeps no history,
        # and a legacy run reads and saves none (it pays nothing for it).
        self._memory = memory
        # System jobs (kind system_event) run through the handler registered for their name.
        self.system_handlers: dict[str, SystemHandler] = {}
        self.clock: Clock = clock or SystemClock()
        self.settings = settings or EngineSettings()
        self.owner = owner or make_owner()
        self.stats: Counter[str] = Counter()
        self._wake = asyncio.Event()
        self._hb_wake = asyncio.Event()
        self._slots = slots
        self.run_waiters = Waiters()  # callers waiting for a run to reach a terminal state
        self._job_queues: dict[str, deque[ClaimedFire]] = {}
        self._waiting: dict[str, ClaimedFire] = {}  # isolated fires claimed, not started
        self._running: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._awaiting_slot = 0
        self._touched: set[str] = set()
        self._next_prune: datetime | None = None
        self._next_due: datetime | None = None
        # Fires of other engines are reaped when their lease runs out; we look for them at
        # start and then once per lease period, not on every wake-up.
        self._next_reap: datetime | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._service_tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._closed = False
        self._sleeping = False
        self._deadline: datetime | None = None
        journal.listeners.append(self._committed)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Reap fires abandoned by dead processes, adopt released ones, then start the loop."""
        now = self.clock.now()
        self.journal.start()
        await self._reap(now)
        self._next_reap = await self._reap_deadline(now)
        await self.turns.recover(owner_is_dead)
        await self._adopt(now)
        await self.store.prune_runs(
            now,
            keep_per_job=self.settings.retention_runs_per_job,
            max_age=self.settings.retention_age,
        )
        self._service_tasks = [
            asyncio.create_task(self._heartbeat(), name="agentcron-heartbeat"),
        ]
        self._loop_task = asyncio.create_task(self._loop(), name="agentcron-engine")

    async def stop(self, grace: float | None = None) -> None:
        """Stop claiming, let running turns finish (up to `grace` s), release the rest."""
        if self._loop_task is None or self._closed:
            return
        self._closed = True
        self._stopping = True
        self._wake.set()
        await self._loop_task
        wait = self.settings.stop_timeout if grace is None else grace
        tasks = list(self._tasks)
        lanes = asyncio.create_task(self.turns.shutdown(wait))
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=wait)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await lanes
        released = await self.store.release(self.owner, list(self._waiting))
        if released:
            log.info("released %d fires that had not started", released)
        self._waiting.clear()
        self._job_queues.clear()
        await self.journal.close()
        for task in self._service_tasks:
            task.cancel()
        await asyncio.gather(*self._service_tasks, return_exceptions=True)

    @property
    def running(self) -> bool:
        """The loop is up (started, not stopped, not crashed)."""
        return self._loop_task is not None and not self._loop_task.done() and not self._closed

    def wake(self) -> None:
        """Re-read the schedule now (a job was created, changed or removed)."""
        self._wake.set()

    def due_at(self, at: datetime | None) -> None:
        """A job is now due at `at`: wake up if that is before the engine's next wake-up (a
        later fire, or a job removed, needs nothing: it is found then).
        """
        if at is None:
            return
        asleep = self._sleeping and not self._wake.is_set()
        if not asleep or self._deadline is None or at - self.settings.claim_ahead < self._deadline:
            self._wake.set()

    def leases_held(self) -> None:
        """Something now holds leases (a turn waits or runs): keep them renewed."""
        self._hb_wake.set()

    # -- the loop ------------------------------------------------------------------------

    async def _loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            now = self.clock.now()
            try:
                if self._next_reap is not None and self._next_reap <= now:
                    await self._reap(now)
                    await self.turns.recover(owner_is_dead)
                    await self._adopt(now)
                    self._next_reap = await self._reap_deadline(now)
                await self._claim_due(now)
                await self._maybe_prune(now)
                deadline = self._next_deadline()
            except Exception:
                log.exception("engine tick failed; retrying in %s", _RETRY_AFTER_ERROR)
                deadline = now + _RETRY_AFTER_ERROR
            if self._stopping:
                break
            self._deadline, self._sleeping = deadline, True
            try:
                await self.clock.sleep_until(deadline, self._wake)
            finally:
                self._sleeping = False

    async def _claim_due(self, now: datetime) -> None:
        settings = self.settings
        lease_until = now + settings.lease
        # Claim a few ms ahead and start each fire at its exact time (see claim_ahead).
        due_by = now + settings.claim_ahead

        def planner(job: Job, at: datetime, active: int, waiting: int) -> FirePlan:
            return plan_fires(job, at, active, waiting, settings)

        # A burst is claimed in growing batches: the first fires start after a small claim,
        # not after the whole burst is claimed.
        limit = min(settings.batch_size, _FIRST_CLAIM)
        while not self._stopping:
            result = await self.store.claim_due(
                now,
                owner=self.owner,
                lease_until=lease_until,
                limit=limit,
                planner=planner,
                due_by=due_by,
            )
            self._next_due = result.next_due_at
            self.stats["claimed"] += len(result.fires)
            for fire in result.fires:
                await self._dispatch(fire)
            if result.examined < limit:
                return
            limit = min(settings.batch_size, limit * 4)
            # Let the fires just claimed queue their first writes before the next claim takes
            # the database writer (tasks, then the journal, each need a turn of the loop).
            for _ in range(3):
                await asyncio.sleep(0)

    def _next_deadline(self) -> datetime | None:
        due = None if self._next_due is None else self._next_due - self.settings.claim_ahead
        candidates = [due, self._next_reap]
        if self._touched:
            candidates.append(self._next_prune)
        found = [c for c in candidates if c is not None]
        return min(found) if found else None

    async def _reap_deadline(self, now: datetime) -> datetime:
        """When to look again for fires abandoned by other engines: at the earliest lease
        expiry among them, and at least every `reap_interval` (another engine may start,
        claim and die at any time; one indexed query per interval finds its fires).
        """
        expiry = await self.store.earliest_foreign_lease(self.owner)
        sweep = now + self.settings.reap_interval
        return sweep if expiry is None else min(expiry, sweep)

    async def _reap(self, now: datetime) -> None:
        for run in await self.store.reap(now, self.owner, owner_is_dead):
            self.stats["interrupted"] += 1
            log.warning(
                "fire interrupted: its process stopped mid-way; not re-run",
                extra={"job_id": run.job_id, "run_id": run.id, "session_key": run.session_key},
            )

    async def _adopt(self, now: datetime) -> None:
        """Take over fires that were claimed but never started by an engine that is gone."""
        for fire in await self.store.adopt_released(self.owner, now + self.settings.lease, now):
            log.info("adopted a fire that never started", extra=_ctx(fire))
            await self._dispatch(fire)

    async def _maybe_prune(self, now: datetime) -> None:
        if not self._touched:
            return
        if self._next_prune is None:
            self._next_prune = now + self.settings.prune_interval
        if now < self._next_prune:
            return
        touched, self._touched = self._touched, set()
        removed = await self.store.prune_runs(
            now,
            keep_per_job=self.settings.retention_runs_per_job,
            max_age=self.settings.retention_age,
            job_ids=touched,
        )
        self._next_prune = None
        if removed:
            log.info("pruned %d run records", removed)

    # -- dispatch ----------------------------------------------------------------------------

    async def _dispatch(self, fire: ClaimedFire) -> None:
        """Hand a session-turn fire to its session's lane; queue any other fire behind earlier
        fires of its job and start it when it is first.
        """
        self._touched.add(fire.job.id)
        self._hb_wake.set()
        if fire.turn_id is not None:
            await self.turns.submit_fire(fire)
            return
        queue = self._job_queues.get(fire.job.id)
        if queue is not None or self._slots.locked():
            # It has to wait (for its job's earlier fire or for a free slot): say so.
            self.journal.post(RunEnd(Transition(fire.run_id, RunState.QUEUED, self.clock.now())))
        self._waiting[fire.run_id] = fire
        if queue is None:
            self._job_queues[fire.job.id] = deque([fire])
            self._spawn(self._execute(fire))
        else:
            queue.append(fire)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _next_of_job(self, job_id: str) -> None:
        queue = self._job_queues.get(job_id)
        if queue is None:
            return
        queue.popleft()
        if not queue:
            del self._job_queues[job_id]
        elif not self._stopping:
            self._spawn(self._execute(queue[0]))

    async def _execute(self, fire: ClaimedFire) -> None:
        started = False
        try:
            if fire.fire_at > self.clock.now():  # claimed ahead: start on the dot
                await self.clock.sleep_until(fire.fire_at, asyncio.Event())
            self._awaiting_slot += 1
            try:
                await self._slots.acquire()
            finally:
                self._awaiting_slot -= 1
            try:
                if self._stopping:
                    return  # never started: released at stop for the next engine
                started = True
                await self._run_isolated(fire)
            finally:
                self._slots.release()
        finally:
            if started:
                self._next_of_job(fire.job.id)

    # -- isolated runs (system and legacy jobs) ------------------------------------------------

    async def _run_isolated(self, fire: ClaimedFire) -> None:
        """A fire that is not a session turn: a system job's handler, or the isolated run of a
        legacy unbound job followed by its evaluate step and delivery.
        """
        job = fire.job
        self._waiting.pop(fire.run_id, None)
        current = asyncio.current_task()
        if current is not None:
            self._running[fire.run_id] = current
        now = self.clock.now()
        # Durable before the turn starts: after a crash this fire is interrupted, not re-run.
        await self.journal.write(RunEnd(Transition(fire.run_id, RunState.RUNNING, now)))
        if self.bus.active:
            await self.bus.publish(
                FireStarted(
                    session_key=job.session_key or "",
                    job_id=job.id,
                    run_id=fire.run_id,
                    lateness_s=(self.clock.now() - fire.fire_at).total_seconds(),
                )
            )
        trigger = fire_trigger(fire)
        system = job.kind is JobKind.SYSTEM_EVENT
        if system and self.bus.active:
            # Seed 004: a system event's text goes to its session's subscribers (live views),
            # whatever its handler then does.
            await self.bus.publish(
                SystemEventFired(
                    session_key=job.session_key or "",
                    job_id=job.id,
                    run_id=fire.run_id,
                    name=job.name,
                    text=job.message,
                )
            )
        handler = self.system_handlers.get(job.name) if system else None
        session = SessionInfo(
            key=f"system:{job.name}" if system else memory_key(job),
            channel=job.channel or ("system" if system else "cron"),
            chat_id=job.to or job.id,
            channel_meta=job.channel_meta,
            tz=job.spec.tz,
        )
        remembers = not system and self._memory is not None
        turn = TurnInput(
            turn_id=fire.run_id,
            source=fire_source(job),
            prompt=job.message,
            history=await self._history(fire, session.key) if remembers else (),
            now=now,
            trigger=trigger,
        )

        async def call() -> Outcome:
            if handler is not None:
                return as_outcome(await handler(trigger))
            return await self.runner.run_turn(session, turn, NullEvents())

        try:
            outcome = await TurnCall(self.settings.turn_timeout).run(call, _ctx(fire))
        except asyncio.CancelledError:
            self._finish(
                fire,
                RunState.INTERRUPTED,
                Outcome.failed(STOPPED_MID_TURN),
            )
            raise
        finally:
            self._running.pop(fire.run_id, None)
        delivery, message_id = None, None
        if not system:
            delivery, message_id = await self._deliver_legacy(fire, outcome)
        state = RunState(outcome.status.value)
        remember = remember_exchange(job, fire.run_id, job.message, outcome) if remembers else None
        result = await self._finish(
            fire, state, outcome, message_id=message_id, delivery=delivery, remember=remember
        )
        if remember is not None and self.bus.active:  # its memory's transcript grew
            await self.bus.publish(SessionSync(session_key=remember.session_key))
        if job.session_key is not None and self.bus.active:
            # The job's record (next run, auto-pause, removal) is committed: say so.
            deleted = isinstance(result, TurnFinished) and result.job_deleted
            await publish_fire_settled(self.bus, fire, state.value, job_deleted=deleted)

    async def _history(self, fire: ClaimedFire, key: str) -> tuple[HistoryEntry, ...]:
        """A legacy run's memory; a failed read costs the run its memory, not the run."""
        if self._memory is None:
            return ()
        try:
            return tuple(await self._memory(key))
        except Exception:
            log.exception("could not read a legacy job's memory", extra=_ctx(fire))
            return ()

    async def _deliver_legacy(
        self, fire: ClaimedFire, outcome: Outcome
    ) -> tuple[dict[str, Any], str | None]:
        """The legacy evaluate step, then delivery to the job's target; both go on the run."""
        job = fire.job
        try:
            verdict = await evaluate(self.evaluator, job, outcome)
        except Exception as exc:
            log.exception("the evaluate step failed", extra=_ctx(fire))
            verdict = Evaluation(False, f"the evaluate step failed: {type(exc).__name__}: {exc}")
        record: dict[str, Any] = {
            "evaluated": {"deliver": verdict.deliver, "reason": verdict.reason},
            "target": {"channel": job.channel, "to": job.to} if job.channel or job.to else None,
            "delivered": False,
        }
        if not verdict.deliver:
            return record, None
        if self._deliver is None:
            record["error"] = "no delivery is wired to this engine"
            return record, None
        key = legacy_target_key(job)
        try:
            message = await self._deliver(
                key,
                outcome.text or "",
                delivery_meta(job, fire.run_id),
                channel=job.channel,
                chat_id=job.to,
                channel_meta=job.channel_meta,
            )
        except Exception as exc:
            log.exception("legacy delivery failed", extra=_ctx(fire))
            record["error"] = f"{type(exc).__name__}: {exc}"
            return record, None
        record.update(delivered=True, session_key=key, message_id=message.id)
        return record, str(message.id)

    def _finish(
        self,
        fire: ClaimedFire,
        state: RunState,
        outcome: Outcome,
        *,
        message_id: str | None = None,
        delivery: dict[str, Any] | None = None,
        remember: Remember | None = None,
    ) -> asyncio.Future[WriteResult]:
        now = self.clock.now()
        transition = Transition(
            fire.run_id,
            state,
            now,
            output=outcome.text,
            error=outcome.error,
            error_details=outcome.error_details,
            usage=outcome.usage,
            message_id=message_id,
            delivery=delivery,
        )
        job_outcome = JobOutcome(
            fire.job.id,
            state,
            now,
            error=outcome.error,
            delete_after_run=fire.job.policy.delete_after_run,
        )
        return self.journal.submit(RunEnd(transition, job_outcome, remember))

    def _committed(self, writes: Sequence[Write], results: Sequence[WriteResult]) -> None:
        """After each group commit: count ended runs, wake their waiters, and look at the
        schedule again when a failure may have moved a job's next fire (backoff, pause).
        """
        failed = False
        for write in writes:
            if isinstance(write, InsertJobs):
                continue
            run = write.run
            if run is None or not run.state.terminal:
                continue
            self.stats[run.state.value] += 1
            if self.run_waiters:
                self.run_waiters.notify(run.run_id)
            failed = failed or run.state is RunState.FAILED
        if failed:
            self._wake.set()

    async def _heartbeat(self) -> None:
        """Renew this engine's leases (its active fires', its sessions' turn leases) every
        lease/3 while it holds any.
        """
        interval = min(self.settings.lease, self.settings.turn_lease) / 3
        while True:
            if not self._holding():
                await self._hb_wake.wait()
                self._hb_wake.clear()
                continue
            never = asyncio.Event()
            await self.clock.sleep_until(self.clock.now() + interval, never)
            if self._holding():
                now = self.clock.now()
                try:
                    await self.store.renew_leases(
                        self.owner, now + self.settings.lease, now + self.settings.turn_lease
                    )
                except Exception:
                    log.exception("lease renewal failed")

    def _holding(self) -> bool:
        return bool(self._waiting or self._running or self.turns.holds_leases)

    # -- observation -----------------------------------------------------------------------

    @property
    def active_runs(self) -> int:
        return len(self._running)

    @property
    def waiting_runs(self) -> int:
        return len(self._waiting)

    def idle(self, *, busy_ok: bool = False) -> bool:
        """Asleep with nothing due and every state change recorded; and no turn in flight,
        or with `busy_ok`, every turn either inside its runner or waiting for a slot.
        """
        due = self._deadline is not None and self._deadline <= self.clock.now()
        quiet = self._sleeping and not self._wake.is_set() and not due and not self.journal.pending
        if not self.turns.quiet(busy_ok=busy_ok):
            return False
        if busy_ok:
            waiting = len(self._running) + self._awaiting_slot
            return quiet and len(self._tasks) == waiting
        return quiet and not self._tasks


def _ctx(fire: ClaimedFire) -> dict[str, Any]:
    return {"job_id": fire.job.id, "run_id": fire.run_id, "session_key": fire.job.session_key}
