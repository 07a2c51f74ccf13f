"""Approvals of gated tool calls: list the pending ones, approve or deny one.

`POST /api/approvals/{id}/decide?token=` is outside the API token: the webhook's decision URL,
authorized by the approval's own capability token (`agentcron.approval_links`).
"""

from __future__ import annotations

import logging
from typing import Literal

from fastapi import APIRouter, HTTPException, Query, Request, status
from pydantic import BaseModel, ConfigDict, Field

from agentcron.approval_links import MAX_TOKEN, ApprovalLinks
from agentcron.limits import NameText
from agentcron.server.deps import Cron, Cursor, Id, Limit
from agentcron.server.errors import CHANGE, answers
from agentcron.service.paging import DEFAULT_PAGE
from agentcron.session_keys import MAX_SESSION_KEY
from agentcron.views import ApprovalOut, ApprovalsOut

log = logging.getLogger(__name__)
router = APIRouter(prefix="/api/approvals", tags=["approvals"])
# Included without the API token: the capability token of one approval authorizes it.
capability_router = APIRouter(prefix="/api/approvals", tags=["approvals"])


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
    all: bool = Query(default=False, description="every one, decided too, newest first"),
    limit: Limit = DEFAULT_PAGE,
    cursor: Cursor = None,
) -> ApprovalsOut:
    """Pending approvals of gated tool calls, oldest first (durable: after a restart, those
    whose turn it cut off are listed expired, `decided_by` "restart"); with `all`, every
    approval newest first. `next_cursor` is null on the last page.
    """
    page = await cron.approvals.page(session_key, pending_only=not all, limit=limit, cursor=cursor)
    return ApprovalsOut.of_page(page)


@router.get("/{approval_id}", responses=answers(404))
async def get_approval(approval_id: Id, cron: Cron) -> ApprovalOut:
    """One approval, pending or decided (404 unknown)."""
    return ApprovalOut.of(await cron.approvals.get(approval_id))


@router.post("/{approval_id}", responses=answers(404, *CHANGE))
async def decide_approval(approval_id: Id, body: ApprovalDecision, cron: Cron) -> ApprovalOut:
    """Approve (the tool runs) or deny (the model is told "Denied by <by>."); the turn goes on.
    409 once decided or expired.
    """
    return ApprovalOut.of(await cron.approvals.decide(approval_id, body.decision, by=body.by))


class LinkDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny"]
    by: NameText | None = Field(
        default=None, description="who decides; recorded as webhook:<by> (default: webhook)"
    )


# No API token here (no 401): a missing or wrong capability token is a 403.
@capability_router.post("/{approval_id}/decide", responses=answers(403, 404, 422, *CHANGE))
async def decide_by_link(
    approval_id: Id,
    body: LinkDecision,
    cron: Cron,
    request: Request,
    token: str | None = Query(
        default=None,
        max_length=MAX_TOKEN,
        description="the approval's capability token, as in the webhook's decision_url",
    ),
) -> ApprovalOut:
    """Decide one approval with its decision URL (no API token): 403 for a missing or wrong
    token, 404 unknown, 409 once decided or expired.
    """
    links: ApprovalLinks = request.app.state.approval_links
    if not links.verify(approval_id, token):
        log.warning("approval decision refused: wrong token", extra={"approval_id": approval_id})
        raise HTTPException(
            status.HTTP_403_FORBIDDEN,
            "this decision URL's token is not valid for this approval (use the decision_url "
            "of its approval_requested webhook as given)",
        )
    by = "webhook" if body.by is None else f"webhook:{body.by}"
    return ApprovalOut.of(await cron.approvals.decide(approval_id, body.decision, by=by))
