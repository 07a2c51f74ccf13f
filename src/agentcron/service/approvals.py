"""Approvals of gated tool calls, durable: the broker a gated call waits on, and the service
that lists and decides them, each change published as an event.

Every change (request, decision, timeout, a stopped turn) is written to the store first
(`ApprovalRecords`); reads and decisions go to the store, so they work for an approval whose
waiting turn runs in another process (that process hears of the decision through the store's
signals, `recheck`, and re-reads the record; every `poll` seconds of real time it re-reads it
anyway, should a notice be lost; and it announces the end too).
Only the wait itself is in memory; its timeout is on the engine's clock. At start, and with
every periodic reap of the engine, approvals no running turn waits for any more are expired
(`Approvals.recover` / `Approvals.reap`, by "restart"); deleting a session expires its own
(`Approvals.end_session`, by "session deleted").

A scheduled run's call (its turn is a fire's, or it is an isolated run: `GrantRecords.job_of`)
is first checked against its job's standing grants (`domain/grants.py`): one that matches
approves it at once, and the record names the grant. One that waits is the job's
`waiting_approval`, and its session's channel is reminded once (`ApprovalReminder`) after
`remind_after` of its wait; at its timeout it fails closed (expired, "timeout"), as every
approval does. A message's turn never uses a job's grants.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from agentcron.domain.approvals import (
    CANCELLED_DECIDER,
    DEFAULT_APPROVAL_TIMEOUT,
    RESTART_DECIDER,
    SESSION_DELETED_DECIDER,
    Approval,
    ApprovalError,
    ApprovalNotFoundError,
    Decision,
    approve_by_grant,
    bounded_args,
    decide,
    expire,
    new_approval,
)
from agentcron.domain.events import (
    ApprovalDecided,
    ApprovalReminder,
    ApprovalRequested,
    EventBus,
)
from agentcron.domain.grants import (
    MAX_GRANTS_PER_JOB,
    Grant,
    GrantNotFoundError,
    matching_grant,
    new_grant,
)
from agentcron.errors import InvalidInputError
from agentcron.runtime.clock import Clock
from agentcron.service.job_requests import GrantCreate
from agentcron.service.paging import DEFAULT_PAGE, Page, check_limit, decode_time_key, page_of
from agentcron.store.errors import JobNotFoundError
from agentcron.store.ids import new_id
from agentcron.store.interface import ApprovalRecords, GrantRecords

APPROVALS_CURSOR = "approvals"  # the pending ones, oldest first
ALL_APPROVALS_CURSOR = "approvals-all"  # every one, newest first

log = logging.getLogger(__name__)

CANCEL_WRITE_S = 5.0  # at most this long to record that a stopped turn's call expired
# A waiting call re-reads its record this often (real time) should the notice of a decision
# made elsewhere be lost; the notice itself wakes it at once (`ApprovalBroker.recheck`).
POLL_S = 30.0
# A scheduled run's call still waiting this far into its wait (a fraction of it) reminds its
# session's channel, once.
DEFAULT_REMIND_AFTER = 0.5


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


def check_remind_after(fraction: float) -> float:
    """The reminder's point in a wait, a fraction of it: 0 (no reminder) up to below 1."""
    if not 0 <= fraction < 1:
        raise ValueError(f"approval_reminder must be at least 0 and below 1, got {fraction}")
    return fraction


def _positive(timeout: timedelta) -> timedelta:
    if timeout <= timedelta(0):
        raise ValueError(f"approval timeout must be positive, got {timeout}")
    return timeout


class _Wait:
    """One call waiting in this process: woken by its end here (`ended`) or by a notice that
    it may have ended elsewhere.
    """

    __slots__ = ("ended", "woken")

    def __init__(self) -> None:
        self.woken = asyncio.Event()
        self.ended = False


# The ends this process has told of, newest last: an end is told once, whoever saw it first
# (the decision's own write, a re-read of the record, a timeout), even when the waiting call
# is gone by the time the other one comes to tell it. Only a few moments' worth is needed.
_TOLD_KEPT = 4096


