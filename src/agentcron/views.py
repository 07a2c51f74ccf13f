"""The API's JSON: records and the services' read models as the HTTP API, the WebSocket events
and the CLI's --json output show them (one shape whichever edge answers).

The services answer with domain records and read models; only the edges turn them into JSON,
through these functions. It sits beside the services rather than in `server/` because the
CLI's database mode prints the same JSON without importing the server.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentcron.domain.approvals import Approval
from agentcron.domain.deliveries import Delivery
from agentcron.domain.jobs import Job, Recall
from agentcron.domain.runs import Run
from agentcron.domain.sessions import Message, Session, Turn
from agentcron.schedule import describe
from agentcron.service.jobs import JobDetail, JobState
from agentcron.service.sessions import Deletion, SessionDetail, SessionRow, TurnDetail


def iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def job_view(job: Job, *, active_run: Run | None = None) -> dict[str, Any]:
    policy = job.policy
    return {
        "id": job.id,
        "name": job.name,
        "kind": job.kind.value,
        "session_key": job.session_key,
        "message": job.message,
        "spec": job.spec.model_dump(mode="json"),
        "schedule": describe(job.spec),
        "tz": job.spec.tz,
        "enabled": job.enabled,
        "paused_reason": job.paused_reason,
        "paused_at": iso(job.paused_at),
        "created_by": job.created_by.value,
        "next_run_at": iso(job.next_run_at),
        "next_fire_at": iso(job.next_fire_at),
        "last_run_at": iso(job.last_run_at),
        "last_status": job.last_status.value if job.last_status else None,
        "consecutive_failures": job.consecutive_failures,
        "run_count": job.run_count,
        "remaining_runs": job.remaining_runs,
        "policy": {
            "overlap": policy.overlap.value,
            "catchup": policy.catchup.value,
            "catchup_window_s": int(policy.catchup_window.total_seconds()),
            "max_failures": policy.max_failures,
            "max_runs": policy.max_runs,
            "end_at": iso(policy.end_at),
            "delete_after_run": policy.delete_after_run,
            "jitter": policy.jitter,
        },
        "idempotency_key": job.idempotency_key,
        "model": job.model,
        "legacy": job.has_target_fields,  # wire key keeps its old name
        "version": job.version,
        "created_at": iso(job.created_at),
        "updated_at": iso(job.updated_at),
        # a fire of this job waiting (queued / deferred behind a turn) or running right now
        "active_run": None
        if active_run is None
        else {"id": active_run.id, "state": active_run.state.value},
    }


def recall_view(recall: Recall) -> dict[str, Any]:
    """A session's recall: pending (with its next fire) or ended (fired / cancelled, when)."""
    return {
        "id": recall.id,
        "session_key": recall.session_key,
        "state": recall.state.value,
        "name": recall.name,
        "message": recall.message,
        "spec": recall.spec.model_dump(mode="json"),
        "schedule": describe(recall.spec),
        "tz": recall.spec.tz,
        "run_count": recall.run_count,
        "last_run_at": iso(recall.last_run_at),
        "last_status": recall.last_status.value if recall.last_status else None,
        "next_fire_at": iso(recall.next_fire_at),
        "created_at": iso(recall.created_at),
        "ended_at": iso(recall.ended_at),
    }


def run_view(run: Run, *, full: bool = False) -> dict[str, Any]:
    """A run record; `full` adds the rendered prompt, its variables and the error details."""
    view: dict[str, Any] = {
        "id": run.id,
        "job_id": run.job_id,
        "session_key": run.session_key,
        "fire_at": iso(run.fire_at),
        "state": run.state.value,
        "claimed_at": iso(run.claimed_at),
        "queued_at": iso(run.queued_at),
        "deferred_at": iso(run.deferred_at),
        "started_at": iso(run.started_at),
        "finished_at": iso(run.finished_at),
        "prompt_ref": run.prompt_ref,
        "output": run.output,
        "error": run.error,
        "message_id": run.message_id,
        "usage": run.usage,
        "delivery": run.delivery,
        "tool_calls": run.tool_calls,
    }
    if full:
        view.update(
            prompt=run.prompt,
            prompt_vars=run.prompt_vars,
            error_details=run.error_details,
            owner=run.owner,
            lease_expires_at=iso(run.lease_expires_at),
        )
    return view


def session_view(session: Session, **extra: Any) -> dict[str, Any]:
    return {
        "key": session.key,
        "channel": session.channel,
        "chat_id": session.chat_id,
        "channel_meta": session.channel_meta,
        "title": session.title,
        "tz": session.tz,
        "created_at": iso(session.created_at),
        "updated_at": iso(session.updated_at),
        **extra,
    }


