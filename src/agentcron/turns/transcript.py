"""What a turn writes to its session's transcript: readable trigger entries and closures."""

from __future__ import annotations

import logging
from typing import Any

from agentcron.agent.runner import Outcome, OutcomeStatus, TurnSource
from agentcron.domain.attachments import Attachment
from agentcron.limits import MAX_ATTACHMENTS

log = logging.getLogger(__name__)

# One text per way a turn can end without the runner's own answer.
INTERRUPTED_NOTICE = "This turn was interrupted because agentcron stopped."


def trigger_entry(
    source: TurnSource,
    *,
    job_id: str,
    job_name: str,
    run_id: str,
    message: str,
    prompt_ref: dict[str, Any],
) -> tuple[str, dict[str, Any]]:
    """The readable user-role entry a fire leaves (never the rendered internal prompt)."""
    if source is TurnSource.RECALL:
        content = f"Scheduled recall triggered: {job_name}"
        meta: dict[str, Any] = {"_recall_turn": True, "is_recall": True}
    else:
        content = f"Scheduled automation triggered: {job_name}\n\n{message}"
        meta = {"_automation_turn": True}
    meta.update(
        source=source.value,
        automation_id=job_id,
        automation_name=job_name,
        automation_run_id=run_id,
        automation_prompt_ref=prompt_ref,
    )
    return content, meta


_MAX_CAUSE = 200  # characters of a cause a notice says


def _short(error: str | None) -> str:
    """The kind of error only: details belong in the run record, not the transcript."""
    first = (error or "unknown error").splitlines()[0]
    kind = first.split(":", 1)[0].strip()
    return kind if 0 < len(kind) <= 60 else first[:60]


def _failure(outcome: Outcome) -> str:
    """What the failure notice says: the cause a runner gave for people (its error details'
    `cause`, e.g. "cannot reach the model at URL: Name or service not known"), else the kind
    of error.
    """
    kind = _short(outcome.error)
    cause = (outcome.error_details or {}).get("cause")
    if isinstance(cause, str) and cause.strip():
        return f"{kind}: {cause.strip().splitlines()[0][:_MAX_CAUSE]}"
    return kind


def closure(
    outcome: Outcome, source: TurnSource, *, name: str | None, run_id: str | None
) -> tuple[str, dict[str, Any]]:
    """The assistant-role entry that closes a turn: the reply, a short failure or empty notice."""
    scheduled = source in (TurnSource.AUTOMATION, TurnSource.RECALL)
    what = f"Scheduled {'recall' if source is TurnSource.RECALL else 'automation'} “{name}”"
    meta: dict[str, Any] = {"source": source.value, "status": outcome.status.value}
    if run_id is not None:
        meta["automation_run_id"] = run_id
    if outcome.status is OutcomeStatus.SUCCEEDED and outcome.text:
        files = reply_attachments(outcome)
        if files:  # what was sent with the reply, never the bytes
            meta["attachments"] = [a.describe() for a in files]
        return outcome.text, meta
    if outcome.status is OutcomeStatus.CANCELLED:
        meta["_status_notice"] = True
        if scheduled:
            return f"{what} was stopped.", meta
        return "This turn was stopped.", meta
    if outcome.status is OutcomeStatus.FAILED:
        meta["_status_notice"] = True
        if scheduled:
            return f"{what} failed ({_failure(outcome)}). Details are in its run record.", meta
        return f"This turn failed ({_failure(outcome)}).", meta
    meta["_status_notice"] = True
    if scheduled:
        return f"{what} ran and had nothing to report.", meta
    return "(no reply)", meta


def reply_attachments(outcome: Outcome) -> tuple[Attachment, ...]:
    """The files that go with a turn's reply: a succeeded reply's, at most MAX_ATTACHMENTS
    (the rest are dropped with a warning: a runner's bug must not fail its turn).
    """
    if outcome.status is not OutcomeStatus.SUCCEEDED or not outcome.text:
        return ()
    files = tuple(outcome.attachments)
    if len(files) > MAX_ATTACHMENTS:
        log.warning(
            "a reply's attachments past the first %d dropped",
            MAX_ATTACHMENTS,
            extra={"attachments": len(files)},
        )
    return files[:MAX_ATTACHMENTS]


def interrupted_entry(source: str, turn_id: str) -> tuple[str, dict[str, Any]]:
    """The visible closure of a turn cut off by a shutdown or a dead process (never re-run)."""
    meta = {"source": source, "status": "interrupted", "_status_notice": True, "turn_id": turn_id}
    return INTERRUPTED_NOTICE, meta