class ApprovalBroker:
    """A gated call waits in `request` until `decide` or its timeout; the record of every
    change is in the store before anyone is told (`Approver` for the gate).

    Time is `clock`'s (the engine's): the records' times and the timeout, so a fake clock
    moved past `expires_at` expires the wait. A decision made by another process wakes the
    call through `recheck` (the store's signals); the fallback re-read every `poll` seconds is
    on real time: that decision is written in real time whatever the engine's clock says (a
    fake clock that stands still must not hold it back; with the system clock it is the same
    thing).
    """

    def __init__(
        self,
        records: ApprovalRecords,
        clock: Clock,
        *,
        timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
        on_change: Callable[[Approval], Awaitable[None] | None] | None = None,
        poll: float = POLL_S,
        grants: GrantRecords | None = None,
        remind_after: float = DEFAULT_REMIND_AFTER,
        on_remind: Callable[[Approval], Awaitable[None]] | None = None,
    ) -> None:
        self._records = records
        self._clock = clock
        self.timeout = _positive(timeout)
        self._on_change = on_change
        self.poll = poll
        self._grants = grants
        self.remind_after = check_remind_after(remind_after)
        self._on_remind = on_remind
        self._waiting: dict[str, _Wait] = {}
        self._told: OrderedDict[str, None] = OrderedDict()

    def _now(self) -> datetime:
        return self._clock.now()

    async def _changed(self, approval: Approval) -> None:
        if self._on_change is not None:
            result = self._on_change(approval)
            if inspect.isawaitable(result):
                await result

    async def _ended(self, approval: Approval) -> None:
        """Tell of an approval's end, once per approval in this process (its own decision, its
        timeout, a decision found in the store: whichever comes first tells), and wake the
        call waiting for it here, if any.
        """
        wait = self._waiting.get(approval.id)
        if wait is not None:
            wait.ended = True
            wait.woken.set()
        if approval.id in self._told:
            return
        self._told[approval.id] = None
        if len(self._told) > _TOLD_KEPT:
            self._told.popitem(last=False)
        await self._changed(approval)

    async def announce(self, ended: builtins.list[Approval]) -> None:
        """Tell of approvals ended by a bulk write (reaping, a session's deletion)."""
        for approval in ended:
            await self._ended(approval)

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
        `wait` on the clock, default the broker's timeout).
        """
        wait = self.timeout if wait is None else _positive(wait)
        # A scheduled run's call: its job (and the job's standing grants) are read first.
        job_id = None
        if self._grants is not None and turn_id is not None:
            job_id = await self._grants.job_of(turn_id)
        approval = new_approval(
            tool=tool,
            args=bounded_args(args),
            session_key=session_key,
            turn_id=turn_id,
            now=self._now(),
            timeout=wait,
            approval_id=new_id(),  # a ULID, as every other record's id
            job_id=job_id,
        )
        if job_id is not None and self._grants is not None:
            grants = await self._grants.list(job_id) or []
            grant = matching_grant(grants, tool, args, approval.requested_at)
            if grant is not None:
                return await self._granted(approval, grant)
        waiting = self._waiting[approval.id] = _Wait()
        try:
            await self._records.insert(approval)
            await self._changed(approval)
            return await self._wait(approval, waiting)
        except asyncio.CancelledError:
            # The turn was stopped (perhaps before its record was written: a graceful stop
            # cuts a turn as it pauses): nobody waits for this call any more, so it leaves
            # the pending list (and a late decision gets a 409, not a silent no-op). Should
            # this write fail, a reap expires it ("restart").
            # Bounded: a cancelled task must end (a shutdown waits for it), even if the store
            # or a subscriber no longer answers.
            try:
                async with asyncio.timeout(CANCEL_WRITE_S):
                    await self._end(expire(approval, at=self._now(), by=CANCELLED_DECIDER))
            except Exception:
                log.exception("could not expire the approval of a stopped turn")
            raise
        finally:
            del self._waiting[approval.id]

    async def _granted(self, approval: Approval, grant: Grant) -> Approval:
        """A call its job's standing grant allows: recorded approved (naming the grant) and
        let go at once; nobody is asked, so no request is announced.
        """
        granted = approve_by_grant(approval, grant, at=approval.requested_at)
        await self._records.insert(granted)
        log.info(
            "approval granted by a standing grant",
            extra={
                "approval_id": granted.id,
                "grant_id": grant.id,
                "job_id": grant.job_id,
                "session_key": granted.session_key,
                "turn_id": granted.turn_id,
                "tool": granted.tool,
            },
        )
        return granted

    def _remind_at(self, approval: Approval) -> datetime | None:
        """When a scheduled run's waiting call reminds its channel (None: it does not)."""
        if approval.job_id is None or self.remind_after <= 0 or self._on_remind is None:
            return None
        return approval.requested_at + (approval.expires_at - approval.requested_at) * (
            self.remind_after
        )

    async def _remind(self, approval: Approval) -> None:
        """Remind once: the record's `reminded_at` is a compare-and-set, so neither a second
        process nor a restart sends it again.
        """
        landed = await self._records.mark_reminded(approval.id, self._now())
        if landed is not None and self._on_remind is not None:
            log.info(
                "approval reminder: a scheduled run still waits for a person",
                extra={"approval_id": approval.id, "job_id": approval.job_id},
            )
            await self._on_remind(landed)

    async def _wait(self, approval: Approval, waiting: _Wait) -> Approval:
        clock = self._clock
        remind_at = self._remind_at(approval)
        while not waiting.ended:
            if clock.now() >= approval.expires_at:
                return await self._end(expire(approval, at=clock.now()))
            if remind_at is not None and clock.now() >= remind_at:
                remind_at = None
                await self._remind(approval)
                continue
            until = (
                approval.expires_at if remind_at is None else min(remind_at, approval.expires_at)
            )
            try:
                async with asyncio.timeout(self.poll):
                    await clock.sleep_until(until, waiting.woken)
            except TimeoutError:
                pass  # the slow fallback: read the record anyway
            if waiting.ended:
                break
            # Told that it may have been decided elsewhere (another process's notice,
            # `recheck`), or the fallback: read the record. Cleared first, so a notice that
            # arrives during the read is not lost.
            waiting.woken.clear()
            stored = await self._records.get(approval.id)
            if stored is not None and not stored.pending:
                await self._ended(stored)  # decided elsewhere (another process, replica)
                return stored
        return await self.get(approval.id)

    def recheck(self, ids: Sequence[str] | None) -> None:
        """Approvals were decided or expired in another process (None or empty: perhaps
        any): the calls waiting here for them read their records now.
        """
        waits = self._waiting.values() if not ids else [self._waiting.get(i) for i in ids]
        for wait in waits:
            if wait is not None:
                wait.woken.set()

    async def _end(self, ended: Approval) -> Approval:
        """Write a timeout or a stop if the record is still pending; else it was decided."""
        landed = await self._records.update_if_pending(ended)
        if landed is None:
            landed = await self._records.get(ended.id)  # decided first, here or elsewhere
            if landed is None:  # cut before its record was written: nobody heard of it
                return ended
        await self._ended(landed)
        return landed

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
        another when it hears of it). Raises ApprovalError once decided or past its expiry.
        """
        decided = decide(await self.get(approval_id), decision, by=by, at=self._now())
        landed = await self._records.update_if_pending(decided)
        if landed is None:  # decided, expired or reaped since it was read
            current = await self.get(approval_id)
            raise ApprovalError(f"approval {approval_id} is already {current.state.value}")
        await self._ended(landed)
        return landed


class Approvals:
    """The approvals of gated tool calls (the built-in agent asks `broker`)."""

    def __init__(
        self,
        records: ApprovalRecords,
        clock: Clock,
        events: EventBus,
        *,
        timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
        grants: GrantRecords | None = None,
        remind_after: float = DEFAULT_REMIND_AFTER,
    ) -> None:
        self._events = events
        self._records = records
        self._clock = clock
        self._grants = grants
        self.broker = ApprovalBroker(
            records,
            clock,
            timeout=timeout,
            on_change=self._publish,
            grants=grants,
            remind_after=remind_after,
            on_remind=self._publish_reminder,
        )

    async def _publish(self, approval: Approval) -> None:
        await self._events.publish(approval_event(approval))

    async def _publish_reminder(self, approval: Approval) -> None:
        await self._events.publish(
            ApprovalReminder(
                session_key=approval.session_key or "",
                approval_id=approval.id,
                turn_id=approval.turn_id,
                job_id=approval.job_id or "",
                tool=approval.tool,
                expires_at=approval.expires_at.isoformat(),
            )
        )

    # -- standing grants (a person's, through the API, the CLI or the web UI) -------------

    def _grant_records(self) -> GrantRecords:
        if self._grants is None:
            raise InvalidInputError("standing grants are not kept by this store")
        return self._grants

    async def grants(self, job_id: str) -> builtins.list[Grant]:
        """The job's standing grants, oldest first (expired ones too, until revoked).
        Raises JobNotFoundError.
        """
        found = await self._grant_records().list(job_id)
        if found is None:
            raise JobNotFoundError(f"no job {job_id}")
        return found

    async def grant(
        self,
        job_id: str,
        *,
        tool: str,
        args: dict[str, Any] | None = None,
        expires_at: datetime,
        by: str,
    ) -> Grant:
        """A standing approval for the job's scheduled runs: calls of `tool` whose arguments
        match `args` (`domain/grants.py`) go ahead without waiting until `expires_at`.
        A person's act: the agent's tools have no way to it. Raises JobNotFoundError,
        InvalidInputError (a bad pattern or expiry, or too many grants).
        """
        records = self._grant_records()
        grant = new_grant(
            grant_id=new_id(),
            job_id=job_id,
            tool=tool,
            args=args,
            expires_at=expires_at,
            granted_by=by,
            now=self._clock.now(),
        )
        if len(await self.grants(job_id)) >= MAX_GRANTS_PER_JOB:
            raise InvalidInputError(
                f"a job has at most {MAX_GRANTS_PER_JOB} grants; revoke one first"
            )
        if not await records.insert(grant):
            raise JobNotFoundError(f"no job {job_id}")
        log.info(
            "standing grant made",
            extra={
                "grant_id": grant.id,
                "job_id": job_id,
                "tool": grant.tool,
                "by": grant.granted_by,
            },
        )
        return grant

    async def grant_request(self, job_id: str, body: GrantCreate) -> Grant:
        """`grant` from the API's request (`by` defaults to "api")."""
        return await self.grant(
            job_id,
            tool=body.tool,
            args=dict(body.args),
            expires_at=body.expiry(self._clock.now()),
            by=body.by or "api",
        )

    async def revoke(self, job_id: str, grant_id: str) -> Grant:
        """Revoke one of the job's grants: its calls wait for a person again. Raises
        GrantNotFoundError.
        """
        gone = await self._grant_records().delete(job_id, grant_id)
        if gone is None:
            raise GrantNotFoundError(f"job {job_id} has no grant {grant_id}")
        log.info("standing grant revoked", extra={"grant_id": grant_id, "job_id": job_id})
        return gone

    async def waiting_of_job(self, job_id: str) -> Approval | None:
        """The approval a scheduled run of the job waits for now (the oldest), or None."""
        return await self._records.waiting_of_job(job_id)

    async def list(
        self, session_key: str | None = None, *, pending_only: bool = True
    ) -> builtins.list[Approval]:
        """Pending approvals (or the newest of all), of one session or of all, oldest first."""
        return await self.broker.list(session_key, pending_only=pending_only)

    async def page(
        self,
        session_key: str | None = None,
        *,
        pending_only: bool = True,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
    ) -> Page[Approval]:
        """One page of the approvals, of one session or of all: the pending ones oldest first
        (the first to expire), or every one (`pending_only=False`) newest first;
        `next_cursor` reads on.
        """
        check_limit(limit)
        kind = APPROVALS_CURSOR if pending_only else ALL_APPROVALS_CURSOR
        after = None if cursor is None else decode_time_key(kind, cursor)
        if pending_only:
            found = await self._records.list(session_key, limit=limit + 1, after=after)
        else:
            found = await self._records.list_newest(session_key, limit=limit + 1, after=after)
        return page_of(found, limit, kind, lambda a: (a.requested_at, a.id))

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
        now = self._clock.now()
        expired = await self._records.expire_orphaned(now, RESTART_DECIDER)
        _log_expired(expired, "approval expired: its turn stopped while it waited")
        if keep is not None:
            await self._records.prune(now - keep)
        return expired

    async def reap(self) -> builtins.list[Approval]:
        """With the engine's periodic reap, after turn recovery: expire (by "restart") the
        pending approvals whose turn is no longer running (its process died or stopped and
        the turn was interrupted: another host whose lease ran out), and announce them.
        Approvals that name no turn are left alone here (only a start can tell nobody waits
        for them). Returns those expired.
        """
        expired = await self._records.expire_orphaned(
            self._clock.now(), RESTART_DECIDER, turnless=False
        )
        _log_expired(expired, "approval expired: its turn was cut off while it waited")
        await self.broker.announce(expired)
        return expired

    async def end_session(self, session_key: str) -> builtins.list[Approval]:
        """The session is being deleted: its pending approvals expire ("session deleted"),
        are announced, and a call of this process waiting for one ends at once (its turn is
        being stopped). The records stay, decided, until pruned with the other old ones.
        """
        expired = await self._records.expire_session(
            session_key, self._clock.now(), SESSION_DELETED_DECIDER
        )
        await self.broker.announce(expired)
        return expired


def _log_expired(expired: builtins.list[Approval], message: str) -> None:
    for approval in expired:
        log.warning(
            message,
            extra={
                "approval_id": approval.id,
                "session_key": approval.session_key,
                "turn_id": approval.turn_id,
                "tool": approval.tool,
            },
        )
