"""The paths of jobs that are not session turns: legacy unbound jobs and system jobs (seed 001).

A legacy unbound job (no `session_key`) keeps the old behaviour: an isolated run whose result
goes through an evaluate step and, when it passes, to the job's legacy target (`channel`/`to`).
Its memory is its own session `cron:{job_id}` (seed 001): the run reads its history from there
and saves the exchange there (when the runner keeps history at all).
A system job (`system_event`: heartbeat, dream, ...) runs through the handler registered for its
name. Neither writes into a user's session as a turn; bound jobs never come here.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agentcron.agent.runner import HistoryEntry, Outcome, OutcomeStatus, Trigger
from agentcron.store.models import Entry, Job
from agentcron.store.writes import Remember

SystemHandler = Callable[[Trigger], Awaitable[Outcome | str | None]]
"""Runs one fire of a system job: text = succeeded, None/"" = empty, raise = failed."""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The evaluate step's verdict on a legacy run's result."""

    deliver: bool
    reason: str


Evaluator = Callable[[Job, Outcome], Awaitable[Evaluation] | Evaluation]
"""Decides whether a legacy run's result is worth delivering (e.g. a small LLM check)."""

MemoryReader = Callable[[str], Awaitable[list[HistoryEntry]]]
"""Reads a legacy job's memory: the newest history of its own session (`cron:{job_id}`)."""

# Answers that mean "nothing happened"; delivering them would only be noise.
_NOTHING = re.compile(
    r"^\W*(?:nothing(?:\s+new)?\s+to\s+report|no\s+(?:news|updates?|changes?)|all\s+(?:good|clear)"
    r"|n/?a|none|heartbeat_ok|ok)\W*$",
    re.IGNORECASE,
)


def evaluate_response(job: Job, outcome: Outcome) -> Evaluation:
    """The default evaluate step: deliver a real answer to a target the job asked for."""
    if not job.deliver:
        return Evaluation(False, "delivery is off for this job")
    if not (job.channel and job.to):
        return Evaluation(False, "the job has no legacy target (channel and to)")
    if outcome.status is OutcomeStatus.FAILED:
        return Evaluation(False, "the run failed; the error is in the run record")
    text = (outcome.text or "").strip()
    if outcome.status is OutcomeStatus.EMPTY or not text:
        return Evaluation(False, "the run had no result")
    if _NOTHING.match(text):
        return Evaluation(False, "the result says there is nothing to report")
    return Evaluation(True, "a result for the job's target")


async def evaluate(evaluator: Evaluator, job: Job, outcome: Outcome) -> Evaluation:
    verdict = evaluator(job, outcome)
    if inspect.isawaitable(verdict):
        verdict = await verdict
    if not isinstance(verdict, Evaluation):
        raise TypeError(f"an evaluator must return an Evaluation, not {type(verdict).__name__}")
    return verdict


def legacy_target_key(job: Job) -> str:
    """The session a legacy target names: the chat `to` on `channel`."""
    return f"{job.channel}:{job.to}"


def delivery_meta(job: Job, run_id: str) -> dict[str, Any]:
    """Metadata of a delivered legacy result in the target's transcript."""
    return {
        "source": "legacy_automation",
        "_legacy_delivery": True,
        "automation_id": job.id,
        "automation_name": job.name,
        "automation_run_id": run_id,
    }


def memory_key(job: Job) -> str:
    """The session that holds a legacy job's own memory."""
    return f"cron:{job.id}"


def remember_exchange(job: Job, run_id: str, prompt: str, outcome: Outcome) -> Remember | None:
    """What a legacy run saves in its memory: the prompt as the user's entry and the result
    as the assistant's, for a run that answered; nothing for a failed or empty one (its
    record is the run).
    """
    text = (outcome.text or "").strip()
    if outcome.status is not OutcomeStatus.SUCCEEDED or not text:
        return None
    meta = {
        "source": "legacy_automation",
        "automation_id": job.id,
        "automation_name": job.name,
        "automation_run_id": run_id,
    }
    return Remember(
        memory_key(job),
        "cron",
        job.id,
        (Entry("user", prompt, meta), Entry("assistant", outcome.text or "", meta)),
    )
