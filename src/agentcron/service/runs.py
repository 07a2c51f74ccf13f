"""Run records: read, list, wait (bounded) for a run to end, and a person's "run now"."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, tzinfo

from agentcron.domain.runs import Run, UsageRow
from agentcron.domain.states import RunState
from agentcron.errors import InvalidInputError
from agentcron.runtime.clock import Clock, SystemClock
from agentcron.runtime.waiters import Waiters
from agentcron.schedule.zones import get_zone
from agentcron.service.paging import DEFAULT_PAGE, Page, check_limit, decode_time_key, page_of
from agentcron.service.waiting import wait_for
from agentcron.store.errors import JobNotFoundError
from agentcron.store.interface import JobCatalog, RunRecords, SessionRecords

RUNS_CURSOR = "runs"
MAX_USAGE_DAYS = 366
USAGE_DAYS = 30  # the usage's window when no `since` is given


@dataclass(slots=True)
class UsageSum:
    """Runs, turns, tokens and cost summed (`cost_usd` None: none of them had a known price)."""

    runs: int = 0
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None

    def add(self, row: UsageRow) -> None:
        self.runs += 1 if row.job_id is not None else 0
        self.turns += 1 if row.turn else 0
        self.input_tokens += row.input_tokens or 0
        self.output_tokens += row.output_tokens or 0
        if row.cost_usd is not None:
            self.cost_usd = round((self.cost_usd or 0.0) + row.cost_usd, 6)

    def merge(self, other: UsageSum) -> None:
        """Add another sum to this one."""
        self.runs += other.runs
        self.turns += other.turns
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        if other.cost_usd is not None:
            self.cost_usd = round((self.cost_usd or 0.0) + other.cost_usd, 6)


@dataclass(slots=True)
class UsageDay(UsageSum):
    """One day's usage of one session (and one job; None: the person's own turns)."""

    day: date = date.min
    session_key: str = ""
    job_id: str | None = None
    job_name: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Usage per day (oldest first, then by session and job) and the sums over them."""

    days: list[UsageDay]
    total: UsageSum = field(default_factory=UsageSum)


