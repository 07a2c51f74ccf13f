"""How a session turn ends: its end written (group commit), its waiters woken, live views told."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from agentcron.agent.runner import Outcome, ToolRecord
from agentcron.agent.tool_entries import run_tool_call, tool_entry
from agentcron.domain.events import (
    Event,
    EventBus,
    JobAction,
    StreamEnd,
    fire_event,
    publish_fire_settled,
)
from agentcron.domain.runs import ClaimedFire
from agentcron.domain.sessions import Entry, Role, Session
from agentcron.domain.states import STOPPED_MID_TURN, RunState, TurnState
from agentcron.runtime.clock import Clock
from agentcron.runtime.journal import Journal
from agentcron.runtime.notify import notify_outcome
from agentcron.runtime.waiters import Waiters
from agentcron.store.errors import StoreUnavailableError
from agentcron.store.interface import RunRecords
from agentcron.store.writes import TurnFinished
from agentcron.turns.lane_queue import Pending
from agentcron.turns.posts import chat_of
from agentcron.turns.quiet_step import quiet_reply
from agentcron.turns.transcript import interrupted_entry, reply_attachments
from agentcron.turns.turn_records import closing_entry, end_record, log_context, unstarted_record

log = logging.getLogger(__name__)


class TurnEnds:
    """Every way a turn ends: with its runner's outcome, before it began, after a failure
    outside the runner, or cut off by a shutdown. Each is one write (the turn, its closing
    entry, its fire's run and job together), then the turn's waiters and live views.
    """

    def __init__(
        self,
        journal: Journal,
        clock: Clock,
        bus: EventBus,
        *,
        owner: str,
        waiters: Waiters,
        runs: RunRecords,
    ) -> None:
        self.journal, self.clock, self.bus = journal, clock, bus
        self.owner = owner
        self.waiters = waiters
        self.runs = runs  # a `changes` job's last delivered outcome

    async def finished(
        self,
        key: str,
        pending: Pending,
        outcome: Outcome,
        session: Session,
        put: Callable[[Event], Awaitable[None]],
        written: list[Entry],
        then: Callable[[], object] | None = None,
    ) -> None:
        """The runner returned: close the turn with its reply (or a notice); `put` sends the
        stream's end to live views and the turn's replay; `then` runs as the end write is
        queued (what it submits shares the end's transaction: `Journal.write`).
        """
        fire = pending.fire
        held, delivery, hold_until = None, None, None
        if fire is not None:  # a bare silent sentinel makes the outcome empty: first
            outcome, held, delivery = await notify_outcome(self.runs, fire, outcome)
            # its session's quiet hours (turns/quiet_step.py)
            quiet = quiet_reply(fire, self.clock.now(), held, delivery, pending.quiet)
            held, delivery, hold_until = quiet.held, quiet.delivery, quiet.hold_until
            if pending.gate is not None:  # what its gate said (turns/gate_step.py)
                delivery = (delivery or {}) | {"gate": pending.gate}
        state = outcome.status.turn_state
        # Before the reply, in the same write: a compaction's summary, then the tool calls
        # (which a fire's run record keeps too, in that write). A stopped or timed-out turn's
        # outcome carries the calls its runner reported before the end.
        entry = closing_entry(pending, outcome, held, hold_until)
        result = await self.write(
            key, pending, state, entry, outcome, tuple(written), then, delivery=delivery
        )
        self.waiters.notify(pending.turn_id)
        await put(
            StreamEnd(
                session_key=key,
                turn_id=pending.turn_id,
                status=state.value,
                source=pending.source.value,
                run_id=fire.run_id if fire else None,
                reply=result.message,
                chat=chat_of(session),
                attachments=reply_attachments(outcome),
            )
        )
        if fire is not None:
            await self._fire_ended(fire, state.value, result)

    async def write(
        self,
        key: str,
        pending: Pending,
        state: TurnState,
        entry: Entry | None,
        outcome: Outcome,
        before: tuple[Entry, ...] = (),
        then: Callable[[], object] | None = None,
        *,
        delivery: dict[str, Any] | None = None,
    ) -> TurnFinished:
        """One end write: `before` (a compaction's summary), then the outcome's tool calls,
        then `entry`; a fire's run keeps the tool calls too. `then`: see `Journal.write`.
        """
        calls = tuple(tool_entry(t, pending.turn_id) for t in outcome.tools)
        record = end_record(
            key,
            pending,
            state,
            entry,
            outcome,
            owner=self.owner,
            now=self.clock.now(),
            before=(*before, *calls),
            tool_calls=[run_tool_call(c) for c in calls] if pending.fire is not None else None,
            delivery=delivery,
        )
        result = await self.journal.write(record, then)
        if not isinstance(result, TurnFinished):
            raise TypeError(f"a turn finish was answered with {result!r}")
        return result

    async def unstarted(
        self,
        key: str,
        pending: Pending,
        state: RunState,
        error: str | None,
        *,
        output: str | None = None,
        delivery: dict[str, Any] | None = None,
        entry: Entry | None = None,
    ) -> None:
        """A fire that ends without its turn beginning (missed after waiting, unrenderable
        prompt, session gone, its gate): its turn and run end with the reason; no transcript
        entry but `entry` (a gate's notice).
        """
        if state is not RunState.SUCCEEDED:
            log.warning("turn ended before it began: %s", error, extra=log_context(key, pending))
        now = self.clock.now()
        record = unstarted_record(
            key,
            pending,
            state,
            error,
            owner=self.owner,
            now=now,
            output=output,
            delivery=delivery,
            entry=entry,
        )
        result = await self.journal.write(record)
        fire = pending.fire
        if fire is not None and isinstance(result, TurnFinished):
            await self._fire_ended(fire, state.value, result)

    async def after_error(self, key: str, pending: Pending, exc: Exception) -> None:
        """Best effort after a failure outside the runner: the turn and its fire end `failed`
        with the error, instead of staying open until a restart.
        """
        outcome = Outcome.failed(f"{type(exc).__name__}: {exc}")
        # A turn that began leaves a visible closure.
        entry = closing_entry(pending, outcome) if pending.started else None
        try:
            await self.write(key, pending, TurnState.FAILED, entry, outcome)
        except StoreUnavailableError as unavailable:  # a stop gave up on the database
            log.warning(
                "could not record a failed turn (%s); the next start settles it",
                unavailable,
                extra=log_context(key, pending),
            )
        except Exception:
            log.exception("could not record a failed turn", extra=log_context(key, pending))

    async def interrupted(
        self,
        key: str,
        pending: Pending,
        session: Session | None,
        tools: tuple[ToolRecord, ...] = (),
    ) -> None:
        """A shutdown stopped this turn mid-way: close it visibly, with the tool calls its
        runner reported (`tools`); its fire is not re-run. `session` is None when the stop
        came before the turn's start was answered.
        """
        text, meta = interrupted_entry(pending.source.value, pending.turn_id)
        try:
            result = await self.write(
                key,
                pending,
                TurnState.INTERRUPTED,
                Entry(Role.ASSISTANT, text, meta),
                Outcome.failed(STOPPED_MID_TURN, tools=tools),
            )
        except StoreUnavailableError as unavailable:  # a stop gave up on the database
            log.warning(
                "could not record an interrupted turn (%s); the next start settles it",
                unavailable,
                extra=log_context(key, pending),
            )
            return
        except Exception:
            log.exception("could not record an interrupted turn", extra=log_context(key, pending))
            return
        self.waiters.notify(pending.turn_id)
        if self.bus.active:
            await self.bus.publish(
                StreamEnd(
                    session_key=key,
                    turn_id=pending.turn_id,
                    status=TurnState.INTERRUPTED.value,
                    source=pending.source.value,
                    run_id=pending.fire.run_id if pending.fire else None,
                    reply=result.message,
                    chat=None if session is None else chat_of(session),
                )
            )

    async def _fire_ended(self, fire: ClaimedFire, status: str, result: TurnFinished) -> None:
        """The fire's turn, run and job are committed together: say so to live views."""
        if self.bus.active:
            await self.bus.publish(fire_event(fire, JobAction.FINISHED, status))
            await publish_fire_settled(self.bus, fire, status, job_deleted=result.job_deleted)
