"""The pure step from a claimed fire to a turn: prompt, trigger entry, source — no database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from agentcron.agent.runner import TurnSource
from agentcron.domain.jobs import CreatedBy, Job, JobKind, JobPolicy
from agentcron.domain.runs import ClaimedFire
from agentcron.schedule import AtSpec
from agentcron.turns.fire_turn import fire_turn
from agentcron.turns.prompts import get_prompt

T0 = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)


def job(kind: JobKind = JobKind.AGENT_TURN, message: str = "Check the build") -> Job:
    return Job(
        id="job1", name="daily monitor", kind=kind, session_key="websocket:chat", message=message,
        spec=AtSpec(at=T0), enabled=True, paused_reason=None, paused_at=None,
        created_by=CreatedBy.USER, policy=JobPolicy(), next_fire_at=None, next_run_at=None,
        last_run_at=None, last_status=None, consecutive_failures=0, run_count=1,
        remaining_runs=None, idempotency_key=None, lease_owner=None, lease_expires_at=None,
        version=2, created_at=T0, updated_at=T0,
    )  # fmt: skip


def fire(kind: JobKind = JobKind.AGENT_TURN, tz: str = "Europe/Berlin") -> ClaimedFire:
    return ClaimedFire(run_id="run1", job=job(kind), fire_at=T0, turn_id="turn1", session_tz=tz)


def test_an_automation_fire_renders_its_prompt_and_a_readable_entry() -> None:
    made = fire_turn(fire(), "turn1")
    template = get_prompt("cron.agent_turn.reminder")
    assert made.source is TurnSource.AUTOMATION
    assert made.entry.role == "user"
    assert made.entry.content == "Scheduled automation triggered: daily monitor\n\nCheck the build"
    assert made.entry.meta["_automation_turn"] is True
    assert made.entry.meta["automation_run_id"] == "run1"
    assert made.entry.meta["automation_prompt_ref"] == template.ref
    assert made.entry.meta["turn_id"] == "turn1"
    # the rendered prompt goes to the runner and the run record, never to the transcript
    assert "[scheduled]" in made.prompt
    assert "Check the build" in made.prompt
    assert made.prompt not in made.entry.content
    assert made.prompt_ref == template.ref
    assert made.system_context is None
    assert made.trigger.run_id == "run1"
    assert made.trigger.fire_at == T0


@pytest.mark.parametrize(
    ("tz", "local"),
    [("Europe/Berlin", "2026-11-23 09:00"), ("UTC", "2026-11-23 08:00"),
     ("America/New_York", "2026-11-23 03:00"), ("Asia/Kolkata", "2026-11-23 13:30")],
)  # fmt: skip
def test_the_fire_time_is_shown_in_the_sessions_zone(tz: str, local: str) -> None:
    made = fire_turn(fire(tz=tz), "turn1")
    assert made.prompt_vars["fire_at_local"] == local
    assert made.prompt_vars["tz"] == tz
    assert local in made.prompt


def test_a_recall_fire_carries_its_self_instruction_as_system_context() -> None:
    made = fire_turn(fire(JobKind.RECALL), "turn1")
    assert made.source is TurnSource.RECALL
    assert made.entry.content == "Scheduled recall triggered: daily monitor"
    assert made.entry.meta["_recall_turn"] is True
    assert made.system_context == "Check the build"
    assert made.prompt_ref == get_prompt("cron.recall").ref
    assert "Check the build" not in made.entry.content


def test_an_unknown_zone_is_an_error_not_a_silent_utc() -> None:
    with pytest.raises(KeyError, match="Mars/Olympus"):  # ZoneInfoNotFoundError
        fire_turn(fire(tz="Mars/Olympus"), "turn1")


def test_a_manual_fire_has_the_same_entry_marked_manual() -> None:
    scheduled = fire_turn(fire(), "turn1")
    made = fire_turn(replace(fire(), manual=True), "turn1")
    assert made.entry.content == scheduled.entry.content
    assert made.entry.meta == scheduled.entry.meta | {"manual": True}
    assert "manual" not in scheduled.entry.meta
    assert made.prompt == scheduled.prompt
