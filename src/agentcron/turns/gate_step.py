"""A gated fire's pre-check, between its claim and its turn (domain/gates.py): run at the
fire's time, holding no slot; a gated-out fire ends `skipped` (reason `gate`, no transcript
entry unless the gate asks for a notice), a failing gate ends it `failed` with the gate's
output tail, and a gate that is the whole job (`no_llm`) ends it on its answer. Before it
runs, the gate passes the tool policy (`runtime/gate.GatePolicy`): refused, the fire ends
`failed` and the gate never runs; waiting for an approval, it holds no slot (the approval
names the fire's turn, so it is its job's `waiting_approval`).
"""

from __future__ import annotations

import asyncio
import logging

from agentcron.domain.gates import SKIPPED_BY_GATE, Gate, GateResult, GateVerdict, notice_text
from agentcron.domain.sessions import Entry, Role
from agentcron.domain.states import RunState
from agentcron.runtime.clock import Clock
from agentcron.runtime.execution import Execution
from agentcron.runtime.gate import GatePolicy, run_gate
from agentcron.turns.lane_queue import Pending
from agentcron.turns.turn_end import TurnEnds
from agentcron.turns.turn_records import log_context

log = logging.getLogger(__name__)


async def pass_gate(
    pending: Pending,
    gate: Gate,
    *,
    ends: TurnEnds,
    clock: Clock,
    allow_code: bool,
    policy: GatePolicy,
    execution: Execution,
) -> GateResult | None:
    """The gate's answer when the turn is to happen; None when the fire ended here."""
    fire = pending.fire
    if fire is None:
        raise ValueError("only a fire has a gate")
    if fire.fire_at > clock.now():  # claimed ahead: the gate asks at the fire's time
        await clock.sleep_until(fire.fire_at, asyncio.Event())
    key = pending.session_key
    allowed = await policy.check(
        gate, job_id=fire.job.id, session_key=key, turn_id=pending.turn_id, execution=execution
    )
    if allowed.refusal is not None:
        refused = {"gate": allowed.refused().as_dict()}
        log.info("gate refused by the tool policy", extra=log_context(key, pending))
        await ends.unstarted(key, pending, RunState.FAILED, allowed.refusal, delivery=refused)
        return None
    result = await run_gate(gate, allow_code=allow_code, approval_id=allowed.approval_id)
    record = {"gate": result.as_dict()}
    output = result.output or None
    log.info("gate said %s", result.verdict.value, extra=log_context(key, pending) | record["gate"])
    if result.verdict is GateVerdict.ERROR:
        error = f"the gate failed: {result.error}"
        await ends.unstarted(key, pending, RunState.FAILED, error, output=output, delivery=record)
        return None
    if result.verdict is GateVerdict.SKIP:
        entry = _notice(pending, result) if gate.notice else None
        await ends.unstarted(
            key,
            pending,
            RunState.SKIPPED,
            SKIPPED_BY_GATE,
            output=output,
            delivery=record,
            entry=entry,
        )
        return None
    if gate.no_llm:  # the gate is the whole job: it ran, no turn
        await ends.unstarted(key, pending, RunState.SUCCEEDED, None, output=output, delivery=record)
        return None
    return result


def _notice(pending: Pending, result: GateResult) -> Entry:
    fire = pending.fire
    text = notice_text(None if fire is None else fire.job.name, result.output)
    meta = {
        "source": "automation",
        "gate": GateVerdict.SKIP.value,
        "turn_id": pending.turn_id,
        "job_id": None if fire is None else fire.job.id,
        "automation_run_id": None if fire is None else fire.run_id,
    }
    return Entry(Role.SYSTEM, text, meta)
