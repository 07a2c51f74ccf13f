"""Alerts: a job gone silent (overdue), one whose last runs failed (failing), one about to end
(ending) — raised once per episode, with each periodic reap of the engine (`Engine.reapers`).

Every sweep asks the store narrow questions (`AlertLedger`: candidates from index ranges, never
every job or every open run), decides with the pure rules of `domain/alerts.py`, and marks each
new episode on the job row with a compare-and-set before it publishes the event (`JobOverdue`,
`JobFailing`, `JobEnding`), so a restart or a second replica does not send it again. An episode
that ended (the job fired and its run ended; a success reset its failure count) is cleared the
same way and announced with `JobRecovered`. The channels send each event's text to the job's
session's chat (`channels/manager.py`), through the durable outbox like a reply.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from agentcron.config.engine import EngineSettings
from agentcron.domain.alerts import AlertKind, OverdueReason, alert_text, is_ending, overdue_reason
from agentcron.domain.events import (
    Event,
    JobEnding,
    JobFailing,
    JobOverdue,
    JobRecovered,
)
from agentcron.domain.jobs import Job
from agentcron.runtime.clock import Clock
from agentcron.store.interface import AlertLedger

log = logging.getLogger(__name__)

# Candidates read per question and sweep: a sweep stays bounded whatever the backlog; what is
# left is found by the next sweep.
SWEEP_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class AlertSweep:
    """What one sweep raised and cleared (job ids)."""

    overdue: tuple[str, ...] = ()
    failing: tuple[str, ...] = ()
    ending: tuple[str, ...] = ()
    recovered: tuple[str, ...] = ()


class Alerts:
    """The alert sweep and the overdue jobs (`/metrics`). `settings` is read at each sweep."""

    def __init__(
        self,
        ledger: AlertLedger,
        clock: Clock,
        publish: Callable[[Event], Awaitable[None]],
        settings: Callable[[], EngineSettings],
    ) -> None:
        self._ledger = ledger
        self._clock = clock
        self._publish = publish
        self._settings = settings

    async def overdue(self) -> builtins.list[Job]:
        """The jobs overdue now (an open episode), by id."""
        return await self._ledger.overdue_jobs(limit=SWEEP_LIMIT)

    async def sweep(self) -> AlertSweep:
        """Raise the new episodes and clear the ended ones (see the module's docstring)."""
        now, settings = self._clock.now(), self._settings()
        overdue, recovered_late = await self._overdue(now, settings)
        failing, recovered_failing = await self._failing(now, settings)
        ending = await self._ending(now, settings)
        return AlertSweep(
            overdue=overdue,
            failing=failing,
            ending=ending,
            recovered=recovered_late + recovered_failing,
        )

    async def _overdue(
        self, now: datetime, settings: EngineSettings
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        minimum, ratio = settings.overdue_grace, settings.overdue_grace_ratio
        timeout = settings.turn_timeout
        open_limit = None if timeout is None else timedelta(seconds=timeout)
        found = await self._ledger.overdue_candidates(
            due_before=now - minimum,
            open_before=None if open_limit is None else now - open_limit - minimum,
            limit=SWEEP_LIMIT,
        )
        late: dict[str, tuple[Job, OverdueReason, str | None, datetime | None]] = {}
        for candidate in found:
            reason = overdue_reason(
                candidate, now, minimum=minimum, ratio=ratio, open_limit=open_limit
            )
            if reason is not None:
                job = candidate.job
                due = candidate.open_since if reason is OverdueReason.RUN_OPEN else job.next_run_at
                late[job.id] = (job, reason, candidate.open_run_id, due)
        raised: list[str] = []
        for job, reason, run_id, due in late.values():
            if job.overdue_since is not None:
                continue  # this episode was announced already
            marked = await self._ledger.mark_alert(job.id, "overdue_since", now, expected=None)
            if marked is None:
                continue  # another process raised it
            raised.append(job.id)
            detail = (
                "a fire has not ended" if reason is OverdueReason.RUN_OPEN else "a fire did not run"
            )
            if due is not None:
                detail += f" (due {due.isoformat(timespec='seconds')})"
            log.warning(
                "job overdue: %s",
                reason.value,
                extra={"job_id": job.id, "session_key": job.session_key, "run_id": run_id},
            )
            await self._publish(
                JobOverdue(
                    session_key=job.session_key or "",
                    job_id=job.id,
                    job_name=job.name,
                    text=alert_text(AlertKind.OVERDUE, job, detail),
                    at=now,
                    reason=reason.value,
                    due_at=due,
                    run_id=run_id,
                )
            )
        if len(found) >= SWEEP_LIMIT:
            return tuple(raised), ()  # not every late job was read: nothing is cleared now
        recovered: list[str] = []
        for job in await self._ledger.alerted_jobs(limit=SWEEP_LIMIT):
            if job.overdue_since is None or job.id in late:
                continue
            if await self._end(job, "overdue_since", job.overdue_since, AlertKind.OVERDUE, now):
                recovered.append(job.id)
        return tuple(raised), tuple(recovered)

    async def _failing(
        self, now: datetime, settings: EngineSettings
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        threshold = settings.failing_after
        if threshold <= 0:
            return (), ()
        raised: list[str] = []
        for job in await self._ledger.failing_candidates(threshold=threshold, limit=SWEEP_LIMIT):
            marked = await self._ledger.mark_alert(job.id, "failing_since", now, expected=None)
            if marked is None:
                continue
            raised.append(job.id)
            detail = f"its last {job.consecutive_failures} runs failed"
            if job.paused_reason:
                detail += f" ({job.paused_reason})"
            log.warning(
                "job failing: %d runs in a row",
                job.consecutive_failures,
                extra={"job_id": job.id, "session_key": job.session_key},
            )
            await self._publish(
                JobFailing(
                    session_key=job.session_key or "",
                    job_id=job.id,
                    job_name=job.name,
                    text=alert_text(AlertKind.FAILING, job, detail),
                    at=now,
                    failures=job.consecutive_failures,
                )
            )
        recovered: list[str] = []
        for job in await self._ledger.alerted_jobs(limit=SWEEP_LIMIT):
            if job.failing_since is None or job.consecutive_failures >= threshold:
                continue
            if await self._end(job, "failing_since", job.failing_since, AlertKind.FAILING, now):
                recovered.append(job.id)
        return tuple(raised), tuple(recovered)

    async def _ending(self, now: datetime, settings: EngineSettings) -> tuple[str, ...]:
        window, runs_left = settings.ending_window, settings.ending_runs
        raised: list[str] = []
        for job in await self._ledger.ending_candidates(
            end_before=now + window, runs_left=runs_left, limit=SWEEP_LIMIT
        ):
            if not is_ending(job, now, window=window, runs_left=runs_left):
                continue
            marked = await self._ledger.mark_alert(job.id, "ending_warned_at", now, expected=None)
            if marked is None:
                continue
            raised.append(job.id)
            end_at, left = job.policy.end_at, job.remaining_runs
            if end_at is not None and end_at <= now + window:
                detail = f"ends on {end_at.isoformat(timespec='minutes')}"
            else:
                detail = f"has {left} run{'s' if left != 1 else ''} left"
            await self._publish(
                JobEnding(
                    session_key=job.session_key or "",
                    job_id=job.id,
                    job_name=job.name,
                    text=alert_text(AlertKind.ENDING, job, detail),
                    at=now,
                    end_at=end_at,
                    remaining_runs=left,
                )
            )
        return tuple(raised)

    async def _end(
        self,
        job: Job,
        column: Literal["overdue_since", "failing_since"],
        since: datetime,
        kind: AlertKind,
        now: datetime,
    ) -> bool:
        """Clear an episode (compare-and-set) and announce its end; False: another process did."""
        if await self._ledger.mark_alert(job.id, column, None, expected=since) is None:
            return False
        log.info("job recovered from %s", kind.value, extra={"job_id": job.id})
        await self._publish(
            JobRecovered(
                session_key=job.session_key or "",
                job_id=job.id,
                job_name=job.name,
                text=alert_text("recovered", job, f"no longer {kind.value}"),
                at=now,
                alert=kind.value,
            )
        )
        return True
