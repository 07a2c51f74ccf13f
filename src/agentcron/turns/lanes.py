"""Lanes: one turn at a time per session; a scheduled trigger waits for the session to be idle."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from agentcron.agent.runner import (
    HistoryEntry,
    Outcome,
    Runner,
    SessionInfo,
    ToolRecord,
    TurnInput,
    TurnSource,
    fire_source,
)
from agentcron.config import EngineSettings
from agentcron.domain.attachments import Attachment
from agentcron.domain.budgets import ContextMode
from agentcron.domain.events import (
    Event,
    EventBus,
    FireStarted,
    JobAction,
    SessionSync,
    StreamStart,
    fire_event,
    runner_event,
)
from agentcron.domain.jobs import Catchup
from agentcron.domain.quiet import QuietMode, quiet_record
from agentcron.domain.runs import ClaimedFire
from agentcron.domain.sessions import Entry, MemoryScope, Message, Role, Session, Turn
from agentcron.domain.states import RunState
from agentcron.runtime.backoff import Backoff
from agentcron.runtime.clock import Clock
from agentcron.runtime.execution import Execution
from agentcron.runtime.gate import GatePolicy
from agentcron.runtime.journal import Journal
from agentcron.runtime.slots import SlotPool
from agentcron.runtime.waiters import Waiters
from agentcron.store.errors import StoreUnavailableError
from agentcron.store.interface import LaneStore
from agentcron.store.owners import LiveWork
from agentcron.store.writes import RunEnd, Transition, TurnStart, TurnStarted, WriteResult
from agentcron.turns.fire_turn import FireTurn, fire_turn
from agentcron.turns.gate_step import pass_gate
from agentcron.turns.lane_queue import LaneQueue, Pending
from agentcron.turns.posts import Posts, chat_of
from agentcron.turns.prompts import PromptError
from agentcron.turns.quiet_step import quiet_wait
from agentcron.turns.transcript import interrupted_entry
from agentcron.turns.turn_end import TurnEnds
from agentcron.turns.turn_memory import TurnMemory
from agentcron.turns.turn_records import log_context, start_record

log = logging.getLogger(__name__)

# A start refused because another process holds the session waits for that process's notice
# (`sessions_freed`); this bounds the wait should every notice be lost.
_BUSY_RECHECK = timedelta(seconds=30)


@dataclass(eq=False)
class _Lane(LaneQueue):
    """A session's queue and the task working through it."""

    worker: asyncio.Task[None] | None = None
    # The current turn's execution: made when the turn becomes current, so that a stop in
    # any instant before the runner is called is not lost.
    execution: Execution | None = None
    replay: list[Event] = field(default_factory=list)  # events of the turn in progress


