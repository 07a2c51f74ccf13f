"""A fire's outcome through its job's notify policy (domain/notify.py): the one step a
session-bound fire (turns/turn_end.py) and a delivery job (engine/isolated.py) both take
before their outcome goes out.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from agentcron.agent.runner import Outcome, OutcomeStatus
from agentcron.domain.notify import (
    LOOKBACK,
    SETTLED_STATES,
    Held,
    Notify,
    delivery_record,
    hold_reason,
    last_delivered,
    strip_silent,
)
from agentcron.domain.runs import ClaimedFire, Run
from agentcron.store.interface import RunRecords


async def notify_outcome(
    runs: RunRecords, fire: ClaimedFire, outcome: Outcome
) -> tuple[Outcome, Held | None, dict[str, Any] | None]:
    """The fire's outcome without a silent sentinel (a silent reply with nothing after it is
    empty), why its job's policy holds it (None: it goes out), and what its run keeps of
    that (None: `always` and not silent, the run record as before notify).
    """
    text, silent = strip_silent(outcome.text)
    if silent:
        status = outcome.status
        if status is OutcomeStatus.SUCCEEDED and not text:
            status = OutcomeStatus.EMPTY
        outcome = replace(outcome, text=text or None, status=status)
    notify = fire.job.policy.notify
    if notify is Notify.ALWAYS and not silent:
        return outcome, None, None
    settled = outcome.status in (OutcomeStatus.SUCCEEDED, OutcomeStatus.EMPTY)
    last = None
    if notify is Notify.CHANGES and settled and not silent:
        found = await runs.list_runs(job_id=fire.job.id, states=SETTLED_STATES, limit=LOOKBACK)
        # The latest to end first (a fire deferred behind another ends after a later one).
        ended = sorted((r for r in found if r.finished_at is not None), key=_ended, reverse=True)
        last = last_delivered(ended)
    held = hold_reason(notify, outcome.text, silent=silent, settled=settled, last_delivered=last)
    return outcome, held, delivery_record(notify, held)


def _ended(run: Run) -> tuple[datetime, str]:
    return (run.finished_at or run.fire_at, run.id)