def message_view(message: Message) -> dict[str, Any]:
    return {
        "id": message.id,
        "seq": message.seq,
        "role": message.role,
        "content": message.content,
        "meta": message.meta,
        "created_at": iso(message.created_at),
    }


def turn_view(turn: Turn) -> dict[str, Any]:
    return {
        "id": turn.id,
        "session_key": turn.session_key,
        "source": turn.source,
        "state": turn.state.value,
        "run_id": turn.run_id,
        "content": turn.content,
        "created_at": iso(turn.created_at),
        "started_at": iso(turn.started_at),
        "finished_at": iso(turn.finished_at),
        "error": turn.error,
        "error_details": turn.error_details,
        "usage": turn.usage,
        "reply_message_id": turn.reply_message_id,
    }


def delivery_view(delivery: Delivery) -> dict[str, Any]:
    """A delivery record, without its payload (the message is in the transcript)."""
    return {
        "channel": delivery.channel,
        "message_id": delivery.message_id,
        "session_key": delivery.session_key,
        "state": delivery.state.value,
        "attempts": delivery.attempts,
        "last_error": delivery.last_error,
        "next_attempt_at": iso(delivery.next_attempt_at),
        "created_at": iso(delivery.created_at),
        "updated_at": iso(delivery.updated_at),
        "delivered_at": iso(delivery.delivered_at),
    }


def job_state_view(state: JobState) -> dict[str, Any]:
    return job_view(state.job, active_run=state.active_run)


def jobs_answer(states: list[JobState]) -> dict[str, Any]:
    return {"jobs": [job_state_view(s) for s in states]}


def job_detail_view(detail: JobDetail) -> dict[str, Any]:
    return {
        **job_state_view(detail.state),
        "upcoming": [iso(f) for f in detail.upcoming],
        "runs": [run_view(r) for r in detail.runs],
        "usage": detail.usage,
    }


def runs_answer(runs: list[Run]) -> dict[str, Any]:
    return {"runs": [run_view(r) for r in runs]}


def session_row_view(row: SessionRow) -> dict[str, Any]:
    return session_view(
        row.session,
        automations=row.automations,
        has_recall=row.has_recall,
        running_turn=row.running_turn,
    )


def sessions_answer(rows: list[SessionRow]) -> dict[str, Any]:
    return {"sessions": [session_row_view(r) for r in rows]}


def session_detail_view(detail: SessionDetail) -> dict[str, Any]:
    return session_view(
        detail.session,
        running_turn=detail.running_turn,
        automations=[job_state_view(s) for s in detail.automations],
        recall=None if detail.recall is None else job_view(detail.recall),
        usage=detail.usage,
    )


def messages_answer(key: str, messages: list[Message], after: int | None) -> dict[str, Any]:
    return {
        "session_key": key,
        "messages": [message_view(m) for m in messages],
        "next_after": messages[-1].seq if messages else after,
    }


def turn_started_answer(turn: Turn) -> dict[str, Any]:
    """A message accepted as a turn (202)."""
    return {"turn_id": turn.id, "session_key": turn.session_key, "state": turn.state.value}


def note_answer(message: Message) -> dict[str, Any]:
    """A note stored without a turn (201)."""
    return {"session_key": message.session_key, "turn_id": None, "message": message_view(message)}


def sent_answer(message: Message) -> dict[str, Any]:
    """A message sent out through the session's channel without the agent."""
    return {"session_key": message.session_key, "message": message_view(message)}


def deletion_view(deletion: Deletion) -> dict[str, Any]:
    if not deletion.deleted:
        return {
            "deleted": False,
            "blocked_by_automations": True,
            "automations": [
                {"id": j.id, "name": j.name, "enabled": j.enabled} for j in deletion.blocking
            ],
        }
    return {"deleted": True, "deleted_automations": deletion.deleted_automations}


def turn_detail_view(detail: TurnDetail) -> dict[str, Any]:
    view = turn_view(detail.turn)
    if detail.turn.reply_message_id is not None:
        view["reply"] = detail.reply
    return view


def approval_view(approval: Approval) -> dict[str, Any]:
    return {
        "id": approval.id,
        "session_key": approval.session_key,
        "turn_id": approval.turn_id,
        "tool": approval.tool,
        "args": approval.args,
        "state": approval.state.value,
        "requested_at": iso(approval.requested_at),
        "expires_at": iso(approval.expires_at),
        "decision": approval.decision,
        "decided_by": approval.decided_by,
        "decided_at": iso(approval.decided_at),
    }


def approvals_answer(approvals: list[Approval]) -> dict[str, Any]:
    return {"approvals": [approval_view(a) for a in approvals]}