class _LaneTurn:
    """One session turn's steps in its `Execution` (the start and end writes, the history
    read, the events), and the `TurnEvents` its runner streams into (forwarded to the bus as
    typed events, kept for replay).
    """

    __slots__ = (
        "execution",
        "lane",
        "lanes",
        "message",
        "pending",
        "prepared",
        "session",
        "written",
    )

    def __init__(
        self,
        lanes: Lanes,
        lane: _Lane,
        pending: Pending,
        prepared: FireTurn | None,
        execution: Execution,
    ) -> None:
        self.lanes, self.lane, self.pending, self.prepared = lanes, lane, pending, prepared
        self.execution = execution
        self.message: Message | None = None  # the trigger entry: set by the start
        self.session: Session | None = None
        self.written: list[Entry] = []  # a compaction's summary, saved with the turn's end

    # -- TurnEvents ------------------------------------------------------------------------

    async def emit(self, event: dict[str, Any]) -> None:
        await self.put(runner_event(self.pending.session_key, self.pending.turn_id, event))

    async def put(self, event: Event) -> None:
        self.lane.replay.append(event)
        await self.lanes.bus.publish(event)

    # -- Steps -----------------------------------------------------------------------------

    async def start(self) -> bool:
        """Begin the turn (durable before the runner is called: after a crash it is
        interrupted, never run again). Waits, without a slot, while another process holds
        the session. False: the session is gone (the turn ended unstarted).
        """
        lanes, lane_key, pending = self.lanes, self.lane.key, self.pending
        freed = lanes._held_elsewhere.setdefault(lane_key, asyncio.Event())
        early, pending.early = pending.early, None  # submitted with the turn before's end
        try:
            while True:
                # Holding a slot (taken first: the turn's start time, its trigger entry's
                # time and its lease count from when it really starts, not from when it
                # began to wait for a slot). Cleared before the attempt: a notice that
                # arrives while the start is being written is not lost (the wait below then
                # returns at once).
                freed.clear()
                moved = early is None and lanes.moves(pending, lane_key)  # never moved early
                if early is None:
                    if moved:  # a shared automation's fire: to the thread the person talks in
                        key = await lanes.reply_session(lane_key)
                        pending.session_key = key
                        pending.lease_key = None if key == lane_key else lane_key
                    start = lanes.start_of(pending, self.prepared)
                    # Submitted, the start commits even if this task is cancelled (a
                    # shutdown) before it hears back: from here the turn can only end, never
                    # be handed back.
                    pending.started = True
                    written: Awaitable[WriteResult] = lanes.journal.write(start)
                else:
                    written = early
                try:
                    result = await written
                except asyncio.CancelledError:
                    raise
                except BaseException:
                    pending.started = False  # its transaction failed: it did not begin
                    raise
                finally:
                    early = None
                if not isinstance(result, TurnStarted):
                    pending.started = False
                    raise TypeError(f"a turn start was answered with {result!r}")
                if result.message is not None and result.session is not None:
                    self.message, self.session = result.message, result.session
                    return True
                pending.started = False  # the session is held elsewhere, or gone: not begun
                if result.busy_until is None and moved and pending.lease_key is not None:
                    # The thread it was moved to was deleted meanwhile: choose again.
                    pending.session_key, pending.lease_key = lane_key, None
                    continue
                if result.busy_until is None:  # the session was deleted meanwhile
                    self.execution.release()
                    await lanes.ends.unstarted(
                        pending.session_key,
                        pending,
                        RunState.CANCELLED,
                        "cancelled: its session was deleted",
                    )
                    return False
                # Another process runs a turn in this session: its end is announced (the
                # store's signals -> `sessions_freed`); wait for that, or at most until its
                # lease ends.
                again = min(result.busy_until, lanes.clock.now() + _BUSY_RECHECK)
                await self.execution.without_slot(lanes.clock.sleep_until(again, freed))
        finally:
            lanes._held_elsewhere.pop(lane_key, None)

    async def started(self) -> None:
        lanes, pending, fire = self.lanes, self.pending, self.pending.fire
        if fire is not None and lanes.bus.active:
            await lanes._job_event(fire, JobAction.FIRED)
            await lanes.bus.publish(
                FireStarted(
                    session_key=pending.session_key,
                    job_id=fire.job.id,
                    run_id=fire.run_id,
                    lateness_s=(lanes.clock.now() - fire.fire_at).total_seconds(),
                )
            )
        await self.put(
            StreamStart(
                session_key=pending.session_key,
                turn_id=pending.turn_id,
                source=pending.source.value,
            )
        )

    async def call(self) -> Outcome:
        """History, then the runner (inside the guard: a stop or the turn's timeout also
        covers the history read and a compaction's model call).
        """
        lanes, pending, prepared, session = self.lanes, self.pending, self.prepared, self.session
        if self.message is None or session is None:
            raise RuntimeError("a turn's runner was called before its start")
        job = None if pending.fire is None else pending.fire.job
        history = await lanes._history(
            pending.session_key,
            self.message.seq,
            pending.turn_id,
            self.written,
            context=ContextMode.CONTINUE if job is None else job.context,
            budget=None if job is None else job.history_tokens,
        )
        turn_input = TurnInput(
            turn_id=pending.turn_id,
            source=pending.source,
            prompt=pending.content if prepared is None else prepared.prompt,
            history=history,
            now=lanes.clock.now(),
            system_context=None if prepared is None else prepared.system_context,
            trigger=None if prepared is None else prepared.trigger,
            model=None if pending.fire is None else pending.fire.job.model,
            attachments=pending.attachments,
            prompt_ref=None if prepared is None else prepared.prompt_ref,
            # the fire's job's own runner, else the session's (None: the process's runner)
            runner_url=(None if pending.fire is None else pending.fire.job.runner_url)
            or session.runner_url,
            tools=None if job is None else job.tools,
        )
        info = SessionInfo(
            key=session.key,
            channel=session.channel,
            chat_id=session.chat_id,
            channel_meta=session.channel_meta,
            title=session.title,
            tz=session.tz,
        )
        return await lanes.runner.run_turn(info, turn_input, self)

    async def end(self, outcome: Outcome) -> None:
        if self.session is None:
            raise RuntimeError("a turn ended before its start")
        lanes, lane = self.lanes, self.lane
        await lanes.ends.finished(
            self.pending.session_key,
            self.pending,
            outcome,
            self.session,
            self.put,
            self.written,
            then=lambda: lanes.pipeline(lane),
        )

    async def cut(self, tools: tuple[ToolRecord, ...]) -> None:
        """A shutdown cut the turn mid-way: close it with the tool calls that ran (its session
        is None when the stop came before its start was answered); one whose start was never
        submitted is handed back.
        """
        if self.pending.started:
            await self.lanes.ends.interrupted(
                self.pending.session_key, self.pending, self.session, tools
            )