class Runs:
    """Read run records (the engine writes them), and ask for a manual run."""

    def __init__(
        self,
        records: RunRecords,
        waiters: Waiters,
        *,
        stopping: Callable[[], bool],
        clock: Clock | None = None,
        adopt: Callable[[], None] = lambda: None,
        catalog: JobCatalog | None = None,
        sessions: SessionRecords | None = None,
    ) -> None:
        self._records = records
        self._catalog = catalog  # to tell an unknown job from one without runs
        self._sessions = sessions  # to tell an unknown session from one without runs
        self._waiters = waiters  # notified by the engine when a run ends
        self._stopping = stopping
        self._clock: Clock = clock or SystemClock()
        self._adopt = adopt  # tells this process's engine a fire waits to be adopted

    async def run_now(self, job_id: str) -> Run:
        """Run the job now, once, as a person asked: a manual run through the same path as
        a scheduled fire (adopted by the engine that owns firing, here or in another process
        on the database: its lane, deferral behind an open turn, trigger entry, run record,
        closure and events). The job's schedule is not moved. A paused job runs too (it is a
        person's explicit request). Returns the run as recorded (`claimed`, not started).

        JobNotFoundError: no such job; ManualRunPendingError: its previous manual run has not
        ended yet.
        """
        run = await self._records.insert_manual_run(job_id, self._clock.now())
        self._adopt()  # this process does not hear its own notice
        return run

    async def list(
        self,
        job_id: str | None = None,
        *,
        session_key: str | None = None,
        states: Sequence[RunState] | None = None,
        limit: int | None = 100,
    ) -> list[Run]:
        return await self._records.list_runs(
            job_id=job_id, session_key=session_key, states=states, limit=limit
        )

    async def page(
        self,
        *,
        job_id: str | None = None,
        session_key: str | None = None,
        states: Sequence[RunState] | None = None,
        since: datetime | None = None,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
    ) -> Page[Run]:
        """One page of the run history, newest fire first (across jobs unless a job or a
        session is given): `next_cursor` reads on. An unknown job (neither stored nor with
        runs kept) is a JobNotFoundError, an unknown session a SessionNotFoundError; a cursor
        this list did not give an InvalidInputError.
        """
        check_limit(limit)
        if since is not None and since.tzinfo is None:
            raise InvalidInputError("since needs a zone (e.g. 2026-11-26T09:00:00Z)")
        before = None if cursor is None else decode_time_key(RUNS_CURSOR, cursor)
        if job_id is not None:
            await self.check_job(job_id)
        if session_key is not None:
            await self.check_session(session_key)
        found = await self._records.list_runs(
            job_id=job_id,
            session_key=session_key,
            states=states,
            since=since,
            before=before,
            limit=limit + 1,
        )
        return page_of(found, limit, RUNS_CURSOR, lambda r: (r.fire_at, r.id))

    async def check_job(self, job_id: str) -> None:
        """JobNotFoundError unless the job is stored or has runs kept (a deleted one's)."""
        if self._catalog is not None:
            try:
                await self._catalog.get_job(job_id)
                return
            except JobNotFoundError:
                pass
        if not await self._records.has_runs(job_id):
            raise JobNotFoundError(job_id)

    async def check_session(self, session_key: str) -> None:
        """SessionNotFoundError for an unknown session."""
        if self._sessions is not None:
            await self._sessions.get_session(session_key)

    async def usage(
        self,
        *,
        session_key: str | None = None,
        job_id: str | None = None,
        since: datetime | date | None = None,
        until: datetime | date | None = None,
        tz: str = "UTC",
    ) -> Usage:
        """Tokens, cost, runs and turns per day (in zone `tz`) and per session and job, from
        `since` (default: 30 days before `until`) to `until` (default: today), whole days
        for dates (`until`'s included), an instant needs a zone. At most MAX_USAGE_DAYS days.
        """
        zone = get_zone(tz)
        today = self._clock.now().astimezone(zone).date()
        end = _instant(today if until is None else until, zone, "until", 1)
        start = (
            end - timedelta(days=USAGE_DAYS) if since is None else _instant(since, zone, "since", 0)
        )
        if start >= end:
            raise InvalidInputError("since must be before until")
        if end - start > timedelta(days=MAX_USAGE_DAYS):
            raise InvalidInputError(f"at most {MAX_USAGE_DAYS} days at once")
        if job_id is not None:
            await self.check_job(job_id)
        if session_key is not None:
            await self.check_session(session_key)
        rows = await self._records.usage_rows(
            since=start, until=end, session_key=session_key, job_id=job_id
        )
        days: dict[tuple[date, str, str], UsageDay] = {}
        total = UsageSum()
        for row in rows:
            day = row.at.astimezone(zone).date()
            key = (day, row.session_key, row.job_id or "")
            bucket = days.get(key)
            if bucket is None:
                bucket = days[key] = UsageDay(
                    day=day, session_key=row.session_key, job_id=row.job_id
                )
            bucket.job_name = bucket.job_name or row.job_name
            bucket.add(row)
            total.add(row)
        return Usage([days[k] for k in sorted(days)], total)

    async def get(self, run_id: str) -> Run:
        return await self._records.get_run(run_id)

    async def wait(self, run_id: str, seconds: float) -> Run:
        """The run once it is terminal, or as it is after `seconds`."""
        with self._waiters.watch(run_id) as done:
            return await wait_for(
                lambda: self.get(run_id), lambda r: r.state.terminal, done, seconds, self._stopping
            )

    async def get_or_wait(self, run_id: str, wait: float = 0.0) -> Run:
        """`get`, or with `wait` > 0 `wait` (the API's `?wait=` long poll)."""
        return await self.wait(run_id, wait) if wait else await self.get(run_id)


def _instant(value: datetime | date, zone: tzinfo, name: str, days: int) -> datetime:
    """An instant as given (with its zone), or the start of a date (+ `days`) in `zone`."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidInputError(f"{name} needs a zone (e.g. 2026-11-26T09:00:00Z)")
        return value
    return datetime.combine(value + timedelta(days=days), time(), zone)
