"""The engine: sleeps until the next due fire, claims it, runs it, records every outcome."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from ulid import ULID

from agentcron.agent.runner import Runner
from agentcron.config import ConfigError, EngineSettings
from agentcron.domain.budgets import (
    notice_meta,
    pause_notice,
    session_cap_notice,
    session_skip_notice,
    skip_notice,
)
from agentcron.domain.events import (
    EventBus,
    JobAction,
    JobBudgetReached,
    JobEvent,
    SessionBudgetReached,
)
from agentcron.domain.jobs import Job
from agentcron.domain.runs import BudgetSkip, ClaimedFire, FirePlan
from agentcron.domain.states import RunState
from agentcron.engine.isolated import (
    Deliver,
    Evaluator,
    IsolatedRuns,
    MemoryReader,
    SystemHandler,
    evaluate_response,
    log_context,
)
from agentcron.engine.policies import plan_fires
from agentcron.runtime.clock import Clock, SystemClock
from agentcron.runtime.gate import GatePolicy
from agentcron.runtime.journal import Journal
from agentcron.runtime.slots import SlotPool
from agentcron.runtime.waiters import Waiters
from agentcron.store.errors import StoreUnavailableError
from agentcron.store.interface import EngineLedger
from agentcron.store.owners import LiveWork, OwnerRecord
from agentcron.store.writes import (
    InsertJobs,
    JobOutcome,
    RunEnd,
    Transition,
    Write,
    WriteResult,
)

log = logging.getLogger(__name__)

_RETRY_AFTER_ERROR = timedelta(seconds=1)
_FIRST_CLAIM = 50  # due jobs in the first claim of a burst (then x4 per claim, to batch_size)
# The fires one engine holds claimed and not ended, at most, in claims of `batch_size` (or of
# its slots, if more): a herd (100,000 fires due at one instant) is claimed as its fires end,
# not all at once. Its memory stays bounded, its turns' start writes do not queue behind the
# claim of the whole herd, its leases renewed are few, and the part not claimed yet is there
# for another replica to take.
_AHEAD_CLAIMS = 4
# While the engine holds that many, it waits for its fires to end; it also looks again this
# often (a fire that waits for a person may hold its place for a long time).
_ROOM_RECHECK = timedelta(seconds=1)


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

    @property
    def live_work(self) -> LiveWork: ...

    def sessions_freed(self, keys: Sequence[str] | None) -> None: ...

    def quiet(self, *, busy_ok: bool = False) -> bool: ...


class Engine:
    """Claims due fires and carries each to a terminal state. One per process; several may
    share a database.

    A session-turn fire is handed to the turn sink (the lanes) as soon as it is claimed; the
    claim already opened its turn. Any other fire (a system job, a delivery job) runs
    isolated (`engine/isolated.py`). Time comes only from `clock`; every run change goes
    through the journal.

    Liveness (`_heartbeat`): the engine registers its owner row at start and heartbeats it
    every `owner_heartbeat`; each beat also reads the owners silent for `takeover`, and when
    it finds one the loop takes its work over at once (`_recover`). Leases are renewed only
    for the work this process really holds (`LiveWork`); its own open work without a task
    here is settled at each periodic reap. When its own row is gone (another replica declared
    it dead and took its work over), the engine is fenced: it logs an error, stops claiming,
    cuts its turns and runs at once (they were closed elsewhere) and hands back what waits;
    `running` is then False, and only a restart (a new owner) brings it back.
    """

    def __init__(
        self,
        store: EngineLedger,
        runner: Runner,
        *,
        journal: Journal,
        turns: TurnSink,
        slots: SlotPool,
        bus: EventBus,
        clock: Clock | None = None,
        settings: EngineSettings | None = None,
        owner: str | None = None,
        evaluator: Evaluator = evaluate_response,
        deliver: Deliver | None = None,
        memory: MemoryReader | None = None,
        gate_policy: GatePolicy | None = None,
    ) -> None:
        self.store = store
        self.runner = runner
        self.journal = journal
        self.turns = turns
        self.bus = bus
        # System jobs (kind system_event) run through the handler registered for their name.
        self.system_handlers: dict[str, SystemHandler] = {}
        self.clock: Clock = clock or SystemClock()
        self.settings = settings or EngineSettings()
        if self.settings.takeover < 3 * self.settings.owner_heartbeat:
            raise ConfigError(
                "takeover must be at least three owner heartbeats: "
                f"{self.settings.takeover} < 3 x {self.settings.owner_heartbeat}"
            )
        self.owner = owner or make_owner()
        self.stats: Counter[str] = Counter()
        self._wake = asyncio.Event()
        self.slots = slots  # shared with the lanes
        self.run_waiters = Waiters()  # callers waiting for a run to reach a terminal state
        self._job_queues: dict[str, deque[ClaimedFire]] = {}
        self._waiting: dict[str, ClaimedFire] = {}  # isolated fires claimed, not started
        # Isolated fires from dispatch until their task ends (its outcome committed): the
        # runs whose leases the heartbeat renews (with the lanes' `live_work`).
        self._live_runs: set[str] = set()
        # Owners the heartbeat found silent for `takeover`: the loop takes their work over.
        self._dead: dict[str, OwnerRecord] = {}
        self._takeover_due = False
        self._last_beat: datetime | None = None
        self._suspects: frozenset[str] = frozenset()  # see `settle_orphans`
        self.fenced = False  # this owner was declared dead elsewhere: it takes no work
        self._halting: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._touched: set[str] = set()
        self._next_prune: datetime | None = None
        self._next_due: datetime | None = None
        # Fires of other engines are reaped when their lease runs out; we look for them at
        # start and then once per lease period, not on every wake-up.
        self._next_reap: datetime | None = None
        # Sweeps of others' leftovers that run with each periodic reap, after turn recovery
        # (AgentCron adds the approvals whose turn was cut off elsewhere). A failing one is
        # logged and tried again at the next reap.
        self.reapers: list[Callable[[], Awaitable[object]]] = []
        self._loop_task: asyncio.Task[None] | None = None
        self._service_tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._closed = False
        self._sleeping = False
        self._deadline: datetime | None = None
        # The local timer: sleep until the next due fire and claim it. Off under a managed
        # wake (agentcron/wake): then the engine claims only when a fire is delivered
        # (`claim_for`), with the same claim.
        self.timer = True
        self._claim_by: datetime | None = None
        # Another process handed fires (and turns) back: adopt them at the next tick.
        self._adopt_now = False
        self._recover_now = False
        # `deliver` posts a delivery job's result into its target session; `memory` reads a
        # delivery job's memory (`cron:{job_id}`): None when the runner keeps no history.
        self._deliver = deliver  # budget notices go into their job's session this way
        self.isolated = IsolatedRuns(
            runner,
            journal=journal,
            bus=bus,
            clock=self.clock,
            slots=slots,
            settings=self.settings,
            handlers=self.system_handlers,
            evaluator=evaluator,
            deliver=deliver,
            memory=memory,
            runs=store,
            gate_policy=gate_policy,
        )
        journal.listeners.append(self._committed)

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Register this owner, reap fires abandoned by dead processes, adopt released ones,
        then start the loop and the heartbeat.
        """
        now = self.clock.now()
        await self.store.register_owner(self.owner, "engine", now)
        self._last_beat = now
        self.journal.start()
        # Owners silent for `takeover` are found by the first heartbeat (its check is guarded
        # against a jump of the clock; see `_heartbeat`), not here.
        await self._reap(now)
        self._next_reap = await self._reap_deadline(now)
        await self.turns.recover(self._is_dead)
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
        """Stop claiming, let running turns finish (up to `grace` s), release the rest, then
        unregister this owner.
        """
        if self._loop_task is None or self._closed:
            return
        self._closed = True
        wait = self.settings.stop_timeout if grace is None else grace
        if self._halting is None:
            self._halting = asyncio.create_task(self._halt(wait))
        await self._halting  # a fenced engine halted already (or is halting)
        await self.journal.close()
        for task in self._service_tasks:
            task.cancel()
        await asyncio.gather(*self._service_tasks, return_exceptions=True)
        if not self.fenced:
            try:
                await self.store.unregister_owner(self.owner)
            except Exception:  # its row then goes stale: settled as dead, nothing is left
                log.exception("could not unregister this owner")

    async def _halt(self, wait: float) -> None:
        """Stop the loop, let running turns and runs finish for `wait` s, then cut them, and
        hand back every fire that never started. The heartbeat goes on meanwhile (the
        leases of turns still finishing stay renewed).
        """
        self._stopping = True
        self._wake.set()
        if self._loop_task is not None:
            await self._loop_task
        # A person's answer gets no grace: the turns and runs paused for one are cut now,
        # and those that pause during the grace as they pause.
        self.slots.close()
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

    @property
    def running(self) -> bool:
        """The loop is up (started, not stopped, not crashed, not fenced)."""
        return (
            self._loop_task is not None
            and not self._loop_task.done()
            and not self._closed
            and not self.fenced
        )

    def wake(self) -> None:
        """Re-read the schedule now (a job was created, changed or removed)."""
        self._wake.set()

    def adopt_soon(self, *, recover: bool = False) -> None:
        """Another process handed fires back (a graceful stop), or may have: take over what
        was released, now; with `recover`, also the waiting turns it handed back.
        """
        self._adopt_now = True
        self._recover_now = self._recover_now or recover
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

    def set_timer(self, on: bool) -> None:
        """Turn the local timer on (claim fires when they are due) or off (claim only when
        asked by `claim_for`: a managed wake).
        """
        self.timer = on
        self._wake.set()

    def claim_for(self, at: datetime) -> None:
        """Claim now what is due by `at` (a managed wake delivered a fire of that instant):
        the same claim as the timer's, so a fire claimed twice still runs once.
        """
        self._claim_by = at if self._claim_by is None else max(self._claim_by, at)
        self._wake.set()

    # -- the loop ------------------------------------------------------------------------

    async def _loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            now = self.clock.now()
            try:
                sweep = self._next_reap is not None and self._next_reap <= now
                if sweep or self._takeover_due:
                    self._adopt_now = self._recover_now = False  # the pass adopts too
                    await self._recover(now, sweep=sweep)
                elif self._adopt_now:
                    self._adopt_now = False
                    if self._recover_now:
                        self._recover_now = False
                        await self.turns.recover(self._is_dead)
                    await self._adopt(now)
                if self.timer:
                    await self._claim_due(now)
                elif self._claim_by is not None:
                    by = self._claim_by
                    await self._claim_due(now, until=by)
                    if self._claim_by == by:
                        self._claim_by = None
                await self._maybe_prune(now)
                deadline = self._next_deadline()
            except StoreUnavailableError as exc:  # an outage: one line, no traceback
                log.warning("engine tick: %s; retrying in %s", exc.reason, _RETRY_AFTER_ERROR)
                deadline = now + _RETRY_AFTER_ERROR
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

    async def _claim_due(self, now: datetime, until: datetime | None = None) -> None:
        settings = self.settings

        def planner(job: Job, at: datetime, active: int, waiting: int) -> FirePlan:
            return plan_fires(job, at, active, waiting, settings)

        # A burst is claimed in growing batches: the first fires start after a small claim,
        # not after the whole burst is claimed; and only while this engine holds fewer than
        # `_AHEAD_CLAIMS` batches of claimed fires that have not ended (`_room_for`).
        limit = min(settings.batch_size, _FIRST_CLAIM)
        mine: deque[str] = deque()  # the runs this pass handed over, oldest first
        while not self._stopping:
            at = await self._room_for(limit, mine, now, managed=until is not None)
            if at is None:
                return  # the loop has other work first (it comes back: the jobs are due)
            now = at  # later than the tick's when it waited for room
            # Claim a few ms ahead and start each fire at its exact time (see claim_ahead).
            due_by = now + settings.claim_ahead
            if until is not None and until > due_by:
                due_by = until  # a managed fire of that instant (see claim_for)
            result = await self.store.claim_due(
                now,
                owner=self.owner,
                lease_until=now + settings.lease,
                limit=limit,
                planner=planner,
                due_by=due_by,
            )
            self._next_due = result.next_due_at
            self.stats["claimed"] += len(result.fires)
            for skip in result.budget_skips:
                self._spawn(self._budget_skipped(skip))
            for fire in result.fires:
                mine.append(fire.run_id)
                await self._dispatch(fire)
            if result.examined < limit:
                return
            limit = min(settings.batch_size, limit * 4)
            # Let the fires just claimed queue their first writes before the next claim takes
            # the database writer (tasks, then the journal, each need a turn of the loop).
            for _ in range(3):
                await asyncio.sleep(0)

    async def _room_for(
        self, claim: int, mine: deque[str], now: datetime, *, managed: bool
    ) -> datetime | None:
        """Wait until `claim` more fires fit under this engine's cap of claimed fires that
        have not ended (`_AHEAD_CLAIMS` batches, at least `_AHEAD_CLAIMS` x the slots); the
        instant there is room (`now` when there was at once). Woken when the fire whose end
        leaves room ended (of `mine`, this pass's fires oldest first; else any held one), when
        the loop is woken, and every `_ROOM_RECHECK`.

        None: claim no more now. A stop began, or (on the timer) the loop was woken or its
        periodic sweep is due: the loop does that first and comes back to the due fires. A
        managed fire's claim (`claim_for`) keeps waiting instead: the loop does not keep its
        request.
        """
        settings = self.settings
        cap = _AHEAD_CLAIMS * max(settings.batch_size, settings.max_concurrent_runs)
        ended: set[str] = set()  # told ended, and perhaps still held for a moment
        waited = False
        while not self._stopping:
            live = self.live_work.runs
            ended &= live
            held = live - ended
            pending = [r for r in mine if r in held]
            mine.clear()
            mine.extend(pending)  # the ended ones out: it stays as short as what is held
            over = len(held) + claim - cap
            if over <= 0:
                return self.clock.now() if waited else now
            at = self.clock.now()
            if not managed and (
                self._wake.is_set() or (self._next_reap is not None and self._next_reap <= at)
            ):
                return None
            watched = pending[min(over, len(pending)) - 1] if pending else next(iter(held))
            with self.run_waiters.watch(watched) as done:
                waits: list[asyncio.Future[Any]] = [
                    asyncio.ensure_future(self.clock.sleep_until(at + _ROOM_RECHECK, done))
                ]
                if not self._wake.is_set():  # set already (a managed delivery): not again
                    waits.append(asyncio.ensure_future(self._wake.wait()))
                # Asleep as in the loop (`idle`, `due_at`): it waits for runners to return.
                self._deadline, self._sleeping = at + _ROOM_RECHECK, True
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    self._sleeping = False
                    for wait in waits:
                        wait.cancel()
                    await asyncio.gather(*waits, return_exceptions=True)
            if done.is_set():
                ended.add(watched)
            waited = True
        return None

    def _next_deadline(self) -> datetime | None:
        due = None if self._next_due is None else self._next_due - self.settings.claim_ahead
        if not self.timer:
            due = None  # a managed wake: fires are claimed when delivered, not on a timer
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

    def _is_dead(self, owner: str) -> bool:
        """Certainly gone: silent for `takeover` (found by the heartbeat), or a process of
        this host that no longer exists. An owner without a row (an older version) is only
        reaped when its leases expire.
        """
        return owner in self._dead or owner_is_dead(owner)

    async def _recover(self, now: datetime, *, sweep: bool) -> None:
        """Take over the work of owners that are gone: a dead owner's runs reaped (unstarted
        ones released and adopted, started ones interrupted), its turns settled (cut ones
        closed with the visible notice), its session leases freed, then its row deleted.
        Every piece is a compare-and-set, so replicas doing this at once settle each thing
        once. With `sweep` (every `reap_interval`) this process's own orphans are settled
        first, and expired leases of anyone are reaped too.
        """
        dead = dict(self._dead)
        if sweep:
            await self._settle_orphans(now)
        await self._reap(now)
        await self.turns.recover(self._is_dead)
        # A turn here waiting for a session the recovery let go starts now (this process
        # does not hear its own notices).
        self.turns.sessions_freed(None)
        await self._adopt(now)
        await self._run_reapers()
        for owner, record in dead.items():
            # Only now, with its work settled: a replica that dies halfway leaves the row
            # (still silent) for the next one to finish the takeover.
            await self.store.unregister_owner(owner)
            self._dead.pop(owner, None)
            log.warning(
                "owner taken over: its process stopped (no heartbeat for %.1fs)",
                (now - record.heartbeat_at).total_seconds(),
                extra={"owner": owner, "host": record.host, "pid": record.pid},
            )
        self._takeover_due = bool(self._dead)
        self._next_reap = await self._reap_deadline(now)

    async def _settle_orphans(self, now: datetime) -> None:
        """Settle this process's own open work that no task here holds (`settle_orphans`):
        never-started runs released for adoption, started ones interrupted, running turns
        handed to turn recovery (closed with the visible notice), stray session leases freed.
        """
        settled = await self.store.settle_orphans(self.owner, now, self.live_work, self._suspects)
        self._suspects = settled.suspects
        for run in settled.interrupted:
            self.stats["interrupted"] += 1
            log.warning(
                "own fire interrupted: no task of this process ran it any more; not re-run",
                extra={"job_id": run.job_id, "run_id": run.id, "session_key": run.session_key},
            )
        if settled.released or settled.disowned or settled.freed:
            log.warning(
                "settled own orphans: %d unstarted fires released, %d turns handed to "
                "recovery, %d session leases freed",
                settled.released,
                settled.disowned,
                settled.freed,
            )

    @property
    def live_work(self) -> LiveWork:
        """The runs, turns and sessions this process has a task for now."""
        return LiveWork(runs=frozenset(self._live_runs)) | self.turns.live_work

    async def _reap(self, now: datetime) -> None:
        for run in await self.store.reap(now, self.owner, self._is_dead):
            self.stats["interrupted"] += 1
            log.warning(
                "fire interrupted: its process stopped mid-way; not re-run",
                extra={"job_id": run.job_id, "run_id": run.id, "session_key": run.session_key},
            )

    async def _run_reapers(self) -> None:
        for reaper in self.reapers:
            try:
                await reaper()
            except StoreUnavailableError as exc:
                log.warning("a periodic reap: %s; trying again at the next one", exc.reason)
            except Exception:
                log.exception("a periodic reap failed; trying again at the next one")

    async def _adopt(self, now: datetime) -> None:
        """Take over fires that were claimed but never started by an engine that is gone."""
        for fire in await self.store.adopt_released(self.owner, now + self.settings.lease, now):
            log.info("adopted a fire that never started", extra=log_context(fire))
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
        if fire.turn_id is not None:
            await self.turns.submit_fire(fire)
            return
        queue = self._job_queues.get(fire.job.id)
        if queue is not None or self.slots.locked():
            # It has to wait (for its job's earlier fire or for a free slot): say so.
            self.journal.post(RunEnd(Transition(fire.run_id, RunState.QUEUED, self.clock.now())))
        self._waiting[fire.run_id] = fire
        self._live_runs.add(fire.run_id)
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
        try:
            if fire.fire_at > self.clock.now():  # claimed ahead: start on the dot
                await self.clock.sleep_until(fire.fire_at, asyncio.Event())
            await self.isolated.run(fire, self._may_start)
        finally:
            self._live_runs.discard(fire.run_id)
            if fire.run_id not in self._waiting:  # it started: its job's next fire may go
                self._next_of_job(fire.job.id)

    def _may_start(self, fire: ClaimedFire) -> bool:
        """An isolated fire holds its slot: it starts, unless a stop began (then it never
        started and is released at stop for the next engine).
        """
        if self._stopping:
            return False
        self._waiting.pop(fire.run_id, None)
        return True

    def _committed(self, writes: Sequence[Write], results: Sequence[WriteResult]) -> None:
        """After each group commit: count ended runs, wake their waiters, and look at the
        schedule again when a failure may have moved a job's next fire (backoff, pause).
        """
        failed = False
        for write, result in zip(writes, results, strict=True):
            if isinstance(write, InsertJobs):
                continue
            run = write.run
            if run is None or not run.state.terminal:
                continue
            reached = getattr(result, "budget_reached", None)
            outcome = getattr(write, "outcome", None)
            if reached is not None and isinstance(outcome, JobOutcome):
                self._spawn(self._budget_reached(outcome, run.run_id, reached))
            of_session = getattr(result, "session_budget_reached", None)
            if of_session is not None and isinstance(outcome, JobOutcome):
                self._spawn(self._session_budget_reached(outcome, run.run_id, of_session))
            self.stats[run.state.value] += 1
            if self.run_waiters:
                self.run_waiters.notify(run.run_id)
            failed = failed or run.state is RunState.FAILED
        if failed:
            self._wake.set()

    async def _budget_skipped(self, skip: BudgetSkip) -> None:
        """The first fire of a stretch skipped for its job's budget: an event, and a notice
        in the job's session (channels send it).
        """
        job = skip.job
        log.info(
            "fire skipped: budget",
            extra={"job_id": job.id, "run_id": skip.run_id, "reason": skip.reason},
        )
        if self.bus.active:
            await self.bus.publish(
                JobEvent(
                    session_key=job.session_key or "",
                    action=JobAction.SKIPPED,
                    job_id=job.id,
                    kind=job.kind,
                    run_id=skip.run_id,
                    status=RunState.SKIPPED.value,
                )
            )
        text = (session_skip_notice if skip.session else skip_notice)(job.name, skip.reason)
        meta = notice_meta(job.id, skip.run_id, RunState.SKIPPED.value)
        if skip.session:
            meta["budget_scope"] = "session"
        await self._notice(job.session_key, text, meta)

    async def _session_budget_reached(self, outcome: JobOutcome, run_id: str, reason: str) -> None:
        """A run's end reached a cap of its session's budget: the typed event, and a notice in
        the session (channels send it). No job is paused: the claim skips their fires.
        """
        key = outcome.session_key or ""
        log.warning("session budget reached: %s", reason, extra={"session_key": key})
        if self.bus.active:
            await self.bus.publish(
                SessionBudgetReached(
                    session_key=key, job_id=outcome.job_id, run_id=run_id, reason=reason
                )
            )
        meta = notice_meta(outcome.job_id, run_id, "budget_reached")
        meta["budget_scope"] = "session"
        await self._notice(outcome.session_key, session_cap_notice(reason), meta)

    async def _budget_reached(self, outcome: JobOutcome, run_id: str, reason: str) -> None:
        """A run's end paused its job at a cap of its budget: the typed event, the job's
        `paused` event, and a notice in its session (channels send it).
        """
        log.warning("job paused: %s", reason, extra={"job_id": outcome.job_id, "run_id": run_id})
        key = outcome.session_key or ""
        if self.bus.active:
            await self.bus.publish(
                JobBudgetReached(
                    session_key=key, job_id=outcome.job_id, run_id=run_id, reason=reason
                )
            )
        await self._notice(
            outcome.session_key,
            pause_notice(outcome.job_name, reason),
            notice_meta(outcome.job_id, run_id, "paused"),
        )

    async def _notice(self, key: str | None, text: str, meta: dict[str, Any]) -> None:
        if key is None or self._deliver is None:
            return
        try:
            await self._deliver(key, text, meta)
        except Exception:  # a notice lost is logged; the run record says it all the same
            log.exception("could not post a budget notice", extra={"session_key": key})

    async def _heartbeat(self) -> None:
        """Every `owner_heartbeat`: say this owner is alive (one UPDATE), look for owners
        silent for `takeover` (one indexed read) and wake the loop to take them over; every
        lease/3, renew the leases of the work this process really holds.

        The silence is measured from this engine's own previous beat too, not from its clock
        alone: after a jump of the clock (a suspended host, a test's fake clock) every owner
        looks silent until it beats again, and none is taken for dead on that.
        """
        beat = self.settings.owner_heartbeat
        renew_every = min(self.settings.lease, self.settings.turn_lease) / 3
        next_renew = self.clock.now() + renew_every
        never = asyncio.Event()
        failing = False  # an outage is logged when it starts and when it ends, not each beat
        next_beat = self.clock.now() + beat
        while True:
            await self.clock.sleep_until(next_beat, never)
            now = self.clock.now()
            # Counted from when this beat began, not from when its writes ended: time that
            # passed meanwhile (a slow database, a jump of the clock) is seen at the next beat
            # at once, not one more interval later.
            next_beat = now + beat
            try:
                alive = await self.store.heartbeat_owner(self.owner, now)
            except StoreUnavailableError as exc:
                if not failing:
                    log.warning("owner heartbeat failed, the database is unreachable: %s", exc)
                failing = True
                continue
            except Exception:
                log.exception("owner heartbeat failed; trying again at the next beat")
                continue
            if failing:
                log.warning("owner heartbeat back after a database outage")
                failing = False
            if not alive:
                self._fence()
                return
            last = self._last_beat or now
            self._last_beat = now
            if not self._stopping:
                await self._look_for_dead(min(now, last + 2 * beat) - self.settings.takeover)
            if not self._holding():
                next_renew = now + renew_every  # leases taken from now on are fresh
            elif now >= next_renew:
                next_renew = now + renew_every
                try:
                    await self.store.renew_held(
                        self.owner,
                        self.live_work,
                        now + self.settings.lease,
                        now + self.settings.turn_lease,
                    )
                except StoreUnavailableError as exc:
                    log.warning("lease renewal: %s", exc.reason)
                except Exception:
                    log.exception("lease renewal failed")
            self.stats["heartbeats"] += 1

    async def _look_for_dead(self, before: datetime) -> None:
        try:
            found = await self.store.dead_owners(before, exclude=self.owner)
        except StoreUnavailableError as exc:
            log.warning("could not read the owners' heartbeats: %s", exc.reason)
            return
        except Exception:
            log.exception("could not read the owners' heartbeats")
            return
        fresh = [o for o in found if o.owner not in self._dead]
        if not fresh:
            return
        for record in fresh:
            self._dead[record.owner] = record
            log.warning(
                "owner silent since %s (takeover %s): taking its work over",
                record.heartbeat_at.isoformat(),
                self.settings.takeover,
                extra={"owner": record.owner, "host": record.host, "pid": record.pid},
            )
        self._takeover_due = True
        self._wake.set()

    def _fence(self) -> None:
        """This owner's row is gone: another replica found it silent for `takeover`, declared
        it dead and took its fires, turns and session leases over. Stop taking work at once.
        """
        log.error(
            "this process was declared dead by another replica (its owner row is gone: no "
            "heartbeat reached the database for %s) and its work was taken over; it takes no "
            "new work, cuts what it still runs and stops. Restart it to rejoin",
            self.settings.takeover,
            extra={"owner": self.owner},
        )
        self.fenced = True
        if self._halting is None and not self._closed:
            # No grace: every turn and run it still has was closed (or adopted) elsewhere.
            self._halting = asyncio.create_task(self._halt(0.0))

    def _holding(self) -> bool:
        return bool(self._live_runs or self.turns.holds_leases)

    # -- observation -----------------------------------------------------------------------

    @property
    def waiting_runs(self) -> int:
        return len(self._waiting)

    def idle(self, *, busy_ok: bool = False) -> bool:
        """Asleep with nothing due and every state change recorded; and no turn or isolated
        run in flight, or with `busy_ok`, every one either inside its runner, paused in it or
        waiting for a slot.
        """
        due = self._deadline is not None and self._deadline <= self.clock.now()
        quiet = self._sleeping and not self._wake.is_set() and not due and not self.journal.pending
        if not self.turns.quiet(busy_ok=busy_ok):
            return False
        if busy_ok:
            return quiet and len(self._tasks) == self.slots.runs.settled
        return quiet and not self._tasks
