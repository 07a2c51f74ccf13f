"""Approvals of gated tool calls: list the pending ones, approve or deny one."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from agentcron import views
from agentcron.keys import MAX_SESSION_KEY
from agentcron.limits import NameText
from agentcron.server.deps import Cron, Id

router = APIRouter(prefix="/api/approvals", tags=["approvals"])


class ApprovalDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny"]
    by: NameText = Field(default="api", description="who decides (the model is told on a deny)")


@router.get("")
async def list_approvals(
    cron: Cron,
    session_key: str | None = Query(
        default=None, max_length=MAX_SESSION_KEY, description="one session's (default: all)"
    ),
    all: bool = Query(default=False, description="also the decided ones (the newest 500)"),
) -> dict[str, Any]:
    """Pending approvals of gated tool calls, oldest first (durable: after a restart, those
    whose turn it cut off are listed expired, `decided_by` "restart").
    """
    return views.approvals_answer(await cron.approvals.list(session_key, pending_only=not all))


@router.post("/{approval_id}")
async def decide_approval(approval_id: Id, body: ApprovalDecision, cron: Cron) -> dict[str, Any]:
    """Approve (the tool runs) or deny (the model is told "Denied by <by>."); the turn goes on.
    409 once decided or expired.
    """
    approval = await cron.approvals.decide(approval_id, body.decision, by=body.by)
    return views.approval_view(approval)
