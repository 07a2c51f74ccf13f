"""The states of runs and turns, and the one relation between them."""

from __future__ import annotations

import enum


class RunState(enum.StrEnum):
    CLAIMED = "claimed"
    QUEUED = "queued"
    DEFERRED = "deferred"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EMPTY = "empty"
    MISSED = "missed"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self not in ACTIVE_STATES


# The two ways a fire or turn is cut off (recorded as its error; never re-run), one text each.
STOPPED_MID_TURN = "interrupted: agentcron stopped while this turn was running; not re-run"
DIED_MID_TURN = "interrupted: the process running this turn stopped before it finished; not re-run"

ACTIVE_STATES = frozenset({RunState.CLAIMED, RunState.QUEUED, RunState.DEFERRED, RunState.RUNNING})
TERMINAL_STATES = frozenset(RunState) - ACTIVE_STATES


class TurnState(enum.StrEnum):
    QUEUED = "queued"
    DEFERRED = "deferred"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EMPTY = "empty"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    @property
    def terminal(self) -> bool:
        return self not in (TurnState.QUEUED, TurnState.DEFERRED, TurnState.RUNNING)

    @property
    def run_state(self) -> RunState:
        """The state a fire's run ends in when its turn ends in this one: a fire's turn and
        its run end together, in the same state. ValueError for a state that is not an end.
        """
        state = _RUN_END_OF_TURN_END.get(self)
        if state is None:
            raise ValueError(f"{self.value!r} is not an end state of a turn")
        return state


# The one relation between the two state sets (docs/architecture.md "Run and turn states"):
# a turn that ran ends in the same state as its run; a run has three more ends a turn never
# reaches (it was missed or skipped before its turn began: that turn is cancelled). A job whose
# gate is the whole job (`no_llm`) succeeds without its turn beginning: that turn succeeds.
_RUN_END_OF_TURN_END = {
    TurnState.SUCCEEDED: RunState.SUCCEEDED,
    TurnState.FAILED: RunState.FAILED,
    TurnState.EMPTY: RunState.EMPTY,
    TurnState.CANCELLED: RunState.CANCELLED,
    TurnState.INTERRUPTED: RunState.INTERRUPTED,
}
_TURN_END_OF_UNSTARTED_RUN = {
    RunState.SUCCEEDED: TurnState.SUCCEEDED,
    RunState.FAILED: TurnState.FAILED,
    RunState.CANCELLED: TurnState.CANCELLED,
    RunState.MISSED: TurnState.CANCELLED,
    RunState.SKIPPED: TurnState.CANCELLED,
    RunState.INTERRUPTED: TurnState.INTERRUPTED,
}


def unstarted_turn_end(state: RunState) -> TurnState:
    """The state a fire's turn ends in when its run ends in `state` before the turn began
    (missed after waiting, unrenderable prompt, session gone). ValueError for other states.
    """
    turn = _TURN_END_OF_UNSTARTED_RUN.get(state)
    if turn is None:
        raise ValueError(f"a run does not end in {state.value!r} before its turn began")
    return turn
