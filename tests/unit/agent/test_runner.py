"""OutcomeStatus -> the state its turn and its run end in (agent/runner.py)."""

from __future__ import annotations

import pytest

from agentcron.agent.runner import (
    NO_RESULT,
    OutcomeStatus,
    ToolLog,
    ToolRecord,
    tool_ran,
    turn_tools,
)
from agentcron.domain.states import RunState, TurnState

# Written out by hand (not read from the module): a changed mapping fails here.
EXPECTED = {
    OutcomeStatus.SUCCEEDED: (TurnState.SUCCEEDED, RunState.SUCCEEDED),
    OutcomeStatus.FAILED: (TurnState.FAILED, RunState.FAILED),
    OutcomeStatus.EMPTY: (TurnState.EMPTY, RunState.EMPTY),
    OutcomeStatus.CANCELLED: (TurnState.CANCELLED, RunState.CANCELLED),
}


def test_every_member_is_covered() -> None:
    assert set(EXPECTED) == set(OutcomeStatus)


@pytest.mark.parametrize("status", list(OutcomeStatus))
def test_turn_state(status: OutcomeStatus) -> None:
    turn = status.turn_state
    assert turn is EXPECTED[status][0]
    assert turn.terminal


@pytest.mark.parametrize("status", list(OutcomeStatus))
def test_run_state(status: OutcomeStatus) -> None:
    run = status.run_state
    assert run is EXPECTED[status][1]
    assert run.terminal


def test_a_stopped_turn_is_cancelled_not_failed() -> None:
    assert OutcomeStatus.CANCELLED.turn_state is not TurnState.FAILED
    assert OutcomeStatus.CANCELLED.run_state is not RunState.FAILED


def test_no_outcome_maps_to_a_waiting_or_running_state() -> None:
    for status in OutcomeStatus:
        assert status.turn_state not in (TurnState.QUEUED, TurnState.DEFERRED, TurnState.RUNNING)
        assert status.run_state not in (RunState.CLAIMED, RunState.QUEUED, RunState.RUNNING)


def test_a_later_report_of_a_call_replaces_the_earlier_in_its_place() -> None:
    log = ToolLog()
    token = turn_tools.set(log)
    try:
        tool_ran(ToolRecord("a", "pay", {"amount": 5}, NO_RESULT, False))
        tool_ran(ToolRecord("b", "lookup", {"q": "x"}, NO_RESULT, False))
        tool_ran(ToolRecord("a", "pay", {"amount": 5}, "paid 5", True, 7))
    finally:
        turn_tools.reset(token)
    assert log.records == (
        ToolRecord("a", "pay", {"amount": 5}, "paid 5", True, 7),
        ToolRecord("b", "lookup", {"q": "x"}, NO_RESULT, False),
    )


def test_a_report_outside_a_turn_is_dropped() -> None:
    tool_ran(ToolRecord("a", "pay", {}, "paid", True))  # nothing to report to: no error
    assert turn_tools.get() is None
