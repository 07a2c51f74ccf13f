"""Approvals of gated tool calls, durable: the broker a gated call waits on, and the service
that lists and decides them, each change published as an event.

Every change (request, decision, timeout, a stopped turn) is written to the store first
(`ApprovalRecords`); reads and decisions go to the store, so they work for an approval whose
waiting turn runs in another process (a waiting call also re-reads its record every `poll`
seconds, so such a decision reaches it). Only the wait itself is in memory. At start,
approvals no running turn waits for any more are expired (`Approvals.recover`, by "restart").
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from agentcron.agent.approvals import (
    CANCELLED_DECIDER,
    DEFAULT_APPROVAL_TIMEOUT,
    RESTART_DECIDER,
    Approval,
    ApprovalError,
    ApprovalNotFoundError,
    Decision,
    bounded_args,
    decide,
    expire,
    new_approval,
)
from agentcron.events import ApprovalDecided, ApprovalRequested, EventBus
from agentcron.store.interface import ApprovalRecords

log = logging.getLogger(__name__)

POLL_S = 1.0  # a waiting call re-reads its record this often (a decision made elsewhere)


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


def _positive(timeout: timedelta) -> timedelta:
    if timeout <= timedelta(0):
        raise ValueError(f"approval timeout must be positive, got {timeout}")
    return timeout


class ApprovalBroker:
    """A gated call waits in `request` until `decide` or its timeout; the record of every
    change is in the store before anyone is told (`Approver` for the gate).

    `now` is the clock of the records' times; the wait itself is real time (the timeout).
    """

    def __init__(
        self,
        records: ApprovalRecords,
        now: Callable[[], datetime],
        *,
        timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
        on_change: Callable[[Approval], Awaitable[None] | None] | None = None,
        poll: float = POLL_S,
    ) -> None:
        self._records = records
        self._now = now
        self.timeout = _positive(timeout)
        self._on_change = on_change
        self._poll = poll
        self._waiting: dict[str, asyncio.Event] = {}

    async def _changed(self, approval: Approval) -> None:
        if self._on_change is not None:
            result = self._on_change(approval)
            if inspect.isawaitable(result):
                await result

    async def request(
        self,
        *,
        tool: str,
        args: dict[str, Any],
        session_key: str | None,
        turn_id: str | None,
        wait: timedelta | None = None,
    ) -> Approval:
        """A pending approval for this call, then its end: approved, denied or expired (after
        `wait`, default the broker's timeout).
        """
        wait = self.timeout if wait is None else _positive(wait)
        approval = new_approval(
            tool=tool,
            args=bounded_args(args),
            session_key=session_key,
            turn_id=turn_id,
            now=self._now(),
            timeout=wait,
        )
        decided = self._waiting[approval.id] = asyncio.Event()
        try:
            await self._records.insert(approval)
            await self._changed(approval)
            try:
                ended = await self._wait(approval, decided, wait.total_seconds())
            except asyncio.CancelledError:
                # The turn was stopped: nobody waits for this call any more, so it leaves the
                # pending list (and a late decision gets a 409, not a silent no-op). Should
                # this write fail, the next start expires it ("restart").
                try:
                    await self._end(expire(approval, at=self._now(), by=CANCELLED_DECIDER))
                except Exception:
                    log.exception("could not expire the approval of a stopped turn")
                raise
        finally:
            del self._waiting[approval.id]
        return ended

    async def _wait(self, approval: Approval, decided: asyncio.Event, seconds: float) -> Approval:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while not decided.is_set():
            left = deadline - loop.time()
            if left <= 0:
                return await self._end(expire(approval, at=self._now()))
            try:
                await asyncio.wait_for(decided.wait(), min(left, self._poll))
            except TimeoutError:
                stored = await self._records.get(approval.id)
                if stored is not None and not stored.pending:
                    return stored  # decided elsewhere (another process or replica)
        return await self.get(approval.id)

    async def _end(self, ended: Approval) -> Approval:
        """Write a timeout or a stop if the record is still pending; else it was decided."""
        landed = await self._records.update_if_pending(ended)
        if landed is not None:
            await self._changed(landed)
            return landed
        return await self.get(ended.id)

    async def get(self, approval_id: str) -> Approval:
        found = await self._records.get(approval_id)
        if found is None:
            raise ApprovalNotFoundError(f"no approval {approval_id}")
        return found

    async def list(
        self, session_key: str | None = None, *, pending_only: bool = True
    ) -> builtins.list[Approval]:
        """Approvals, oldest first: pending ones (or the newest of all), of one session or all."""
        return await self._records.list(session_key, pending_only=pending_only)

    async def decide(self, approval_id: str, decision: Decision, *, by: str) -> Approval:
        """Approve or deny a pending call; its turn goes on at once (in this process; in
        another at its next poll). Raises ApprovalError once decided or past its expiry.
        """
        decided = decide(await self.get(approval_id), decision, by=by, at=self._now())
        landed = await self._records.update_if_pending(decided)
        if landed is None:  # decided, expired or reaped since it was read
            current = await self.get(approval_id)
            raise ApprovalError(f"approval {approval_id} is already {current.state.value}")
        waiter = self._waiting.get(approval_id)
        if waiter is not None:
            waiter.set()
        await self._changed(landed)
        return landed


class Approvals:
    """The approvals of gated tool calls (the built-in agent asks `broker`)."""

    def __init__(
        self,
        records: ApprovalRecords,
        now: Callable[[], datetime],
        events: EventBus,
        *,
        timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
    ) -> None:
        self._events = events
        self._records = records
        self._now = now
        self.broker = ApprovalBroker(records, now, timeout=timeout, on_change=self._publish)

    async def _publish(self, approval: Approval) -> None:
        await self._events.publish(approval_event(approval))

    async def list(
        self, session_key: str | None = None, *, pending_only: bool = True
    ) -> builtins.list[Approval]:
        """Pending approvals (or the newest of all), of one session or of all, oldest first."""
        return await self.broker.list(session_key, pending_only=pending_only)

    async def get(self, approval_id: str) -> Approval:
        """Raises ApprovalNotFoundError for an unknown id."""
        return await self.broker.get(approval_id)

    async def decide(self, approval_id: str, decision: Decision, *, by: str) -> Approval:
        """Approve or deny; raises ApprovalError once decided or expired."""
        return await self.broker.decide(approval_id, decision, by=by)

    async def recover(self, *, keep: timedelta | None = None) -> builtins.list[Approval]:
        """At start, after turn recovery: expire (by "restart") every pending approval no
        running turn waits for (its process stopped or died while it waited), so nothing runs
        later by surprise and a late decision gets a 409; with `keep`, delete approvals
        decided longer ago than that. Returns those expired.
        """
        now = self._now()
        expired = await self._records.expire_orphaned(now, RESTART_DECIDER)
        for approval in expired:
            log.warning(
                "approval expired: its turn stopped while it waited",
                extra={
                    "approval_id": approval.id,
                    "session_key": approval.session_key,
                    "turn_id": approval.turn_id,
                    "tool": approval.tool,
                },
            )
        if keep is not None:
            await self._records.prune(now - keep)
        return expired
