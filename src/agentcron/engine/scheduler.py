"""The engine: sleeps until the next due fire, claims it, runs it, records every outcome."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import traceback
from collections import Counter, deque
from collections.abc import Coroutine
from datetime import datetime, timedelta
from typing import Any

from ulid import ULID

from agentcron.agent.runner import (
    NullEvents,
    Outcome,
    OutcomeStatus,
    Runner,
    SessionInfo,
    Trigger,
    TurnInput,
    TurnSource,
    as_outcome,
)
from agentcron.config import EngineSettings
from agentcron.engine.clock import Clock, SystemClock
from agentcron.engine.legacy import (
    Evaluation,
    Evaluator,
    SystemHandler,
    delivery_meta,
    evaluate,
    evaluate_response,
    legacy_target_key,
)
from agentcron.engine.policies import finish_job, plan_fires
from agentcron.engine.waiters import Waiters
from agentcron.events import EventBus, FireStarted, JobAction
from agentcron.sessions.lane import Lanes
from agentcron.store.errors import JobNotFoundError
from agentcron.store.models import (
    ClaimedFire,
    FirePlan,
    Job,
    JobKind,
    JobOutcome,
    RunState,
    Transition,
)
from agentcron.store.sql import SqlStore

log = logging.getLogger(__name__)

_OUTCOME_STATE = {
    OutcomeStatus.SUCCEEDED: RunState.SUCCEEDED,
    OutcomeStatus.FAILED: RunState.FAILED,
    OutcomeStatus.EMPTY: RunState.EMPTY,
}
_RETRY_AFTER_ERROR = timedelta(seconds=1)


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


class Engine:
    """Turns due fires into turns. One per process; several may share a database.

    Time comes only from `clock`. Run state changes are written through a group-commit
    recorder, so a burst of fires costs a few transactions, not several per fire.
    """

    def __init__(
        self,
        store: SqlStore,
        runner: Runner,
        *,
        clock: Clock | None = None,
        settings: EngineSettings | None = None,
        owner: str | None = None,
        evaluator: Evaluator = evaluate_response,
        bus: EventBus | None = None,
    ) -> None:
        self.bus = bus or EventBus()
        self.store = store
        self.runner = runner
        self.evaluator = evaluator
        # System jobs (kind system_event) run through the handler registered for their name.
        self.system_handlers: dict[str, SystemHandler] = {}
        self.clock: Clock = clock or SystemClock()
        self.settings = settings or EngineSettings()
        self.owner = owner or make_owner()
        self.stats: Counter[str] = Counter()
        self._wake = asyncio.Event()
        self._hb_wake = asyncio.Event()
        self._flush_wake = asyncio.Event()
        self._slots = asyncio.Semaphore(self.settings.max_concurrent_runs)
        self.run_waiters = Waiters()  # callers waiting for a run to reach a terminal state
        # Bound fires become turns of their session through its lane (sharing the slots).
        self.lanes = Lanes(
            store, runner, self.clock, owner=self.owner, slots=self._slots, bus=self.bus
        )
        self._job_queues: dict[str, deque[ClaimedFire]] = {}
        self._waiting: dict[str, ClaimedFire] = {}  # claimed here, turn not started yet
        self._running: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending: list[tuple[Transition, JobOutcome | None, asyncio.Future[None] | None]] = []
        self._flushing = False
        self._awaiting_slot = 0
        self._touched: set[str] = set()
        # Bound fires whose end is being recorded: announced once the job's update is committed.
        self._settling: dict[str, ClaimedFire] = {}
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

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Reap fires abandoned by dead processes, adopt released ones, then start the loop."""
        now = self.clock.now()
        await self._reap(now)
        self._next_reap = await self._reap_deadline(now)
        await self.lanes.recover(owner_is_dead)
        await self._adopt(now)
        await self.store.prune_runs(
            now,
            keep_per_job=self.settings.retention_runs_per_job,
            max_age=self.settings.retention_age,
        )
        self._service_tasks = [
            asyncio.create_task(self._flusher(), name="agentcron-flusher"),
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
        await self.lanes.shutdown(wait)
        tasks = list(self._tasks)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=wait)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await self._flush_all()
        released = await self.store.release(self.owner, list(self._waiting))
        if released:
            log.info("released %d fires that had not started", released)
        self._waiting.clear()
        self._job_queues.clear()
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

    # -- the loop ------------------------------------------------------------------------

    async def _loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            now = self.clock.now()
            try:
                if self._next_reap is not None and self._next_reap <= now:
                    await self._reap(now)
                    await self.lanes.recover(owner_is_dead)
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

        while not self._stopping:
            result = await self.store.claim_due(
                now,
                owner=self.owner,
                lease_until=lease_until,
                limit=settings.batch_size,
                planner=planner,
                due_by=due_by,
            )
            self._next_due = result.next_due_at
            self.stats["claimed"] += len(result.fires)
            for fire in result.fires:
                self._dispatch(fire)
            if result.examined < settings.batch_size:
                return

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
            self._dispatch(fire)

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

    # -- dispatch and turns --------------------------------------------------------------

    def _dispatch(self, fire: ClaimedFire) -> None:
        """Queue a claimed fire behind earlier fires of its job; start it when it is first."""
        queue = self._job_queues.get(fire.job.id)
        if queue is not None or self._slots.locked():
            # It has to wait (for its job's earlier fire or for a free slot): say so.
            self._record(Transition(fire.run_id, RunState.QUEUED, self.clock.now()))
        self._waiting[fire.run_id] = fire
        self._hb_wake.set()
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
        if fire.fire_at > self.clock.now():  # claimed ahead: start on the dot
            await self.clock.sleep_until(fire.fire_at, asyncio.Event())
        if self.bus:
            lateness = (self.clock.now() - fire.fire_at).total_seconds()
            await self.bus.publish(FireStarted(session_key=fire.job.session_key or "",
                                               job_id=fire.job.id, run_id=fire.run_id,
                                               lateness_s=lateness))  # fmt: skip
        if fire.job.session_turn:
            try:
                started = await self._run_bound(fire)
            finally:
                if started:
                    self._next_of_job(fire.job.id)
            return
        try:
            self._awaiting_slot += 1
            try:
                await self._slots.acquire()
            finally:
                self._awaiting_slot -= 1
            try:
                if self._stopping:
                    return  # never started: released at stop for the next engine
                started = True
                await self._run_turn(fire)
            finally:
                self._slots.release()
        finally:
            if started:
                self._next_of_job(fire.job.id)

    async def _run_bound(self, fire: ClaimedFire) -> bool:
        """Run a session-bound fire as a turn of its session. False if it never started."""

        async def on_state(state: RunState, **fields: Any) -> None:
            if state is RunState.RUNNING:
                self._waiting.pop(fire.run_id, None)
                await self._record_now(Transition(fire.run_id, state, self.clock.now(), **fields))
            else:
                self._record(Transition(fire.run_id, state, self.clock.now(), **fields))

        try:
            result = await self.lanes.run_fire(fire, self._trigger(fire), on_state)
        except asyncio.CancelledError:
            if fire.run_id in self._waiting:
                return False  # never started: released at stop for the next engine
            raise
        except Exception as exc:
            log.exception("bound fire failed outside its turn", extra=_ctx(fire))
            result_state, outcome = RunState.FAILED, Outcome.failed(f"{type(exc).__name__}: {exc}")
            self._waiting.pop(fire.run_id, None)
            self._finish(fire, result_state, outcome)
            return True
        state = (
            RunState.INTERRUPTED if result.interrupted else _OUTCOME_STATE[result.outcome.status]
        )
        self._finish(fire, state, result.outcome, message_id=result.message_id)
        return True

    def _trigger(self, fire: ClaimedFire) -> Trigger:
        job = fire.job
        return Trigger(
            run_id=fire.run_id,
            job_id=job.id,
            job_name=job.name,
            kind=job.kind.value,
            session_key=job.session_key,
            message=job.message,
            fire_at=fire.fire_at,
        )

    async def _run_turn(self, fire: ClaimedFire) -> None:
        """A fire that is not a session turn: a system job's handler, or the isolated run of a
        legacy unbound job followed by its evaluate step and delivery.
        """
        job = fire.job
        ctx = _ctx(fire)
        self._waiting.pop(fire.run_id, None)
        current = asyncio.current_task()
        assert current is not None
        self._running[fire.run_id] = current
        await self._record_now(Transition(fire.run_id, RunState.RUNNING, self.clock.now()))
        trigger = self._trigger(fire)
        system = job.kind is JobKind.SYSTEM_EVENT
        handler = self.system_handlers.get(job.name) if system else None
        session = SessionInfo(
            key=f"system:{job.name}" if system else f"cron:{job.id}",
            channel=job.channel or ("system" if system else "cron"),
            chat_id=job.to or job.id,
            channel_meta=job.channel_meta,
            tz=job.spec.tz,
        )
        turn = TurnInput(
            turn_id=fire.run_id,
            source=TurnSource.RECALL if job.kind is JobKind.RECALL else TurnSource.AUTOMATION,
            prompt=job.message,
            now=self.clock.now(),
            trigger=trigger,
        )
        try:
            if handler is not None:
                outcome = as_outcome(await handler(trigger))
            else:
                outcome = await self.runner.run_turn(session, turn, NullEvents())
        except asyncio.CancelledError:
            self._finish(
                fire,
                RunState.INTERRUPTED,
                Outcome.failed(
                    "interrupted: the engine stopped while this turn was running; not re-run"
                ),
            )
            raise
        except Exception as exc:
            log.warning("turn failed: %s", exc, extra=ctx)
            outcome = Outcome.failed(
                f"{type(exc).__name__}: {exc}",
                error_details={"traceback": traceback.format_exc(limit=20)},
            )
        finally:
            self._running.pop(fire.run_id, None)
        if not isinstance(outcome, Outcome):
            outcome = Outcome.failed(f"runner returned {type(outcome).__name__}, not an Outcome")
        delivery, message_id = None, None
        if not system:
            delivery, message_id = await self._deliver_legacy(fire, outcome)
        self._finish(
            fire, _OUTCOME_STATE[outcome.status], outcome, message_id=message_id, delivery=delivery
        )

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
        key = legacy_target_key(job)
        try:
            message = await self.lanes.deliver(
                key, outcome.text or "", delivery_meta(job, fire.run_id),
                channel=job.channel, chat_id=job.to, channel_meta=job.channel_meta,
            )  # fmt: skip
        except Exception as exc:
            log.exception("legacy delivery failed", extra=_ctx(fire))
            record["error"] = f"{type(exc).__name__}: {exc}"
            return record, None
        record.update(delivered=True, session_key=key, message_id=message.id)
        return record, message.id

    def _finish(
        self,
        fire: ClaimedFire,
        state: RunState,
        outcome: Outcome,
        *,
        message_id: str | None = None,
        delivery: dict[str, Any] | None = None,
    ) -> None:
        now = self.clock.now()
        self.stats[state.value] += 1
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
        self._record(
            transition,
            JobOutcome(
                fire.job.id,
                state,
                now,
                error=outcome.error,
                delete_after_run=fire.job.policy.delete_after_run,
            ),
        )
        self._touched.add(fire.job.id)
        if fire.job.session_key is not None:
            self._settling[fire.run_id] = fire

    # -- group commit ----------------------------------------------------------------------

    def _record(self, transition: Transition, outcome: JobOutcome | None = None) -> None:
        self._pending.append((transition, outcome, None))
        self._flush_wake.set()

    async def _record_now(self, transition: Transition) -> None:
        """Record `transition` and wait until it is committed."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((transition, None, done))
        self._flush_wake.set()
        await done

    def _finisher(self, job: Job, outcome: JobOutcome) -> dict[str, Any]:
        return finish_job(job, outcome, self.settings)

    async def _flush_once(self) -> None:
        batch = self._pending[: self.settings.flush_batch]
        del self._pending[: len(batch)]
        self._flushing = True
        try:
            await self.store.record(
                [t for t, _, _ in batch], [o for _, o, _ in batch if o is not None], self._finisher
            )
        except BaseException:
            self._pending[:0] = batch  # keep them: nothing recorded is dropped
            raise
        finally:
            self._flushing = False
        for transition, _, done in batch:
            if done is not None and not done.done():
                done.set_result(None)
            if self.run_waiters and transition.state.terminal:
                self.run_waiters.notify(transition.run_id)
            settled = self._settling.pop(transition.run_id, None)
            if settled is not None and transition.state.terminal:
                await self._announce_settled(settled, transition.state)
        if any(o is not None and o.status is RunState.FAILED for _, o, _ in batch):
            self._wake.set()  # a backoff or auto-pause may have moved a job's next fire

    async def _announce_settled(self, fire: ClaimedFire, state: RunState) -> None:
        """Tell listeners a fire's job is up to date (next run, auto-pause, removal)."""
        job = fire.job
        await self.lanes.job_event(fire, JobAction.SETTLED, status=state.value)
        if job.policy.delete_after_run and job.next_fire_at is None:
            try:
                await self.store.get_job(job.id)
            except JobNotFoundError:  # a finished one-shot, removed with its outcome
                await self.lanes.job_event(fire, JobAction.DELETED, status=state.value)

    async def _flusher(self) -> None:
        while True:
            await self._flush_wake.wait()
            self._flush_wake.clear()
            while self._pending:
                try:
                    await self._flush_once()
                except Exception:
                    log.exception("recording run states failed; retrying")
                    await asyncio.sleep(_RETRY_AFTER_ERROR.total_seconds())

    async def _flush_all(self) -> None:
        while self._pending or self._flushing:
            if self._flushing:
                await asyncio.sleep(0.001)
                continue
            await self._flush_once()

    async def _heartbeat(self) -> None:
        """Renew the leases of this engine's active fires every lease/3 while there are any."""
        interval = self.settings.lease / 3
        while True:
            if not self._waiting and not self._running:
                await self._hb_wake.wait()
                self._hb_wake.clear()
                continue
            never = asyncio.Event()
            await self.clock.sleep_until(self.clock.now() + interval, never)
            if self._waiting or self._running:
                try:
                    await self.store.renew_leases(
                        self.owner, self.clock.now() + self.settings.lease
                    )
                except Exception:
                    log.exception("lease renewal failed")

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
        quiet = (
            self._sleeping
            and not self._wake.is_set()
            and not due
            and not self._pending
            and not self._flushing
        )
        if not self.lanes.quiet(busy_ok=busy_ok):
            return False
        if busy_ok:
            waiting = len(self._running) + self._awaiting_slot + self.lanes.parked
            return quiet and len(self._tasks) == waiting
        return quiet and not self._tasks

    async def settled(self, limit: float = 10.0, *, busy_ok: bool = False) -> None:
        """Wait until the engine is idle (tests and benchmarks: after moving a fake clock)."""
        async with asyncio.timeout(limit):
            quiet = 0
            while quiet < 2:
                await asyncio.sleep(0.001)
                quiet = quiet + 1 if self.idle(busy_ok=busy_ok) else 0


def _ctx(fire: ClaimedFire) -> dict[str, Any]:
    return {"job_id": fire.job.id, "run_id": fire.run_id, "session_key": fire.job.session_key}
