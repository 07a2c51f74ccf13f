"""A job's notify policy (pure): the silent sentinel, why an outcome is held, what its run keeps
and which earlier outcome counts as the last delivered one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agentcron.domain.notify import (
    Held,
    Notify,
    delivery_record,
    hold_reason,
    last_delivered,
    silent_hint,
    strip_silent,
)
from agentcron.domain.runs import Run
from agentcron.domain.states import RunState

T0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, (None, False)),
        ("all good", ("all good", False)),
        ("[SILENT]", ("", True)),
        ("[SILENT] nothing new", ("nothing new", True)),
        ("  \n[SILENT]\nstill 3 open", ("still 3 open", True)),
        ("[silent] lower case is a reply", ("[silent] lower case is a reply", False)),
        ("ends with [SILENT]", ("ends with [SILENT]", False)),
    ],
)
def test_the_sentinel_is_stripped_only_at_the_start(
    text: str | None, expected: tuple[str | None, bool]
) -> None:
    assert strip_silent(text) == expected


@pytest.mark.parametrize(
    ("notify", "text", "silent", "settled", "last", "held"),
    [
        (Notify.ALWAYS, "x", False, True, "x", None),
        (Notify.ALWAYS, "", False, True, None, None),
        (Notify.ALWAYS, "x", True, True, None, Held.SILENT),
        (Notify.CHANGES, "x", False, True, None, None),  # nothing delivered yet
        (Notify.CHANGES, "x", False, True, " x\n", Held.UNCHANGED),
        (Notify.CHANGES, "y", False, True, "x", None),
        (Notify.CHANGES, "x", False, False, "x", None),  # a failure always goes out
        (Notify.NEVER_EMPTY, "  ", False, True, None, Held.EMPTY),
        (Notify.NEVER_EMPTY, None, False, True, None, Held.EMPTY),
        (Notify.NEVER_EMPTY, "x", False, True, None, None),
        (Notify.NEVER_EMPTY, "x", True, False, None, Held.SILENT),
    ],
)
def test_why_an_outcome_is_held(
    notify: Notify, text: str | None, silent: bool, settled: bool, last: str | None,
    held: Held | None,
) -> None:  # fmt: skip
    reason = hold_reason(notify, text, silent=silent, settled=settled, last_delivered=last)
    assert reason is held


def test_the_run_keeps_the_policy_and_why() -> None:
    assert delivery_record(Notify.CHANGES, None) == {"notify": "changes", "delivered": True}
    assert delivery_record(Notify.ALWAYS, Held.SILENT) == {
        "notify": "always", "delivered": False, "held": "silent",
    }  # fmt: skip


def run(state: RunState, output: str | None, delivery: dict[str, Any] | None) -> Run:
    return Run(
        id="r", job_id="j", session_key=None, fire_at=T0, state=state, owner=None,
        lease_expires_at=None, claimed_at=None, queued_at=None, deferred_at=None,
        started_at=None, finished_at=T0, output=output, delivery=delivery,
    )  # fmt: skip


def test_the_last_delivered_outcome_skips_held_and_failed_runs() -> None:
    silent = {"notify": "changes", "delivered": False, "held": "silent"}
    refused = {"evaluated": {"deliver": False, "reason": "no"}, "delivered": False}
    newest_first = [
        run(RunState.FAILED, None, None),  # not an outcome to compare with
        run(RunState.SUCCEEDED, "quiet", silent),
        run(RunState.SUCCEEDED, "not sent", refused),  # a delivery job's evaluate said no
        run(RunState.SUCCEEDED, "B", {"notify": "changes", "delivered": False,
                                      "held": "unchanged"}),  # equal to the one that went out
        run(RunState.SUCCEEDED, "A", {"notify": "changes", "delivered": True}),
    ]  # fmt: skip
    assert last_delivered(newest_first) == "B"
    assert last_delivered(newest_first[:3]) is None
    # A run from before notify (no record) went out; an empty one compares as "".
    assert last_delivered([run(RunState.EMPTY, None, None)]) == ""
    assert last_delivered([run(RunState.SUCCEEDED, "old", None)]) == "old"


def test_the_prompt_hint_names_the_sentinel_only_for_a_policy_that_holds() -> None:
    assert silent_hint(Notify.ALWAYS) == ""
    for notify in (Notify.CHANGES, Notify.NEVER_EMPTY):
        hint = silent_hint(notify)
        assert hint.startswith("\n")
        assert "[SILENT]" in hint
    assert "differs from the last one" in silent_hint(Notify.CHANGES)
    assert "no empty result" in silent_hint(Notify.NEVER_EMPTY)
