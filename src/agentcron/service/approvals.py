"""Approvals of gated tool calls: list and decide them, each change published as an event.

They live in memory (`agentcron.agent.approvals.ApprovalBroker`): a restart forgets pending
ones, and their calls' turns end with the process.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from datetime import datetime, timedelta

from agentcron.agent.approvals import (
    DEFAULT_APPROVAL_TIMEOUT,
    Approval,
    ApprovalBroker,
    Decision,
)
from agentcron.events import ApprovalDecided, ApprovalRequested, EventBus


def approval_event(approval: Approval) -> ApprovalRequested | ApprovalDecided:
    """The event of an approval as it is now: requested while pending, else decided."""
    key = approval.session_key or ""
    if approval.pending:
        return ApprovalRequested(
            session_key=key,
            approval_id=approval.id,
            turn_id=approval.turn_id,
            tool=approval.tool,
            args=approval.args,
            expires_at=approval.expires_at.isoformat(),
        )
    return ApprovalDecided(
        session_key=key,
        approval_id=approval.id,
        turn_id=approval.turn_id,
        tool=approval.tool,
        state=approval.state.value,
        decided_by=approval.decided_by,
    )


class Approvals:
    """The approvals of this process's gated tool calls (the built-in agent asks `broker`)."""

    def __init__(
        self,
        now: Callable[[], datetime],
        events: EventBus,
        *,
        timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
    ) -> None:
        self._events = events
        self.broker = ApprovalBroker(now, timeout=timeout, on_change=self._publish)

    async def _publish(self, approval: Approval) -> None:
        await self._events.publish(approval_event(approval))

    def list(
        self, session_key: str | None = None, *, pending_only: bool = True
    ) -> builtins.list[Approval]:
        """Pending approvals (or all kept in memory), of one session or of all, oldest first."""
        return self.broker.list(session_key, pending_only=pending_only)

    def get(self, approval_id: str) -> Approval:
        """Raises ApprovalNotFoundError for an unknown id."""
        return self.broker.get(approval_id)

    async def decide(self, approval_id: str, decision: Decision, *, by: str) -> Approval:
        """Approve or deny; raises ApprovalError once decided or expired."""
        return await self.broker.decide(approval_id, decision, by=by)
