"""The one step from a claimed fire to a turn request: prompt, trigger entry, source (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from agentcron.agent.runner import Trigger, TurnSource, fire_source, fire_trigger
from agentcron.domain.gates import GateResult
from agentcron.domain.notify import silent_hint
from agentcron.domain.runs import ClaimedFire
from agentcron.domain.sessions import Entry, Role
from agentcron.turns.prompts import get_prompt
from agentcron.turns.transcript import trigger_entry


@dataclass(frozen=True, slots=True)
class FireTurn:
    """What a session turn needs from its fire: the readable trigger entry for the transcript,
    the rendered prompt (only for the runner and the run record) and its reference.
    """

    source: TurnSource
    entry: Entry
    prompt: str
    prompt_ref: dict[str, Any]
    prompt_vars: dict[str, Any]
    trigger: Trigger
    system_context: str | None  # a recall's self-instruction, for this turn only


def fire_turn(fire: ClaimedFire, turn_id: str, gate: GateResult | None = None) -> FireTurn:
    """Render the fire's prompt (in its session's zone) and its trigger entry; a fire whose
    gate let it through gets the gate's output as `gate_output` (its own template); a job
    whose notify policy holds some outcomes is told of the silent sentinel (`silent_hint`).

    Raises `PromptError` when the template is missing or a variable is not given.
    """
    job = fire.job
    source = fire_source(job)
    recall = source is TurnSource.RECALL
    event = fire.event_id is not None and not recall
    if recall:
        name = "cron.recall"
    elif event:
        name = "cron.agent_turn.event"
    else:
        name = "cron.agent_turn.reminder" if gate is None else "cron.agent_turn.gated"
    template = get_prompt(name)
    tz = fire.session_tz
    variables: dict[str, Any] = {
        "job_id": job.id,
        "job_name": job.name,
        "run_id": fire.run_id,
        "message": job.message,
        "fire_at_local": fire.fire_at.astimezone(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M"),
        "tz": tz,
        # `changes` / `never-empty`: how to mark an answer silent ("" for `always`)
        "silent_hint": silent_hint(job.policy.notify),
    }
    if gate is not None:
        variables["gate_output"] = gate.output
    if event:
        variables["event_id"] = fire.event_id
        variables["event"] = fire.event or "null"
    prompt = template.render(variables)
    ref = template.ref
    content, meta = trigger_entry(
        source,
        job_id=job.id,
        job_name=job.name,
        run_id=fire.run_id,
        message=job.message,
        prompt_ref=dict(ref),
    )
    meta["turn_id"] = turn_id
    if fire.manual:
        meta["manual"] = True  # a person's "run now": the transcript can say so
    if fire.event_id is not None:
        meta["event_id"] = fire.event_id  # an event fired it
    return FireTurn(
        source=source,
        entry=Entry(Role.USER, content, meta),
        prompt=prompt,
        prompt_ref=ref,
        # The run keeps the event itself (`runs.event`), not a second copy.
        prompt_vars={k: v for k, v in variables.items() if k != "event"},
        trigger=fire_trigger(fire),
        system_context=job.message if recall else None,
    )
