"""Lanes: one turn at a time per session; a scheduled trigger waits for the session to be idle."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

from agentcron.agent.runner import (
    HistoryEntry,
    Outcome,
    OutcomeStatus,
    Runner,
    SessionInfo,
    Trigger,
    TurnInput,
    TurnSource,
)
from agentcron.engine.clock import Clock
from agentcron.engine.waiters import Waiters
from agentcron.events import (
    ChatContext,
    Event,
    EventBus,
    JobAction,
    JobEvent,
    MessagePosted,
    SessionSync,
    StreamEnd,
    StreamStart,
    runner_event,
)
from agentcron.sessions.prompts import get_prompt
from agentcron.sessions.transcript import closure, trigger_entry
from agentcron.store.models import ClaimedFire, JobKind, Message, RunState, Turn, TurnState
from agentcron.store.sessions import Entry, TakenSession
from agentcron.store.sql import SqlStore

log = logging.getLogger(__name__)

StateHook = Callable[..., Awaitable[None]]
"""(state, **run fields) -> None; awaited, so a RUNNING change is durable before the turn."""

_STOPPED = "stopped by the user"
_INTERRUPTED_NOTICE = "This turn was interrupted because agentcron stopped."


@dataclass(frozen=True, slots=True)
class TurnResult:
    outcome: Outcome
    turn_id: str
    message_id: str | None
    interrupted: bool = False  # stopped mid-turn by a shutdown: never run again


@dataclass(eq=False)
class _Request:
    turn: Turn
    source: TurnSource
    content: str
    fire: ClaimedFire | None = None
    trigger: Trigger | None = None
    on_state: StateHook | None = None
    started: bool = False  # the turn began (its RUNNING state is durable)
    finished: bool = False  # its outcome is recorded and the session lease let go
    done: asyncio.Future[TurnResult] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


@dataclass(eq=False)
class _Lane:
    queue: deque[_Request] = field(default_factory=deque)
    worker: asyncio.Task[None] | None = None
    current: _Request | None = None
    runner_task: asyncio.Task[Outcome] | None = None
    stop_requested: bool = False
    replay: list[Event] = field(default_factory=list)  # events of the current turn


class _Events:
    """Forwards a turn's events to the session's listeners and keeps them for replay."""

    def __init__(self, lanes: Lanes, key: str, lane: _Lane, turn_id: str) -> None:
        self._lanes, self._key, self._lane, self._turn_id = lanes, key, lane, turn_id

    async def emit(self, event: dict[str, Any]) -> None:
        await self.put(runner_event(self._key, self._turn_id, event))

    async def put(self, event: Event) -> None:
        self._lane.replay.append(event)
        await self._lanes.bus.publish(event)


class Lanes:
    """Per-session serializers. User messages and fires are both submitted here; nothing else
    starts a turn. A fire that arrives while its session has a turn waits (run state `deferred`)
    and runs when that turn ends; it never enters the running turn.
    """

    def __init__(
        self,
        store: SqlStore,
        runner: Runner,
        clock: Clock,
        *,
        owner: str,
        slots: asyncio.Semaphore,
        bus: EventBus,
        lease: timedelta = timedelta(minutes=5),
    ) -> None:
        self.bus = bus
        self.store = store
        self.runner = runner
        self.clock = clock
        self.owner = owner
        self._slots = slots
        self._lease = lease
        self._lanes: dict[str, _Lane] = {}
        self._closing = False
        self._in_runner = 0
        self._awaiting_slot = 0
        self.parked = 0  # fires handed over by the engine and waiting in a lane
        self.turn_waiters = Waiters()  # callers waiting for a turn to end

    # -- submission ------------------------------------------------------------------------

    async def submit_message(
        self,
        session_key: str,
        content: str,
        *,
        source: TurnSource = TurnSource.USER,
        title: str | None = None,
    ) -> Turn:
        """Queue a user (or hook) message as a turn of its session; returns the turn record.
        `title` names a session that has no title yet.
        """
        if self._closing:
            raise RuntimeError("agentcron is stopping: no new turns")
        turn = await self.store.sessions.open_turn(
            session_key, source.value, content, self.clock.now(), owner=self.owner, title=title
        )
        self._enqueue(session_key, _Request(turn=turn, source=source, content=content))
        return turn

    async def run_fire(
        self, fire: ClaimedFire, trigger: Trigger, on_state: StateHook
    ) -> TurnResult:
        """Run a bound fire as a turn of its session, after any turn in progress; wait for it.

        Cancelled while still waiting (engine stopping): the fire never started.
        """
        key = fire.job.session_key
        assert key is not None
        source = TurnSource.RECALL if fire.job.kind is JobKind.RECALL else TurnSource.AUTOMATION
        busy = self.busy(key)
        state = TurnState.DEFERRED if busy else TurnState.QUEUED
        # An adopted fire continues the turn record it left when its process stopped.
        turn = await self.store.sessions.open_turn(
            key, source.value, fire.job.message, self.clock.now(), owner=self.owner,
            state=state, run_id=fire.run_id,
        )  # fmt: skip
        request = _Request(
            turn=turn, source=source, content=fire.job.message, fire=fire, trigger=trigger,
            on_state=on_state,
        )  # fmt: skip
        if busy:
            await on_state(RunState.DEFERRED)
            await self.job_event(fire, JobAction.DEFERRED)
        self._enqueue(key, request)
        self.parked += 1
        try:
            return await asyncio.shield(request.done)
        except asyncio.CancelledError:
            lane = self._lanes.get(key)
            if lane is not None and request in lane.queue and lane.current is not request:
                lane.queue.remove(request)
                # The fire is released for the next engine; so is its turn record.
                await self.store.sessions.release_turns([turn.id], self.owner)
            raise
        finally:
            self.parked -= 1

    async def job_event(
        self, fire: ClaimedFire, action: JobAction, status: str | None = None
    ) -> None:
        """A fire of a job moved (deferred, fired, finished, settled)."""
        job = fire.job
        await self.bus.publish(JobEvent(session_key=job.session_key or "", action=action,
                                        job_id=job.id, kind=job.kind, run_id=fire.run_id,
                                        status=status))  # fmt: skip

    def busy(self, session_key: str) -> bool:
        lane = self._lanes.get(session_key)
        return lane is not None and (lane.current is not None or bool(lane.queue))

    @property
    def active_turns(self) -> int:
        """Turns running now, in all sessions."""
        return sum(1 for lane in self._lanes.values() if lane.current is not None)

    @property
    def queued_turns(self) -> int:
        """Turns waiting behind another turn of their session."""
        return sum(
            len(lane.queue) - (lane.current is not None and lane.queue[0] is lane.current)
            for lane in self._lanes.values()
            if lane.queue
        )

    def running_turn(self, session_key: str) -> str | None:
        lane = self._lanes.get(session_key)
        return lane.current.turn.id if lane is not None and lane.current is not None else None

    def replay(self, session_key: str) -> list[Event]:
        """The events of the session's turn in progress, for a client that reconnects."""
        lane = self._lanes.get(session_key)
        return list(lane.replay) if lane is not None and lane.current is not None else []

    async def stop(self, session_key: str) -> bool:
        """Stop the session's running turn (user or scheduled). False if none runs."""
        lane = self._lanes.get(session_key)
        if lane is None or lane.runner_task is None or lane.runner_task.done():
            return False
        lane.stop_requested = True
        lane.runner_task.cancel()
        return True

    async def deliver(
        self,
        session_key: str,
        text: str,
        meta: dict[str, Any],
        *,
        channel: str | None = None,
        chat_id: str | None = None,
        channel_meta: dict[str, Any] | None = None,
    ) -> Message:
        """Post an outbound assistant message that is not a turn (a legacy job's result)."""
        now = self.clock.now()
        session = await self.store.sessions.ensure_session(
            session_key, now, channel=channel, chat_id=chat_id, channel_meta=channel_meta
        )
        message = await self.store.sessions.append_message(
            session_key, "assistant", text, now, meta
        )
        chat = ChatContext(
            channel=session.channel, chat_id=session.chat_id, channel_meta=session.channel_meta
        )
        await self._announce_message(message, chat)
        return message

    async def _announce_message(self, message: Message, chat: ChatContext | None = None) -> None:
        """A transcript entry written outside a turn: channels send it, clients re-read."""
        key = message.session_key
        await self.bus.publish(MessagePosted(session_key=key, message=message, chat=chat))
        await self.bus.publish(SessionSync(session_key=key))

    # -- the worker ------------------------------------------------------------------------

    def _enqueue(self, key: str, request: _Request) -> None:
        lane = self._lanes.setdefault(key, _Lane())
        lane.queue.append(request)
        if lane.worker is None or lane.worker.done():
            lane.worker = asyncio.create_task(self._drain(key, lane), name=f"lane:{key}")

    async def _drain(self, key: str, lane: _Lane) -> None:
        while lane.queue and not self._closing:
            request = lane.queue[0]
            lane.current = request
            try:
                result = await self._run(key, lane, request)
            except asyncio.CancelledError:
                if not request.done.done():
                    if request.started:
                        await self._interrupted(key, request)
                    else:
                        request.done.cancel()
                raise
            except Exception as exc:  # a store failure around the turn: fail this turn only
                log.exception("turn failed outside the runner", extra={"session_key": key})
                result = TurnResult(
                    Outcome.failed(f"{type(exc).__name__}: {exc}"), request.turn.id, None
                )
            finally:
                lane.current = None
                lane.replay = []
                if lane.queue and lane.queue[0] is request:
                    lane.queue.popleft()
            if not request.done.done():
                request.done.set_result(result)
            self.turn_waiters.notify(request.turn.id)
            # After the lane let go of the turn: a client that re-reads the session on this
            # event sees it idle (or its next turn).
            await self.bus.publish(SessionSync(session_key=key))
        if self._lanes.get(key) is lane and not lane.queue:
            del self._lanes[key]

    def quiet(self, *, busy_ok: bool = False) -> bool:
        """No lane has work; or with `busy_ok`, every lane is inside its runner or waiting for
        a slot (tests and benchmarks use this to know the engine has settled).
        """
        working = sum(1 for lane in self._lanes.values() if lane.worker and not lane.worker.done())
        if busy_ok:
            return working == self._in_runner + self._awaiting_slot
        return working == 0

    async def _run(self, key: str, lane: _Lane, request: _Request) -> TurnResult:
        self._awaiting_slot += 1
        try:
            await self._slots.acquire()
        finally:
            self._awaiting_slot -= 1
        try:
            taken = await self._take_session(key, request.turn.id)
            renewer = asyncio.create_task(self._renew_session(key), name=f"lease:{key}")
            try:
                return await self._turn(key, lane, request, taken, renewer)
            finally:
                renewer.cancel()
                await asyncio.gather(renewer, return_exceptions=True)
                if not request.finished:  # a normal end lets the lease go with its outcome
                    await self.store.sessions.release_turn_lease(key, self.owner)
        finally:
            self._slots.release()

    async def _renew_session(self, key: str) -> None:
        """Keep the session's turn lease while a turn runs (a long LLM turn outlives one lease)."""
        never = asyncio.Event()
        while True:
            await self.clock.sleep_until(self.clock.now() + self._lease / 3, never)
            try:
                if not await self.store.sessions.renew_turn_lease(
                    key, self.owner, self.clock.now() + self._lease
                ):
                    log.warning("lost the session's turn lease", extra={"session_key": key})
                    return
            except Exception:
                log.exception("session lease renewal failed", extra={"session_key": key})

    async def recover(self, is_dead: Callable[[str], bool]) -> None:
        """Settle turns other processes left open: run waiting user turns here (they never
        started), close cut-off ones with a visible notice (never re-run).
        """
        now = self.clock.now()
        found = await self.store.sessions.recover_turns(now, self.owner, is_dead)
        for turn in found.interrupted:
            log.warning("turn interrupted: its process stopped mid-way; not re-run",
                        extra={"session_key": turn.session_key, "turn_id": turn.id})  # fmt: skip
            meta = {"source": turn.source, "status": "interrupted", "_status_notice": True,
                    "turn_id": turn.id}  # fmt: skip
            reply = await self.store.sessions.append_message(
                turn.session_key, "assistant", _INTERRUPTED_NOTICE, now, meta
            )
            await self.store.sessions.update_turn(turn.id, reply_message_id=reply.id)
            self.turn_waiters.notify(turn.id)
            # The closure reaches the chat's channel like any message outside a turn.
            await self._announce_message(reply)
        for turn in found.adopted:
            if self._closing:
                await self.store.sessions.release_turns([turn.id], self.owner)
                continue
            log.info("adopted a waiting turn", extra={"session_key": turn.session_key,
                                                      "turn_id": turn.id})  # fmt: skip
            source = TurnSource(turn.source)
            self._enqueue(turn.session_key, _Request(turn=turn, source=source,
                                                     content=turn.content))  # fmt: skip

    async def _take_session(self, key: str, turn_id: str) -> TakenSession:
        """Hold the session's turn lease in the store, so no other process runs a turn in it;
        read the session and its transcript in the same transaction.
        """
        while True:
            now = self.clock.now()
            taken = await self.store.sessions.take_session(
                key, self.owner, turn_id, now, now + self._lease
            )
            if isinstance(taken, TakenSession):
                return taken
            await self.clock.sleep_until(taken, asyncio.Event())

    async def _turn(
        self,
        key: str,
        lane: _Lane,
        request: _Request,
        taken: TakenSession,
        renewer: asyncio.Task[None],
    ) -> TurnResult:
        sessions = self.store.sessions
        session = taken.session
        history = [HistoryEntry(m.role, m.content, m.meta) for m in taken.history]
        now = self.clock.now()
        fire, system_context, name = request.fire, None, None
        if fire is not None:
            job = fire.job
            name = job.name
            template = get_prompt(
                "cron.recall" if request.source is TurnSource.RECALL else "cron.agent_turn.reminder"
            )
            variables = {
                "job_id": job.id,
                "job_name": job.name,
                "run_id": fire.run_id,
                "message": job.message,
                "fire_at_local": fire.fire_at.astimezone(ZoneInfo(session.tz)).strftime(
                    "%Y-%m-%d %H:%M"
                ),
                "tz": session.tz,
            }
            prompt = template.render(variables)
            if request.source is TurnSource.RECALL:
                system_context = job.message
            assert request.on_state is not None
            # Durable before the turn starts: after a crash this fire is interrupted, not re-run.
            await request.on_state(
                RunState.RUNNING, prompt=prompt, prompt_ref=template.ref, prompt_vars=variables
            )
            request.started = True
            await self.job_event(fire, JobAction.FIRED)
            content, meta = trigger_entry(
                request.source, job_id=job.id, job_name=job.name, run_id=fire.run_id,
                message=job.message, prompt_ref=template.ref,
            )  # fmt: skip
        else:
            prompt = request.content
            content, meta = request.content, {"source": request.source.value}
            request.started = True
        meta["turn_id"] = request.turn.id
        await sessions.start_turn(key, request.turn.id, Entry("user", content, meta), now)
        events = _Events(self, key, lane, request.turn.id)
        await events.put(StreamStart(session_key=key, turn_id=request.turn.id,
                                     source=request.source.value))  # fmt: skip
        turn_input = TurnInput(
            turn_id=request.turn.id,
            source=request.source,
            prompt=prompt,
            history=history,
            now=now,
            system_context=system_context,
            trigger=request.trigger,
        )
        info = SessionInfo(
            key=session.key, channel=session.channel, chat_id=session.chat_id,
            channel_meta=session.channel_meta, title=session.title, tz=session.tz,
        )  # fmt: skip
        outcome = await self._call_runner(lane, info, turn_input, events)
        text, closing_meta = closure(
            outcome, request.source, name=name, run_id=fire.run_id if fire else None
        )
        closing_meta["turn_id"] = request.turn.id
        # The renewer stops first: it must not take the lease back after the outcome frees it.
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)
        finished_at = self.clock.now()
        reply = await sessions.finish_turn(
            key, request.turn.id, Entry("assistant", text, closing_meta), finished_at,
            self.owner, state=TurnState(outcome.status.value), finished_at=finished_at,
            error=outcome.error, error_details=outcome.error_details, usage=outcome.usage,
        )  # fmt: skip
        request.finished = True
        self.turn_waiters.notify(request.turn.id)
        await events.put(StreamEnd(
            session_key=key, turn_id=request.turn.id, status=outcome.status.value,
            source=request.source.value, run_id=fire.run_id if fire else None, reply=reply,
            chat=ChatContext(channel=session.channel, chat_id=session.chat_id,
                             channel_meta=session.channel_meta),
        ))  # fmt: skip
        if fire is not None:
            await self.job_event(fire, JobAction.FINISHED, status=outcome.status.value)
        return TurnResult(outcome, request.turn.id, reply.id)

    async def _call_runner(
        self, lane: _Lane, info: SessionInfo, turn: TurnInput, events: _Events
    ) -> Outcome:
        lane.stop_requested = False
        lane.runner_task = asyncio.create_task(self.runner.run_turn(info, turn, events))
        self._in_runner += 1
        try:
            outcome = await asyncio.shield(lane.runner_task)
        except asyncio.CancelledError:
            if lane.stop_requested and lane.runner_task.cancelled():
                return Outcome.failed(_STOPPED)
            if not lane.runner_task.done():  # we are being cancelled (shutdown): stop the turn
                lane.runner_task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await lane.runner_task
            raise
        except Exception as exc:
            log.warning("turn failed: %s", exc, extra={"session_key": info.key})
            return Outcome.failed(
                f"{type(exc).__name__}: {exc}",
                error_details={"traceback": traceback.format_exc(limit=20)},
            )
        finally:
            self._in_runner -= 1
            lane.runner_task = None
        if not isinstance(outcome, Outcome):
            return Outcome.failed(f"runner returned {type(outcome).__name__}, not an Outcome")
        return outcome

    async def _interrupted(self, key: str, request: _Request) -> None:
        """A shutdown stopped this turn mid-way: close it visibly; its fire is not re-run."""
        error = "interrupted: agentcron stopped while this turn was running; not re-run"
        outcome = Outcome.failed(error)
        reply_id = None
        try:
            text = _INTERRUPTED_NOTICE
            reply = await self.store.sessions.append_message(
                key, "assistant", text, self.clock.now(),
                {"source": request.source.value, "status": "interrupted", "_status_notice": True,
                 "turn_id": request.turn.id},
            )  # fmt: skip
            reply_id = reply.id
            await self.store.sessions.update_turn(
                request.turn.id, state=TurnState.INTERRUPTED, finished_at=self.clock.now(),
                error=error, reply_message_id=reply_id,
            )  # fmt: skip
        except Exception:
            log.exception("could not record an interrupted turn", extra={"session_key": key})
        self.turn_waiters.notify(request.turn.id)
        request.done.set_result(TurnResult(outcome, request.turn.id, reply_id, interrupted=True))

    # -- shutdown --------------------------------------------------------------------------

    async def shutdown(self, grace: float) -> None:
        """Stop taking turns: drop waiting requests (their fires were never started), let
        running turns finish for `grace` seconds, then stop them.
        """
        self._closing = True
        released: list[str] = []
        for lane in self._lanes.values():
            for request in list(lane.queue):
                if request is not lane.current:
                    lane.queue.remove(request)
                    released.append(request.turn.id)
                    if not request.done.done():
                        request.done.cancel()
        # Waiting turns never started: the next process to start runs them (nothing is lost).
        try:
            await self.store.sessions.release_turns(released, self.owner)
        except Exception:
            log.exception("could not release %d waiting turns", len(released))
        workers = [lane.worker for lane in self._lanes.values() if lane.worker is not None]
        if workers:
            _, late = await asyncio.wait(workers, timeout=grace)
            for worker in late:
                worker.cancel()
            await asyncio.gather(*late, return_exceptions=True)


def outcome_state(outcome: Outcome) -> RunState:
    return {
        OutcomeStatus.SUCCEEDED: RunState.SUCCEEDED,
        OutcomeStatus.FAILED: RunState.FAILED,
        OutcomeStatus.EMPTY: RunState.EMPTY,
    }[outcome.status]
