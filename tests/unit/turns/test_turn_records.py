"""The writes that begin and end a session turn (sessions/turn_records.py): pure, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentcron.agent.runner import Outcome, TurnSource
from agentcron.domain.jobs import CreatedBy, Job, JobKind, JobPolicy
from agentcron.domain.runs import ClaimedFire
from agentcron.domain.states import RunState, TurnState
from agentcron.schedule import AtSpec
from agentcron.turns.fire_turn import fire_turn
from agentcron.turns.lane_queue import Pending
from agentcron.turns.turn_records import (
    closing_entry,
    end_record,
    log_context,
    opening_entry,
    start_record,
    unstarted_record,
)

T0 = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)


def _fire(*, delete_after_run: bool = False) -> ClaimedFire:
    job = Job(
        id="job1", name="daily monitor", kind=JobKind.AGENT_TURN, session_key="api:s",
        message="Check the build", spec=AtSpec(at=T0), enabled=True, paused_reason=None,
        paused_at=None, created_by=CreatedBy.USER,
        policy=JobPolicy(delete_after_run=delete_after_run), next_fire_at=None,
        next_run_at=None, last_run_at=None, last_status=None, consecutive_failures=0,
        run_count=1, remaining_runs=None, idempotency_key=None, lease_owner=None,
        lease_expires_at=None, version=2, created_at=T0, updated_at=T0,
    )  # fmt: skip
    return ClaimedFire(run_id="run1", job=job, fire_at=T0, turn_id="turn1", session_tz="UTC")


def _user() -> Pending:
    return Pending("turn9", TurnSource.USER, "hello there")


def _scheduled(**kw: bool) -> Pending:
    fire = _fire(**kw)
    return Pending("turn1", TurnSource.AUTOMATION, fire.job.message, fire)


def test_a_user_turn_opens_with_the_users_words_and_no_run() -> None:
    start = start_record("api:s", _user(), None, owner="me", now=T0, lease=LEASE)
    assert (start.session_key, start.turn_id, start.owner) == ("api:s", "turn9", "me")
    assert start.at == T0
    assert start.lease_until == T0 + LEASE
    assert start.entry.role == "user"
    assert start.entry.content == "hello there"
    assert start.entry.meta == {"source": "user", "turn_id": "turn9"}
    assert start.run is None


def test_a_fire_opens_with_its_trigger_entry_and_its_run_running_with_the_prompt() -> None:
    pending = _scheduled()
    prepared = fire_turn(pending.fire, pending.turn_id)  # type: ignore[arg-type]
    start = start_record("api:s", pending, prepared, owner="me", now=T0, lease=LEASE)
    assert start.entry == prepared.entry == opening_entry(pending, prepared)
    assert start.run is not None
    assert start.run.run_id == "run1"
    assert start.run.state is RunState.RUNNING
    assert start.run.prompt == prepared.prompt
    assert start.run.prompt_ref == prepared.prompt_ref


@pytest.mark.parametrize(
    ("outcome", "state"),
    [
        (Outcome.succeeded("done"), TurnState.SUCCEEDED),
        (Outcome.failed("boom"), TurnState.FAILED),
        (Outcome.empty(), TurnState.EMPTY),
        (Outcome.cancelled("stopped by the user"), TurnState.CANCELLED),
    ],
)
def test_a_fire_ends_its_turn_run_and_job_in_one_state(outcome: Outcome, state: TurnState) -> None:
    pending = _scheduled()
    entry = closing_entry(pending, outcome)
    end = end_record(
        "api:s", pending, outcome.status.turn_state, entry, outcome, owner="me", now=T0
    )
    assert end.state is state
    assert end.entry is entry
    assert entry.role == "assistant"
    assert entry.meta["turn_id"] == "turn1"
    assert end.run is not None
    assert end.outcome is not None
    assert end.run.state is state.run_state
    assert end.run.state.value == state.value
    assert end.outcome.status is end.run.state
    assert end.run.output == outcome.text
    assert end.error == end.run.error == end.outcome.error == outcome.error
    assert end.outcome.job_id == "job1"


def test_a_user_turn_ends_without_a_run_or_job_outcome() -> None:
    outcome = Outcome.succeeded("hi")
    end = end_record("api:s", _user(), TurnState.SUCCEEDED, None, outcome, owner="me", now=T0)
    assert end.run is None
    assert end.outcome is None
    assert end.entry is None


def test_the_closing_entry_of_a_fire_names_its_job_and_run() -> None:
    entry = closing_entry(_scheduled(), Outcome.failed("the model is down"))
    assert entry.meta["automation_run_id"] == "run1"
    assert entry.meta["status"] == "failed"
    assert "daily monitor" in entry.content  # a visible notice naming the job, never empty
    assert "the model is down" in entry.content


@pytest.mark.parametrize(
    ("run_state", "turn_state"),
    [
        (RunState.MISSED, TurnState.CANCELLED),
        (RunState.FAILED, TurnState.FAILED),
        (RunState.CANCELLED, TurnState.CANCELLED),
        (RunState.SKIPPED, TurnState.CANCELLED),  # its gate said no
        (RunState.SUCCEEDED, TurnState.SUCCEEDED),  # its gate was the whole job (no_llm)
    ],
)
def test_a_fire_whose_turn_never_began_ends_without_an_entry(
    run_state: RunState, turn_state: TurnState
) -> None:
    end = unstarted_record(
        "api:s", _scheduled(delete_after_run=True), run_state, "why", owner="me", now=T0
    )
    assert end.state is turn_state
    assert end.entry is None
    assert end.run is not None
    assert end.outcome is not None
    assert end.run.state is run_state
    assert end.outcome.status is run_state
    assert end.outcome.delete_after_run is True
    assert end.error == end.run.error == "why"


def test_a_run_that_cannot_end_before_its_turn_began_is_refused() -> None:
    with pytest.raises(ValueError, match="before its turn began"):
        unstarted_record("api:s", _scheduled(), RunState.EMPTY, "x", owner="me", now=T0)


def test_the_log_context_names_session_turn_job_and_run() -> None:
    assert log_context("api:s", _scheduled()) == {
        "session_key": "api:s",
        "turn_id": "turn1",
        "job_id": "job1",
        "run_id": "run1",
    }
    assert log_context("api:s", _user())["job_id"] is None
