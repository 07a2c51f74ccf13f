"""Typed events as the JSON frames of the WebSocket stream (the server owns the wire format).

Every frame has `type` and `session_key` ("" for an event of no session, e.g. an unbound job).
The shapes, one per event class:

- `StreamStart` -> `stream_start` {turn_id, source};
- `TextDelta` -> `text_delta` {text}; `ThinkingDelta` -> `thinking_delta` {text} (the model's
  reasoning, where it streams any; not part of the reply);
  `ToolStarted` -> `tool_started` {name, args}; `ToolCalled` -> `tool_call` {name, args, result};
- `ApprovalRequested` -> `approval_requested` {approval_id, turn_id, tool, args, expires_at};
  `ApprovalDecided` -> `approval_decided` {approval_id, turn_id, tool, state, decided_by}
  (state approved, denied or expired); `ApprovalReminder` -> `approval_reminder`
  {approval_id, turn_id, job_id, tool, expires_at} (for completeness: the stream does not send
  it; the channels carry it, the job's view shows the wait);
- `RunnerEvent` -> the runner's own dict, `{"type": name, **data}`, as runners emitted it;
- `StreamEnd` -> `stream_end` {turn_id, status, message_id};
- `SessionSync` -> `session_sync`; `SessionDeleted` -> `session_deleted`;
- `MessagePosted` -> `message` {message_id, role, content, meta};
- `JobEvent` -> `automation_update` / `recall_update` {action, job_id} and, when the event
  carries them, `run_id` and `status` (a fire's progress) and `job` (the job as it is now, in
  the API's shape, `views.JobOut`);
- `DeliverySucceeded` -> `delivery_succeeded` {channel, message_id, attempts, external_id,
  delivered_at};
  `DeliveryFailed` -> `delivery_failed` {channel, message_id, attempts, error, retryable}
  (retryable false: the delivery gave up);
- `SystemEventFired` -> `system_event` {job_id, run_id, name, text, source} (source `cron`);
- `JobOverdue` -> `job_overdue` {job_id, job_name, text, at, reason, due_at, run_id};
  `JobFailing` -> `job_failing` {job_id, job_name, text, at, failures};
  `JobRecovered` -> `job_recovered` {job_id, job_name, text, at, alert};
  `JobEnding` -> `job_ending` {job_id, job_name, text, at, end_at, remaining_runs} (the alerts
  of `service/alerts.py`, once per episode; times ISO 8601);
- `FireStarted` -> `fire_started` {job_id, run_id, lateness_s} (for completeness: the stream
  does not send it; clients see a fire as the job's `fired` update).

The frames are plain dicts built here (a text delta is on the hot path of a watched turn: no
model is validated for it); an embedded record is the JSON of its view model, as the API sends it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentcron.domain.events import (
    ApprovalDecided,
    ApprovalReminder,
    ApprovalRequested,
    DeliveryFailed,
    DeliverySucceeded,
    Event,
    FireStarted,
    JobAlert,
    JobBudgetReached,
    JobEnding,
    JobEvent,
    JobFailing,
    JobOverdue,
    JobRecovered,
    MessagePosted,
    RunnerEvent,
    SessionBudgetReached,
    SessionDeleted,
    SessionSync,
    StreamEnd,
    StreamStart,
    SystemEventFired,
    TextDelta,
    ThinkingDelta,
    ToolCalled,
    ToolStarted,
)
from agentcron.views import job_view


def event_json(event: Event) -> dict[str, Any]:
    """The JSON-ready dict of `event`, exactly as the WebSocket stream sends it."""
    body: dict[str, Any]
    match event:
        case StreamStart():
            body = {"turn_id": event.turn_id, "source": event.source}
        case TextDelta() | ThinkingDelta():
            body = {"text": event.text}
        case ToolStarted():
            body = {"name": event.name, "args": event.args}
        case ToolCalled():
            body = {"name": event.name, "args": event.args, "result": event.result}
        case ApprovalRequested():
            body = {
                "approval_id": event.approval_id,
                "turn_id": event.turn_id,
                "tool": event.tool,
                "args": event.args,
                "expires_at": event.expires_at,
            }
        case ApprovalDecided():
            body = {
                "approval_id": event.approval_id,
                "turn_id": event.turn_id,
                "tool": event.tool,
                "state": event.state,
                "decided_by": event.decided_by,
            }
        case ApprovalReminder():
            body = {
                "approval_id": event.approval_id,
                "turn_id": event.turn_id,
                "job_id": event.job_id,
                "tool": event.tool,
                "expires_at": event.expires_at,
            }
        case RunnerEvent():
            # The runner's dict as given; its own `type`/`session_key` cannot override ours.
            return {"type": event.name, **event.data, "session_key": event.session_key}
        case StreamEnd():
            body = {
                "turn_id": event.turn_id,
                "status": event.status,
                "message_id": event.message_id,
            }
        case SessionSync() | SessionDeleted():
            body = {}
        case MessagePosted():
            message = event.message
            body = {
                "message_id": message.id,
                "role": message.role,
                "content": message.content,
                "meta": message.meta,
            }
        case JobEvent():
            return _job_json(event)
        case DeliverySucceeded():
            at = event.delivered_at
            body = {
                "channel": event.channel,
                "message_id": event.message_id,
                "attempts": event.attempts,
                "external_id": event.external_id,
                "delivered_at": None if at is None else at.isoformat(),
            }
        case DeliveryFailed():
            body = {
                "channel": event.channel,
                "message_id": event.message_id,
                "attempts": event.attempts,
                "error": event.error,
                "retryable": event.retryable,
            }
        case SystemEventFired():
            body = {
                "job_id": event.job_id,
                "run_id": event.run_id,
                "name": event.name,
                "text": event.text,
                "source": event.source,
            }
        case JobAlert():
            body = _alert_json(event)
        case FireStarted():
            body = {"job_id": event.job_id, "run_id": event.run_id, "lateness_s": event.lateness_s}
        case JobBudgetReached() | SessionBudgetReached():
            body = {"job_id": event.job_id, "run_id": event.run_id, "reason": event.reason}
        case _:
            raise TypeError(f"no JSON form for {type(event).__name__}")
    return {"type": event.type, "session_key": event.session_key, **body}


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _alert_json(event: JobAlert) -> dict[str, Any]:
    body: dict[str, Any] = {
        "job_id": event.job_id,
        "job_name": event.job_name,
        "text": event.text,
        "at": event.at.isoformat(),
    }
    match event:
        case JobOverdue():
            body.update(reason=event.reason, due_at=_iso(event.due_at), run_id=event.run_id)
        case JobFailing():
            body["failures"] = event.failures
        case JobRecovered():
            body["alert"] = event.alert
        case JobEnding():
            body.update(end_at=_iso(event.end_at), remaining_runs=event.remaining_runs)
    return body


def _job_json(event: JobEvent) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": event.wire_type,
        "session_key": event.session_key,
        "action": event.action.value,
        "job_id": event.job_id,
    }
    if event.run_id is not None:
        body["run_id"] = event.run_id
    if event.status is not None:
        body["status"] = event.status
    if event.job is not None:
        body["job"] = job_view(event.job)
    return body
