"""The API's answers as documented schemas (OpenAPI only: `views.py` renders the JSON).

These models describe what the routes return so that clients, and the schema fuzz test
(tests/integration/test_fuzz_api.py), can check the answers; they are never used to build one.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agentcron.domain.deliveries import DeliveryState
from agentcron.domain.jobs import Catchup, CreatedBy, JobKind, Overlap, RecallState
from agentcron.domain.sessions import TurnSource
from agentcron.domain.states import RunState, TurnState

Stamp = str | None  # an ISO 8601 instant ("...Z"), or null
Dict = dict[str, Any]


class ErrorOut(BaseModel):
    """Every 4xx: what kind of error, and what to fix."""

    error: str = Field(description="not_found, invalid_request, invalid_value, conflict, ...")
    detail: str | list[str] | Dict | None = Field(description="what to fix")


class ActiveRunOut(BaseModel):
    id: str
    state: RunState


class PolicyOut(BaseModel):
    overlap: Overlap
    catchup: Catchup
    catchup_window_s: int
    max_failures: int
    max_runs: int | None
    end_at: Stamp
    delete_after_run: bool
    jitter: bool


class JobOut(BaseModel):
    id: str
    name: str
    kind: JobKind
    session_key: str | None
    message: str
    spec: Dict
    schedule: str
    tz: str
    enabled: bool
    paused_reason: str | None
    paused_at: Stamp
    created_by: CreatedBy
    next_run_at: Stamp
    next_fire_at: Stamp
    last_run_at: Stamp
    last_status: RunState | None
    consecutive_failures: int
    run_count: int
    remaining_runs: int | None
    policy: PolicyOut
    idempotency_key: str | None
    model: str | None
    legacy: bool
    version: int
    created_at: Stamp
    updated_at: Stamp
    active_run: ActiveRunOut | None


class ToolCallOut(BaseModel):
    call_id: str
    name: str
    args: Dict = Field(description='the arguments (too long: {"_truncated": text})')
    result: str = Field(description="its result, or the error or denial text (truncated)")
    ok: bool = Field(description="false: the tool failed, or the call was denied")
    duration_ms: int | None
    truncated: bool | None = None


class RunOut(BaseModel):
    id: str
    job_id: str
    session_key: str | None
    fire_at: Stamp
    state: RunState
    claimed_at: Stamp
    queued_at: Stamp
    deferred_at: Stamp
    started_at: Stamp
    finished_at: Stamp
    prompt_ref: Dict | None
    output: str | None
    error: str | None
    message_id: str | None
    usage: Dict | None
    delivery: Dict | None
    tool_calls: list[ToolCallOut] | None = Field(
        description="a scheduled turn's tool calls, in order (null: none)"
    )


class RunFullOut(RunOut):
    prompt: str | None
    prompt_vars: Dict | None
    error_details: Dict | None
    owner: str | None
    lease_expires_at: Stamp


class JobDetailOut(JobOut):
    upcoming: list[str]
    runs: list[RunOut]
    usage: Dict


class JobsOut(BaseModel):
    jobs: list[JobOut]


class RunsOut(BaseModel):
    runs: list[RunOut]


class DeletedJobOut(BaseModel):
    deleted: str = Field(description="the id of the deleted job")


class SessionOut(BaseModel):
    key: str
    channel: str
    chat_id: str
    channel_meta: Dict | None
    title: str | None
    tz: str
    created_at: Stamp
    updated_at: Stamp


class SessionRowOut(SessionOut):
    automations: int
    has_recall: bool
    running_turn: str | None


class SessionsOut(BaseModel):
    sessions: list[SessionRowOut]


class SessionDetailOut(SessionOut):
    running_turn: str | None
    automations: list[JobOut]
    recall: JobOut | None
    usage: Dict


class EntryOut(BaseModel):
    id: str
    seq: int
    role: str
    content: str
    meta: Dict
    created_at: Stamp


class MessagesOut(BaseModel):
    session_key: str
    messages: list[EntryOut]
    next_after: int | None


class TurnStartedOut(BaseModel):
    turn_id: str
    session_key: str
    state: TurnState


class NoteOut(BaseModel):
    session_key: str
    turn_id: None
    message: EntryOut


class SentOut(BaseModel):
    session_key: str
    message: EntryOut


class TurnOut(BaseModel):
    id: str
    session_key: str
    source: TurnSource
    state: TurnState
    run_id: str | None
    content: str
    created_at: Stamp
    started_at: Stamp
    finished_at: Stamp
    error: str | None
    error_details: Dict | None
    usage: Dict | None
    reply_message_id: str | None


class TurnsOut(BaseModel):
    turns: list[TurnOut]


class TurnDetailOut(TurnOut):
    reply: str | None = Field(default=None, description="present once the turn has a reply")


class StopOut(BaseModel):
    stopped: bool
    turn_id: str | None


class BlockingJobOut(BaseModel):
    id: str
    name: str
    enabled: bool


class DeletionOut(BaseModel):
    deleted: bool
    blocked_by_automations: bool | None = Field(default=None, description="when not deleted")
    automations: list[BlockingJobOut] | None = Field(default=None, description="the blocking")
    deleted_automations: list[str] | None = Field(default=None, description="when deleted")


class RecallOut(BaseModel):
    id: str
    session_key: str
    state: RecallState
    name: str
    message: str
    spec: Dict
    schedule: str
    tz: str
    run_count: int
    last_run_at: Stamp
    last_status: RunState | None
    next_fire_at: Stamp
    created_at: Stamp
    ended_at: Stamp


class RecallsOut(BaseModel):
    recalls: list[RecallOut]


class PendingRecallOut(BaseModel):
    recall: JobOut | None


class SkippedRecallOut(BaseModel):
    recall: JobOut


class CancelledRecallOut(BaseModel):
    cancelled: str


class DeliveryOut(BaseModel):
    channel: str
    message_id: str
    session_key: str
    state: DeliveryState
    attempts: int
    last_error: str | None
    next_attempt_at: Stamp
    created_at: Stamp
    updated_at: Stamp
    delivered_at: Stamp


class DeliveriesOut(BaseModel):
    deliveries: list[DeliveryOut]
    next_cursor: str | None


class ChannelOut(BaseModel):
    name: str
    kind: str
    running: bool
    connected: bool
    healthy: bool
    last_error: str | None
    last_error_at: Stamp
    last_success_at: Stamp
    failed: int = Field(description="deliveries given up since start")


class ChannelsOut(BaseModel):
    channels: list[ChannelOut]


class HookOut(BaseModel):
    turn_id: str
    session_key: str


class HealthOut(BaseModel):
    status: str


class ReadyOut(BaseModel):
    status: str = Field(description="ready, or not ready (503)")
    problems: list[str]


class UsageOut(BaseModel):
    """Token and cost totals."""

    counted: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    unpriced: int


class ApprovalOut(BaseModel):
    id: str
    session_key: str | None
    turn_id: str | None
    tool: str
    args: Dict
    state: str = Field(description="pending, approved, denied or expired")
    requested_at: Stamp
    expires_at: Stamp
    decision: str | None = Field(description="approve or deny (an expired one: deny)")
    decided_by: str | None = Field(description="who decided (an expired one: timeout)")
    decided_at: Stamp


class ApprovalsOut(BaseModel):
    approvals: list[ApprovalOut]
