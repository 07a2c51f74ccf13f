"""Speak only when it matters: a job's notify policy decides whether a fire's outcome is
delivered (pure, no I/O). Every outcome is recorded; only its delivery is held.

An outcome is silent when the agent's reply starts with `SILENT_SENTINEL` ("[SILENT]"): the
sentinel is stripped from what is kept and shown, and the outcome is never delivered. Then
`changes` holds an outcome equal to the job's last delivered one, and `never-empty` an empty
one. Failures and stops are always delivered: a person must hear about them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from agentcron.domain.states import RunState

if TYPE_CHECKING:  # runs -> jobs -> notify: the type only
    from agentcron.domain.runs import Run

SILENT_SENTINEL = "[SILENT]"


class Notify(enum.StrEnum):
    """When a job's outcomes are delivered (a silent outcome never is)."""

    ALWAYS = "always"  # every outcome (the default)
    CHANGES = "changes"  # not one equal to the last delivered outcome
    NEVER_EMPTY = "never-empty"  # not an empty one


class Held(enum.StrEnum):
    """Why an outcome was recorded but not delivered."""

    SILENT = "silent"  # the agent marked it silent
    UNCHANGED = "unchanged"  # `changes`: the same as the last delivered outcome
    EMPTY = "empty"  # `never-empty`: nothing to report
    QUIET = "quiet"  # its session's quiet hours, and its job's quiet = silent (domain/quiet.py)


# What a fire's prompt adds for a job whose policy holds some outcomes (`changes`,
# `never-empty`): the agent may mark an answer silent. A job that sends every outcome gets
# nothing added (its prompt reads as it always did).
_SILENT_HINTS = {
    Notify.CHANGES: "This automation sends a result only when it differs from the last one sent.",
    Notify.NEVER_EMPTY: "This automation sends no empty result.",
}


def silent_hint(notify: Notify) -> str:
    """The lines a fire's prompt adds about the silent sentinel (a leading newline), or ""
    for `always`.
    """
    said = _SILENT_HINTS.get(notify)
    if said is None:
        return ""
    return (
        f"\n{said} If nothing is worth telling the user this time, start your answer with "
        f"{SILENT_SENTINEL}: it is kept on the run and never sent."
    )


def strip_silent(text: str | None) -> tuple[str | None, bool]:
    """The reply without a leading silent sentinel, and whether it had one (leading blanks
    before the sentinel are allowed; the sentinel is matched exactly, case included).
    """
    if text is None:
        return None, False
    body = text.lstrip()
    if not body.startswith(SILENT_SENTINEL):
        return text, False
    return body[len(SILENT_SENTINEL) :].strip(), True


def hold_reason(
    notify: Notify,
    text: str | None,
    *,
    silent: bool,
    settled: bool,
    last_delivered: str | None,
) -> Held | None:
    """Why this outcome is not delivered, or None when it is. `settled`: it succeeded or was
    empty (a failure or a stop is always delivered, unless the agent marked it silent);
    `last_delivered`: the text of the job's last delivered outcome (None: none yet).
    """
    if silent:
        return Held.SILENT
    if not settled:
        return None
    empty = not (text or "").strip()
    if notify is Notify.NEVER_EMPTY and empty:
        return Held.EMPTY
    unchanged = last_delivered is not None and (text or "").strip() == last_delivered.strip()
    if notify is Notify.CHANGES and unchanged:
        return Held.UNCHANGED
    return None


def delivery_record(notify: Notify, held: Held | None) -> dict[str, Any]:
    """What a session-bound fire's run keeps about its delivery (the run's `delivery`)."""
    record: dict[str, Any] = {"notify": notify.value, "delivered": held is None}
    if held is not None:
        record["held"] = held.value
    return record


# States whose outcome `changes` compares with (a failure or a stop is not an outcome to hold).
SETTLED_STATES = (RunState.SUCCEEDED, RunState.EMPTY)
# How many of a job's latest settled runs `changes` looks through for its last delivered one.
LOOKBACK = 50


def last_delivered(runs: Iterable[Run]) -> str | None:
    """The text of the newest outcome that went out among `runs` (newest first): one
    delivered (no record: a run from before notify) or held as unchanged (equal to the one
    that went out). None: none in sight (then nothing is held as unchanged).
    """
    for run in runs:
        if run.state not in SETTLED_STATES:
            continue
        record = run.delivery
        if (
            record is None
            or record.get("delivered") is True
            or record.get("held") == Held.UNCHANGED
        ):
            return run.output or ""
    return None