class Lanes:
    """Per-session serializers. User messages and fires are both submitted here; nothing else
    starts a turn. A fire that arrives while its session has a turn waits (its run is
    `deferred`) and runs when that turn ends; it never enters the running turn.

    Sessions of one memory scope (unified mode: `unified:default` and every web thread) share
    one lane, and each of their turns also takes the turn lease of the lane's own session:
    their turns never overlap, in one process or across replicas. A fire of the lane's own
    session (a shared automation) starts in the thread the person last talked in, unless
    `shared_chat`.

    A turn's writes go through the journal (group commit): its start (session lease, opening
    entry, turn and run running) and its end (closing entry, outcome, lease let go, run and
    job bookkeeping) each join whatever else is ready, so a burst costs a few transactions.
    """

    def __init__(
        self,
        store: LaneStore,
        journal: Journal,
        runner: Runner,
        clock: Clock,
        *,
        owner: str,
        bus: EventBus,
        slots: SlotPool,
        settings: EngineSettings,
        memory_scope: Callable[[str], MemoryScope | None] | None = None,
        shared_chat: bool = False,
        gate_policy: GatePolicy | None = None,
    ) -> None:
        self.store = store
        self.journal = journal
        self.runner = runner
        self.clock = clock
        self.owner = owner
        self.bus = bus
        self.settings = settings
        self.slots = slots  # shared with the engine's isolated runs; it counts the turns
        # Sessions that share one memory (unified mode); None: each session is its own.
        self.memory_scope = memory_scope
        self.shared_chat = shared_chat  # shared automations reply in their own chat
        # The tool policy a job's gate passes before it runs (None: every gate is allowed).
        self.gate_policy = gate_policy or GatePolicy()
        self.memory = TurnMemory(store.sessions, runner, settings, memory_scope)
        self._lanes: dict[str, _Lane] = {}
        self._closing = False
        self._workers = 0  # lane workers alive
        self._fires = 0  # fires waiting or running in lanes
        # Sessions whose turn waits for another process to let go of them: set on its notice.
        self._held_elsewhere: dict[str, asyncio.Event] = {}
        # Fires of `quiet = wait` jobs waiting, outside any lane, for their session's quiet
        # hours to end (run id -> the fire's turn and its wait); set: a stop ends the waits.
        self._quiet_waits: dict[str, tuple[Pending, asyncio.Task[None]]] = {}
        self._quiet_stop = asyncio.Event()
        self.turn_waiters = Waiters()  # callers waiting for a turn to end
        self.posts = Posts(store.sessions, bus, clock)
        self.ends = TurnEnds(
            journal, clock, bus, owner=owner, waiters=self.turn_waiters, runs=store
        )

    @property
    def _lease(self) -> timedelta:
        return self.settings.turn_lease

    def lane_key(self, session_key: str) -> str:
        """The lane a session's turns wait in: its own, or its memory scope's."""
        scope = None if self.memory_scope is None else self.memory_scope(session_key)
        return session_key if scope is None else scope.lane_of(session_key)

    def moves(self, pending: Pending, lane_key: str) -> bool:
        """A fire of the lane's own session in a shared memory (a shared automation): its turn
        goes to the thread the person last talked in.
        """
        fire = pending.fire
        return (
            fire is not None
            and not self.shared_chat
            and fire.job.session_key == lane_key
            and self.memory_scope is not None
            and self.memory_scope(lane_key) is not None
        )

    def start_of(self, pending: Pending, prepared: FireTurn | None) -> TurnStart:
        """The start write of `pending`'s turn, stamped now (a fire claimed ahead: at its
        time).
        """
        now = self.clock.now()
        if pending.fire is not None and pending.fire.fire_at > now:
            now = pending.fire.fire_at  # claimed ahead: it starts at its time
        return start_record(
            pending.session_key, pending, prepared, owner=self.owner, now=now, lease=self._lease
        )

    def pipeline(self, lane: _Lane) -> None:
        """Called as the current turn's end write is queued: when the turn behind it is a fire
        that can begin at once (a slot free with nobody waiting for one, nothing to read
        first), its start is queued right behind that end, so both share one transaction:
        back-to-back turns of a session pay one commit wait between them, not two. The slot
        is taken now (`Pending.early`); the lane's worker goes on with that turn as usual.
        """
        if self._closing or len(lane.queue) < 2 or lane.queue[0] is not lane.current:
            return
        if self.slots.locked():
            return  # no slot to take now: nothing else is worth looking at
        nxt = lane.queue[1]
        # Fires only: a started turn cut by a crash before its runner call is closed, never
        # run again; that is a fire's rule anyway (at most once), while a person's message
        # that never began is answered after a crash by whichever process adopts it, so its
        # start stays right before its runner call.
        if nxt.fire is None or nxt.started or self.moves(nxt, lane.key):
            return  # a moved fire reads where the person talks first: the usual start
        if nxt.fire.job.policy.gate is not None:
            return  # its gate asks first, holding no slot: the usual start
        if self._late(nxt):
            return  # it ends missed, without a start: the usual way
        try:
            prepared = fire_turn(nxt.fire, nxt.turn_id)
        except (PromptError, ValueError, KeyError):
            return  # it ends failed, without a start: the usual way
        if not self.slots.try_take():
            return
        nxt.prepared = prepared
        nxt.started = True  # submitted: it commits even if a shutdown cuts what follows
        nxt.early = self.journal.submit(self.start_of(nxt, prepared))

    async def reply_session(self, lane_key: str) -> str:
        """Where a shared automation's turn runs: the scope's session where a person last
        talked, else the lane's own.
        """
        scope = None if self.memory_scope is None else self.memory_scope(lane_key)
        found = None if scope is None else await self.store.sessions.last_talked(scope)
        return lane_key if found is None else found

    # -- submission ------------------------------------------------------------------------

    async def submit_message(
        self,
        session_key: str,
        content: str,
        *,
        source: TurnSource = TurnSource.USER,
        title: str | None = None,
        attachments: tuple[Attachment, ...] = (),
    ) -> Turn:
        """Queue a user (or hook) message as a turn of its session; returns the turn record.
        `title` names a session that has no title yet; `attachments` go to its runner.
        """
        if self._closing:
            raise RuntimeError("agentcron is stopping: no new turns")
        turn = await self.store.sessions.open_turn(
            session_key, source.value, content, self.clock.now(), owner=self.owner, title=title
        )
        self._enqueue(session_key, Pending(turn.id, source, content, attachments=attachments))
        return turn

    async def submit_fire(self, fire: ClaimedFire) -> None:
        """Take over a claimed session-turn fire (its turn record was opened by the claim):
        it runs after the turns queued before it, and ends in exactly one terminal state.
        """
        key = fire.job.session_key
        if key is None or fire.turn_id is None:
            raise ValueError(f"fire {fire.run_id} is not a session turn")
        self._fires += 1
        # In unified mode it may wait behind another session's turn, which its claim did not
        # see (the claim looks at the job's own session): deferred all the same.
        behind = self.lane_key(key) != key and self.busy(key)
        pending = Pending(fire.turn_id, fire_source(fire.job), fire.job.message, fire)
        until = quiet_wait(fire, self.clock.now())
        if until is not None:  # `quiet = wait` in its session's quiet hours: no lane, no slot
            self._wait_quiet(key, pending, until)
            await self._job_event(fire, JobAction.DEFERRED)
            return
        self._enqueue(key, pending)
        if fire.deferred or behind:
            await self._job_event(fire, JobAction.DEFERRED)

    def _wait_quiet(self, key: str, pending: Pending, until: datetime) -> None:
        """Hold a fire outside its lane until its session's quiet hours end (its run says
        `deferred`; the engine's heartbeat renews its lease), then queue it as usual.
        """
        fire = pending.fire
        if fire is None:
            raise ValueError("only a fire waits for quiet hours to end")
        pending.quiet = quiet_record(QuietMode.WAIT, until)
        pending.waited_until = until
        log.info(
            "fire waits for its session's quiet hours to end",
            extra=log_context(key, pending) | {"until": until.isoformat()},
        )
        self.journal.post(RunEnd(Transition(fire.run_id, RunState.DEFERRED, self.clock.now())))
        task = asyncio.create_task(self._after_quiet(key, pending, until), name=f"quiet:{key}")
        self._quiet_waits[fire.run_id] = (pending, task)

    async def _after_quiet(self, key: str, pending: Pending, until: datetime) -> None:
        await self.clock.sleep_until(until, self._quiet_stop)
        if self._closing or pending.fire is None:
            return  # a stop hands it back (`shutdown`)
        self._quiet_waits.pop(pending.fire.run_id, None)
        self._enqueue(key, pending)

    def sessions_freed(self, keys: Sequence[str] | None) -> None:
        """Another process let go of these sessions (None or empty: perhaps of any): a turn
        waiting for one of them tries to start again now.
        """
        if not keys:
            waits: Iterable[asyncio.Event | None] = self._held_elsewhere.values()
        else:
            waits = (self._held_elsewhere.get(self.lane_key(k)) for k in keys)
        for freed in waits:
            if freed is not None:
                freed.set()

    def busy(self, session_key: str) -> bool:
        """A turn runs or waits in the session's lane (in unified mode: of any web chat)."""
        lane = self._lanes.get(self.lane_key(session_key))
        return lane is not None and lane.busy

    def _current(self, session_key: str) -> tuple[_Lane, Pending] | None:
        """The session's lane and its turn in progress, when that turn is this session's."""
        lane = self._lanes.get(self.lane_key(session_key))
        if lane is None or lane.current is None or lane.current.session_key != session_key:
            return None
        return lane, lane.current

    @property
    def holds_leases(self) -> bool:
        """Some turn waits or runs here (its session lease or run lease needs renewing)."""
        return bool(self._lanes)

    @property
    def live_work(self) -> LiveWork:
        """The sessions with a lane here, and the turns and fires (runs) queued or running in
        them: what the engine's heartbeat renews; any other open work of this owner is an
        orphan it settles (read-only).
        """
        waits = self._quiet_waits
        held = [p for lane in self._lanes.values() for p in (*lane.queue, lane.current) if p]
        held += [p for p, _ in waits.values()]
        return LiveWork(
            runs=frozenset(p.fire.run_id for p in held if p.fire is not None),
            turns=frozenset(p.turn_id for p in held),
            # the lanes' own sessions, and the sessions of their turns (unified mode: threads)
            sessions=frozenset(self._lanes)
            | {p.session_key for p in held if p.fire is None or p.fire.run_id not in waits},
        )

    @property
    def parked(self) -> int:
        """Fires handed over by the engine that have not ended yet."""
        return self._fires

    @property
    def active_turns(self) -> int:
        """Turns running now, in all sessions."""
        return sum(1 for lane in self._lanes.values() if lane.current is not None)

    @property
    def queued_turns(self) -> int:
        """Turns waiting behind another turn of their session."""
        return sum(lane.waiting for lane in self._lanes.values())

    def running_turn(self, session_key: str) -> str | None:
        current = self._current(session_key)
        return None if current is None else current[1].turn_id

    def replay(self, session_key: str) -> list[Event]:
        """The events of the session's turn in progress, for a client that reconnects."""
        current = self._current(session_key)
        return [] if current is None else list(current[0].replay)

    async def stop(self, session_key: str) -> bool:
        """Stop the session's running turn (user or scheduled). False if none runs. A turn
        that is current but has not reached its runner yet (waiting for a slot or for its
        start write) is stopped too: it ends cancelled without calling the runner.
        """
        current = self._current(session_key)
        execution = None if current is None else current[0].execution
        return execution is not None and execution.stop()

    async def _job_event(
        self, fire: ClaimedFire, action: JobAction, status: str | None = None
    ) -> None:
        if self.bus.active:
            await self.bus.publish(fire_event(fire, action, status))

    # -- the worker ------------------------------------------------------------------------

    def _enqueue(self, key: str, pending: Pending) -> None:
        lane_key = self.lane_key(key)
        pending.session_key = key
        pending.lease_key = None if lane_key == key else lane_key
        lane = self._lanes.get(lane_key)
        if lane is None:
            lane = self._lanes[lane_key] = _Lane(lane_key)
        lane.push(pending)
        if lane.worker is None or lane.worker.done():
            lane.worker = asyncio.create_task(self._drain(lane), name=f"lane:{key}")

    async def _drain(self, lane: _Lane) -> None:
        self._workers += 1
        try:
            while not self._closing and (pending := lane.begin()) is not None:
                # The execution exists from the moment the turn is current, so that a stop
                # in any instant before the runner is called is not lost.
                execution = lane.execution = Execution(
                    self.slots, self.slots.turns, self.clock, self.settings.turn_timeout
                )
                try:
                    holding = pending.early is not None  # its start and slot came early
                    turn = await self._prepare(lane, pending, execution)
                    if turn is not None:
                        # A fire's runner is called at its time, not before (claimed ahead).
                        at = None if pending.fire is None else pending.fire.fire_at
                        ctx = log_context(pending.session_key, pending)
                        await execution.run(turn, at=at, ctx=ctx, holding=holding)
                except StoreUnavailableError as exc:  # a stop gave up waiting for the database
                    log.warning(
                        "turn left to the next start's recovery: %s",
                        exc.reason,
                        extra=log_context(pending.session_key, pending),
                    )
                    await self.ends.after_error(pending.session_key, pending, exc)
                except Exception as exc:  # a store failure around the turn: this turn only
                    ctx = log_context(pending.session_key, pending)
                    log.exception("turn failed outside the runner", extra=ctx)
                    await self.ends.after_error(pending.session_key, pending, exc)
                finally:
                    lane.end(pending)
                    lane.execution = None
                    lane.replay = []
                    if pending.fire is not None:
                        self._fires -= 1
                self.turn_waiters.notify(pending.turn_id)
                # After the lane let go of the turn: a client that re-reads the session on
                # this event sees it idle (or its next turn).
                if self.bus.active:
                    for key in dict.fromkeys((pending.session_key, lane.key)):
                        await self.bus.publish(SessionSync(session_key=key))
        finally:
            self._workers -= 1
            if self._lanes.get(lane.key) is lane and not lane.busy:
                del self._lanes[lane.key]

    def quiet(self, *, busy_ok: bool = False) -> bool:
        """No lane has work; or with `busy_ok`, every lane is inside its runner, paused in it
        (waiting for an approval) or waiting for a slot (tests and benchmarks use this to know
        the engine has settled). A paused turn is work in progress like a runner that is busy:
        never quiet without `busy_ok`, until its wait ends (decision or timeout).
        """
        working = self._workers
        if busy_ok:
            return working == self.slots.turns.settled
        return working == 0

    async def _prepare(
        self, lane: _Lane, pending: Pending, execution: Execution
    ) -> _LaneTurn | None:
        """The turn's steps; None when a fire ends before its turn begins (missed after
        waiting, or its prompt cannot be rendered).
        """
        fire = pending.fire
        if fire is None or pending.early is not None:  # an early start checked it then
            return _LaneTurn(self, lane, pending, pending.prepared, execution)
        if self._late(pending):
            await self.ends.unstarted(
                pending.session_key,
                pending,
                RunState.MISSED,
                "missed: it waited behind its session's turns past the grace period (catchup=skip)",
            )
            return None
        gate = fire.job.policy.gate
        passed = None
        if gate is not None:  # its pre-check, holding no slot (turns/gate_step.py)
            passed = await pass_gate(
                pending,
                gate,
                ends=self.ends,
                clock=self.clock,
                allow_code=self.settings.gates,
                policy=self.gate_policy,
                execution=execution,
            )
            if passed is None:
                return None
            pending.gate = passed.as_dict()
        try:
            prepared = fire_turn(fire, pending.turn_id, passed)
        except (PromptError, ValueError, KeyError) as exc:
            await self.ends.unstarted(
                pending.session_key,
                pending,
                RunState.FAILED,
                f"the prompt could not be rendered: {exc}",
            )
            return None
        return _LaneTurn(self, lane, pending, prepared, execution)

    async def _history(
        self,
        key: str,
        seq: int,
        turn_id: str,
        written: list[Entry],
        *,
        context: ContextMode = ContextMode.CONTINUE,
        budget: int | None = None,
    ) -> list[HistoryEntry]:
        """The turn's history; a database outage is waited out (with backoff, inside the
        turn's call: a stop or the turn's timeout still ends it), not made a failed turn.
        """
        backoff: Backoff | None = None  # made at the first outage: a read that lands pays nothing
        while True:
            try:
                return await self.memory.for_turn(
                    key, seq, turn_id, written, context=context, budget=budget
                )
            except StoreUnavailableError:
                if self._closing:
                    raise
                backoff = backoff or Backoff()
                await backoff.sleep()

    def _late(self, pending: Pending) -> bool:
        """A fire that waited past the grace period, of a job that skips late fires (a
        person's manual run or an event's run is never late: it was asked for to run,
        whenever it can; a fire that waited for quiet hours to end counts from their end).
        """
        fire = pending.fire
        if fire is None:
            return False
        since = max(fire.fire_at, pending.waited_until or fire.fire_at)
        waited = self.clock.now() - since
        skips = fire.job.policy.catchup is Catchup.SKIP and not fire.asked
        return skips and waited > self.settings.misfire_grace

    @property
    def keeps_history(self) -> bool:
        """The runner gets history (its window, or the setting's, is above 0)."""
        return self.memory.keeps_history

    async def history_of(self, key: str) -> list[HistoryEntry]:
        """A delivery job's isolated run's history from its own session (`cron:{job_id}`)."""
        return await self.memory.history_of(key)

    # -- recovery and shutdown -------------------------------------------------------------

    async def recover(self, is_dead: Callable[[str], bool]) -> None:
        """Settle turns other processes left open: run waiting user turns here (they never
        started), close cut-off ones with a visible notice (never re-run), and free the
        session leases of owners that are gone.
        """
        now = self.clock.now()
        found = await self.store.sessions.recover_turns(now, self.owner, is_dead)
        for turn in found.interrupted:
            log.warning(
                "turn interrupted: its process stopped mid-way; not re-run",
                extra={"session_key": turn.session_key, "turn_id": turn.id},
            )
            text, meta = interrupted_entry(turn.source, turn.id)
            reply = await self.store.sessions.append_message(
                turn.session_key, Role.ASSISTANT, text, now, meta
            )
            await self.store.sessions.set_turn_reply(turn.id, reply.id)
            self.turn_waiters.notify(turn.id)
            # The closure reaches the chat's channel like any message outside a turn.
            session = await self.store.sessions.get_session(turn.session_key)
            await self.posts.announce(reply, chat_of(session))
        for turn in found.adopted:
            if self._closing:
                await self.store.sessions.release_turns([turn.id], self.owner)
                continue
            log.info(
                "adopted a waiting turn",
                extra={"session_key": turn.session_key, "turn_id": turn.id},
            )
            self._enqueue(turn.session_key, Pending(turn.id, TurnSource(turn.source), turn.content))

    async def shutdown(self, grace: float) -> None:
        """Stop taking turns: hand waiting ones back (their fires were never started; the next
        process to start runs them), let running turns finish for `grace` seconds, then stop
        them (interrupted, with a visible notice). A turn paused for the outside world (an
        approval) gets no grace: it is stopped at once, or as soon as it pauses.
        """
        self._closing = True
        self._quiet_stop.set()
        quiet = [p for p, _ in self._quiet_waits.values()]
        await asyncio.gather(*(t for _, t in self._quiet_waits.values()), return_exceptions=True)
        self._quiet_waits.clear()
        waiting = [p for lane in self._lanes.values() for p in lane.take_waiting()] + quiet
        self._fires -= sum(p.fire is not None for p in waiting)
        self.slots.close()  # cuts the paused turns (the engine may have closed it already)
        # A waiting turn whose start was submitted early began: it can only end.
        await self._release([p for p in waiting if p.early is None])
        for pending in waiting:
            if pending.early is not None:
                await self._close_early(pending)
        current = [lane.current for lane in self._lanes.values() if lane.current is not None]
        workers = [lane.worker for lane in self._lanes.values() if lane.worker is not None]
        if workers:
            _, late = await asyncio.wait(workers, timeout=grace)
            for worker in late:
                worker.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        # A turn cut off while it waited for its session (another process's lease) never
        # began: handed back too.
        await self._release([p for p in current if not p.started])

    async def _close_early(self, pending: Pending) -> None:
        """A shutdown took a turn whose start was submitted with the end of the turn before
        it: give its slot back and close it, interrupted, if the start landed.
        """
        early, pending.early = pending.early, None
        self.slots.give()
        try:
            result = None if early is None else await early
        except Exception as exc:  # its start failed: nothing began
            log.warning(
                "an early start failed at a stop: %s",
                exc,
                extra=log_context(pending.session_key, pending),
            )
            return
        started = isinstance(result, TurnStarted) and result.message is not None
        if started:
            session = result.session if isinstance(result, TurnStarted) else None
            await self.ends.interrupted(pending.session_key, pending, session)
        else:
            pending.started = False
            await self._release([pending])
        self.turn_waiters.notify(pending.turn_id)

    async def _release(self, pending: list[Pending]) -> None:
        turn_ids = [p.turn_id for p in pending]
        run_ids = [p.fire.run_id for p in pending if p.fire is not None]
        try:
            await self.store.release(self.owner, run_ids)
            await self.store.sessions.release_turns(turn_ids, self.owner)
        except Exception:
            log.exception("could not release %d waiting turns", len(turn_ids))
