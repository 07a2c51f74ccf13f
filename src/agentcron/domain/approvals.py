"""Tool policy and the approval record's state machine (pure: no agent framework, no I/O).

A tool call's policy is `allow` (run it), `deny` (the model is told "denied by policy") or
`approve` (a person decides). An approval goes pending -> approved | denied | expired; an
expired one counts as a denial ("timed out"). The model always gets an answer and the turn
goes on. The record is `Approval` (below); the broker that
writes it through the store and lets a gated call wait is `agentcron.service.approvals`; a gate
sees it as an `Approver`.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from agentcron.domain.grants import Grant, grant_decider
from agentcron.errors import AgentcronError

__all__ = [
    "CANCELLED_DECIDER",
    "DEFAULT_APPROVAL_TIMEOUT",
    "DENIED_BY_POLICY",
    "MAX_ARGS_CHARS",
    "RESTART_DECIDER",
    "SESSION_DELETED_DECIDER",
    "TIMEOUT_DECIDER",
    "Approval",
    "ApprovalError",
    "ApprovalNotFoundError",
    "ApprovalState",
    "Approver",
    "Decision",
    "Policy",
    "RequiresApproval",
    "approve_by_grant",
    "bounded_args",
    "decide",
    "denial_text",
    "expire",
    "new_approval",
    "resolve_policy",
]

Decision = Literal["approve", "deny"]


class ApprovalState(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class Approval:
    """One tool call waiting for (or past) a person's decision (its transitions are
    `agentcron.domain.approvals`).
    """

    id: str
    session_key: str | None
    turn_id: str | None
    tool: str
    args: dict[str, Any]
    requested_at: datetime
    expires_at: datetime
    state: ApprovalState = ApprovalState.PENDING
    decision: Decision | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    # The job whose scheduled run made the call (None: a message's turn, or no turn).
    job_id: str | None = None
    # The standing grant that approved it without a person (`domain/grants.py`).
    grant_id: str | None = None
    # When a person was reminded that a scheduled run still waits (at most once).
    reminded_at: datetime | None = None

    @property
    def pending(self) -> bool:
        return self.state is ApprovalState.PENDING


DEFAULT_APPROVAL_TIMEOUT = timedelta(minutes=5)
DENIED_BY_POLICY = "Denied by policy: this tool may not be called here."
TIMEOUT_DECIDER = "timeout"
CANCELLED_DECIDER = "cancelled"  # the turn that waited was stopped
# The process stopped while it waited: expired at the next start, or by the periodic reap of
# a live process once the dead one's turn was interrupted.
RESTART_DECIDER = "restart"
SESSION_DELETED_DECIDER = "session deleted"  # its session was deleted while it waited

MAX_ARGS_CHARS = 2_000  # a call's arguments as an approval keeps and shows them (JSON text)

Policy = Literal["allow", "approve", "deny"]
POLICIES: frozenset[str] = frozenset({"allow", "approve", "deny"})
# A tool's own say: always, never, or per call from its arguments.
RequiresApproval = bool | Callable[[dict[str, Any]], bool]


class ApprovalError(AgentcronError):
    """A decision the approval's state does not allow (already decided, or expired)."""


class ApprovalNotFoundError(ApprovalError, LookupError):
    """No approval has this id (never requested, or pruned long after its decision)."""


def resolve_policy(
    name: str,
    args: dict[str, Any],
    *,
    policies: Mapping[str, Policy] | None = None,
    requires_approval: RequiresApproval = False,
) -> Policy:
    """The policy of one call: the configured one for `name`, else `approve` when the tool
    requires approval (for these `args`), else `allow`.
    """
    configured = (policies or {}).get(name)
    if configured is not None:
        if configured not in POLICIES:
            raise ValueError(f"tool policy must be allow, approve or deny, got {configured!r}")
        return configured
    needs = requires_approval(args) if callable(requires_approval) else requires_approval
    return "approve" if needs else "allow"


