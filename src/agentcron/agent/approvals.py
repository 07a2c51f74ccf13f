"""Tool policy and the approval record's state machine (pure: no agent framework, no I/O).

A tool call's policy is `allow` (run it), `deny` (the model is told "denied by policy") or
`approve` (a person decides). An approval goes pending -> approved | denied | expired; an
expired one counts as a denial ("timed out"). The model always gets an answer and the turn
goes on. `ApprovalBroker` keeps approvals in memory and lets a gated call wait for its decision.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from agentcron.errors import AgentcronError

__all__ = [
    "CANCELLED_DECIDER",
    "DEFAULT_APPROVAL_TIMEOUT",
    "DENIED_BY_POLICY",
    "TIMEOUT_DECIDER",
    "Approval",
    "ApprovalBroker",
    "ApprovalError",
    "ApprovalNotFoundError",
    "ApprovalState",
    "Decision",
    "Policy",
    "RequiresApproval",
    "decide",
    "denial_text",
    "expire",
    "new_approval",
    "resolve_policy",
]

DEFAULT_APPROVAL_TIMEOUT = timedelta(minutes=5)
DENIED_BY_POLICY = "Denied by policy: this tool may not be called here."
TIMEOUT_DECIDER = "timeout"
CANCELLED_DECIDER = "cancelled"  # the turn that waited was stopped
_KEEP_DECIDED = 500  # decided approvals kept in memory for listing (oldest dropped first)

Policy = Literal["allow", "approve", "deny"]
Decision = Literal["approve", "deny"]
POLICIES: frozenset[str] = frozenset({"allow", "approve", "deny"})
# A tool's own say: always, never, or per call from its arguments.
RequiresApproval = bool | Callable[[dict[str, Any]], bool]


class ApprovalError(AgentcronError):
    """A decision the approval's state does not allow (already decided, or expired)."""


class ApprovalNotFoundError(ApprovalError, LookupError):
    """No approval has this id (never requested, or forgotten: they live in memory)."""


class ApprovalState(enum.StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"


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


@dataclass(frozen=True, slots=True)
class Approval:
    """One tool call waiting for (or past) a person's decision."""

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

    @property
    def pending(self) -> bool:
        return self.state is ApprovalState.PENDING


def new_approval(
    *,
    tool: str,
    args: dict[str, Any],
    session_key: str | None,
    turn_id: str | None,
    now: datetime,
    timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
    approval_id: str | None = None,
) -> Approval:
    if timeout <= timedelta(0):
        raise ValueError(f"approval timeout must be positive, got {timeout}")
    return Approval(
        id=approval_id or str(uuid.uuid4()),
        session_key=session_key,
        turn_id=turn_id,
        tool=tool,
        args=dict(args),
        requested_at=now,
        expires_at=now + timeout,
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


def denial_text(approval: Approval) -> str | None:
    """What the model is told instead of the tool's result; None when the call may run."""
    if approval.state is ApprovalState.APPROVED:
        return None
    if approval.state is ApprovalState.EXPIRED:
        return "Denied: timed out waiting for a person's approval."
    if approval.state is ApprovalState.DENIED:
        return f"Denied by {approval.decided_by}."
    return "Denied: no decision yet."


class ApprovalBroker:
    """Approvals in memory: a gated call waits in `request` until `decide` or the timeout.

    `now` is the clock of the records' times; the wait itself is real time (`timeout`).
    """

    def __init__(
        self,
        now: Callable[[], datetime],
        *,
        timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
        on_change: Callable[[Approval], Awaitable[None] | None] | None = None,
    ) -> None:
        if timeout <= timedelta(0):
            raise ValueError(f"approval timeout must be positive, got {timeout}")
        self._now = now
        self.timeout = timeout
        self._on_change = on_change
        self._approvals: dict[str, Approval] = {}
        self._waiting: dict[str, asyncio.Event] = {}

    async def _put(self, approval: Approval) -> Approval:
        self._approvals[approval.id] = approval
        decided = [a.id for a in self._approvals.values() if not a.pending]
        for old in decided[: max(0, len(decided) - _KEEP_DECIDED)]:
            del self._approvals[old]
        if self._on_change is not None:
            result = self._on_change(approval)
            if inspect.isawaitable(result):
                await result
        return approval

    async def request(
        self,
        *,
        tool: str,
        args: dict[str, Any],
        session_key: str | None,
        turn_id: str | None,
        expires_in: timedelta | None = None,
    ) -> Approval:
        """A pending approval for this call, then its end: approved, denied or expired
        (after `expires_in`, else the broker's timeout).
        """
        timeout = expires_in or self.timeout
        approval = await self._put(
            new_approval(
                tool=tool,
                args=args,
                session_key=session_key,
                turn_id=turn_id,
                now=self._now(),
                timeout=timeout,
            )
        )
        decided = self._waiting[approval.id] = asyncio.Event()
        try:
            await asyncio.wait_for(decided.wait(), timeout.total_seconds())
        except TimeoutError:
            await self._put(expire(self._approvals[approval.id], at=self._now()))
        except asyncio.CancelledError:
            # The turn was stopped: nobody waits for this call any more, so it leaves the
            # pending list (and a late decision gets a 409, not a silent no-op).
            await self._put(
                expire(self._approvals[approval.id], at=self._now(), by=CANCELLED_DECIDER)
            )
            raise
        finally:
            del self._waiting[approval.id]
        return self._approvals[approval.id]

    def get(self, approval_id: str) -> Approval:
        found = self._approvals.get(approval_id)
        if found is None:
            raise ApprovalNotFoundError(f"no approval {approval_id}")
        return found

    def list(self, session_key: str | None = None, *, pending_only: bool = True) -> list[Approval]:
        """Approvals, oldest first: pending ones (or all kept), of one session or of all."""
        return [
            a
            for a in self._approvals.values()
            if (session_key is None or a.session_key == session_key)
            and (a.pending or not pending_only)
        ]

    async def decide(self, approval_id: str, decision: Decision, *, by: str) -> Approval:
        """Approve or deny a pending call; its turn goes on at once."""
        approval = await self._put(decide(self.get(approval_id), decision, by=by, at=self._now()))
        waiter = self._waiting.get(approval_id)
        if waiter is not None:
            waiter.set()
        return approval
