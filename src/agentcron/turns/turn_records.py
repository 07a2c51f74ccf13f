"""The writes that begin and end a session turn, built from its lane entry (pure, no I/O)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from agentcron.agent.runner import Outcome
from agentcron.domain.notify import Held
from agentcron.domain.quiet import QUIET_UNTIL
from agentcron.domain.sessions import Entry, Role
from agentcron.domain.states import RunState, TurnState, unstarted_turn_end
from agentcron.store.writes import Transition, TurnFinish, TurnStart, fire_end
from agentcron.turns.fire_turn import FireTurn
from agentcron.turns.lane_queue import Pending
from agentcron.turns.transcript import closure


def opening_entry(pending: Pending, prepared: FireTurn | None) -> Entry:
    """The turn's first transcript entry: the user's words, or the fire's readable trigger."""
    if prepared is not None:
        return prepared.entry
    meta: dict[str, Any] = {"source": pending.source.value, "turn_id": pending.turn_id}
    if pending.attachments:  # what they were, never their bytes
        meta["attachments"] = [a.describe() for a in pending.attachments]
    return Entry(Role.USER, pending.content, meta)


def start_record(
    key: str,
    pending: Pending,
    prepared: FireTurn | None,
    *,
    owner: str,
    now: datetime,
    lease: timedelta,
) -> TurnStart:
    """Begin the turn (lease, opening entry, turn running) and, for a fire, its run running
    with the rendered prompt it is about to be given.
    """
    run = None
    if pending.fire is not None and prepared is not None:
        run = Transition(
            pending.fire.run_id,
            RunState.RUNNING,
            now,
            prompt=prepared.prompt,
            prompt_ref=prepared.prompt_ref,
            prompt_vars=prepared.prompt_vars,
        )
    entry = opening_entry(pending, prepared)
    return TurnStart(
        key, pending.turn_id, owner, now, now + lease, entry, run, lease_key=pending.lease_key
    )


def closing_entry(
    pending: Pending,
    outcome: Outcome,
    held: Held | None = None,
    hold_until: datetime | None = None,
) -> Entry:
    """The assistant entry that closes a turn that began (its reply or a short notice); a
    fire's outcome its notify policy `held` stays in the transcript, marked `held` (the
    channels do not send it); one its session's quiet hours hold is marked `quiet_until`
    (the channels send it then).
    """
    fire = pending.fire
    text, meta = closure(
        outcome,
        pending.source,
        name=fire.job.name if fire else None,
        run_id=fire.run_id if fire else None,
    )
    meta["turn_id"] = pending.turn_id
    if held is not None:
        meta["held"] = held.value
    if hold_until is not None:
        meta[QUIET_UNTIL] = hold_until.isoformat()
    return Entry(Role.ASSISTANT, text, meta)


def end_record(
    key: str,
    pending: Pending,
    state: TurnState,
    entry: Entry | None,
    outcome: Outcome,
    *,
    owner: str,
    now: datetime,
    before: tuple[Entry, ...] = (),
    tool_calls: list[dict[str, Any]] | None = None,
    delivery: dict[str, Any] | None = None,
) -> TurnFinish:
    """End a turn that began in `state`; a fire's run ends in the same state with the
    outcome's output and the turn's `tool_calls`, and its job takes the outcome (next fire,
    failures, removal).
    """
    fire = pending.fire
    run = job = None
    if fire is not None:
        run, job = fire_end(
            fire,
            state.run_state,
            now,
            output=outcome.text,
            error=outcome.error,
            error_details=outcome.error_details,
            usage=outcome.usage,
            tool_calls=tool_calls,
            delivery=delivery,
        )
    return TurnFinish(
        key,
        pending.turn_id,
        owner,
        now,
        state,
        entry,
        error=outcome.error,
        error_details=outcome.error_details,
        usage=outcome.usage,
        run=run,
        outcome=job,
        before=before,
        lease_key=pending.lease_key,
    )


def unstarted_record(
    key: str,
    pending: Pending,
    state: RunState,
    error: str | None,
    *,
    owner: str,
    now: datetime,
    output: str | None = None,
    delivery: dict[str, Any] | None = None,
    entry: Entry | None = None,
) -> TurnFinish:
    """End a turn that never began (its fire was missed, its prompt could not be rendered,
    its session is gone, its gate said no or was the whole job): no transcript entry but
    `entry` (a gate's notice); its run ends in `state` with the reason, `output` and
    `delivery` (what its gate said).
    """
    fire = pending.fire
    run = job = None
    if fire is not None:
        run, job = fire_end(fire, state, now, error=error, output=output, delivery=delivery)
    return TurnFinish(
        key,
        pending.turn_id,
        owner,
        now,
        unstarted_turn_end(state),
        entry,
        error=error,
        run=run,
        outcome=job,
        lease_key=pending.lease_key,
    )


def log_context(key: str, pending: Pending) -> dict[str, Any]:
    """The structured-log fields of a turn: session, turn, and its fire's job and run."""
    fire = pending.fire
    return {
        "session_key": key,
        "turn_id": pending.turn_id,
        "job_id": fire.job.id if fire else None,
        "run_id": fire.run_id if fire else None,
    }