def bounded_args(args: dict[str, Any], limit: int = MAX_ARGS_CHARS) -> dict[str, Any]:
    """A call's arguments as plain JSON (what is not JSON becomes its text), at most `limit`
    characters of it: longer ones become {"_truncated": the first `limit` characters + "…"}.
    """
    text = json.dumps(args, default=str)
    if len(text) > limit:
        return {"_truncated": text[:limit] + "…"}
    plain: dict[str, Any] = json.loads(text)
    return plain


def new_approval(
    *,
    tool: str,
    args: dict[str, Any],
    session_key: str | None,
    turn_id: str | None,
    now: datetime,
    timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
    approval_id: str,
    job_id: str | None = None,
) -> Approval:
    if timeout <= timedelta(0):
        raise ValueError(f"approval timeout must be positive, got {timeout}")
    return Approval(
        id=approval_id,
        session_key=session_key,
        turn_id=turn_id,
        tool=tool,
        args=dict(args),
        requested_at=now,
        expires_at=now + timeout,
        job_id=job_id,
    )


def approve_by_grant(approval: Approval, grant: Grant, *, at: datetime) -> Approval:
    """pending -> approved by a standing grant of its job (no person waited for); the record
    names the grant (`grant_id`, and `decided_by` "standing grant <id>").
    """
    if not approval.pending:
        raise ApprovalError(f"approval {approval.id} is already {approval.state.value}")
    if approval.job_id is None or approval.job_id != grant.job_id:
        raise ValueError("a standing grant approves only calls of its own job's runs")
    return replace(
        approval,
        state=ApprovalState.APPROVED,
        decision="approve",
        decided_by=grant_decider(grant),
        decided_at=at,
        grant_id=grant.id,
    )


def decide(approval: Approval, decision: Decision, *, by: str, at: datetime) -> Approval:
    """pending -> approved | denied. Raises ApprovalError once decided or past its expiry."""
    if decision not in ("approve", "deny"):
        raise ValueError(f"decision must be approve or deny, got {decision!r}")
    if not by.strip():
        raise ValueError("a decision needs who made it")
    if not approval.pending:
        raise ApprovalError(f"approval {approval.id} is already {approval.state.value}")
    if at >= approval.expires_at:
        raise ApprovalError(f"approval {approval.id} expired at {approval.expires_at.isoformat()}")
    state = ApprovalState.APPROVED if decision == "approve" else ApprovalState.DENIED
    return replace(approval, state=state, decision=decision, decided_by=by, decided_at=at)


def expire(approval: Approval, *, at: datetime, by: str = TIMEOUT_DECIDER) -> Approval:
    """pending -> expired (a denial by the timeout, or `by` "cancelled" when the turn waiting
    for it was stopped); any other state is kept as it is.
    """
    if not approval.pending:
        return approval
    return replace(
        approval,
        state=ApprovalState.EXPIRED,
        decision="deny",
        decided_by=by,
        decided_at=at,
    )


# What the model is told of an approval that ended without a person's decision, by its end.
_EXPIRED_TEXT = {
    CANCELLED_DECIDER: "Denied: the turn was stopped before a person decided.",
    RESTART_DECIDER: "Denied: the service restarted before a person decided.",
    SESSION_DELETED_DECIDER: "Denied: the session was deleted before a person decided.",
}


def denial_text(approval: Approval) -> str | None:
    """What the model is told instead of the tool's result; None when the call may run."""
    if approval.state is ApprovalState.APPROVED:
        return None
    if approval.state is ApprovalState.EXPIRED:
        return _EXPIRED_TEXT.get(
            approval.decided_by or "", "Denied: timed out waiting for a person's approval."
        )
    if approval.state is ApprovalState.DENIED:
        return f"Denied by {approval.decided_by}."
    return "Denied: no decision yet."


class Approver(Protocol):
    """What a gate asks when a call needs a person: it returns once the approval ended
    (approved, denied or expired), after at most `wait` (None: the approver's default).
    """

    async def request(
        self,
        *,
        tool: str,
        args: dict[str, Any],
        session_key: str | None,
        turn_id: str | None,
        wait: timedelta | None = None,
    ) -> Approval: ...
