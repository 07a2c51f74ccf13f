"""Jobs: create from `when`, read, change, pause, resume, skip, remove; the jobs-with-state
read model. Every change wakes the engine and is published as a `JobEvent`.
"""

from __future__ import annotations

import builtins
import enum
import fnmatch
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from agentcron.config import UNIFIED_SESSION_TITLE, check_model_name
from agentcron.config.engine import DEFAULT_MIN_INTERVAL
from agentcron.domain.approvals import Approval
from agentcron.domain.budgets import Budget, ContextMode, Spend, add_run, spend_at
from agentcron.domain.cadence import (
    MAX_REASON_CHARS,
    CadenceBounds,
    CadenceRefusedError,
    Reschedule,
    check_move,
)
from agentcron.domain.events import JobAction
from agentcron.domain.gates import CODE_KINDS, Gate
from agentcron.domain.jobs import (
    AnySpec,
    Catchup,
    CreatedBy,
    Job,
    JobKind,
    JobPolicy,
    JobStatus,
    NewJob,
    Overlap,
    Recall,
    RecallCallType,
    RecallState,
)
from agentcron.domain.notify import Notify
from agentcron.domain.quiet import QuietMode
from agentcron.domain.runs import Run
from agentcron.domain.states import ACTIVE_STATES
from agentcron.engine.policies import arm
from agentcron.errors import InvalidInputError
from agentcron.limits import (
    MAX_MESSAGE_CHARS,
    MAX_RUNS,
    check_job_tools,
    check_runner_url,
    check_text,
)
from agentcron.runtime.clock import Clock
from agentcron.runtime.gate import GATES_OFF
from agentcron.schedule import AtSpec, DstFold, DstGap, carry_dst, parse_when, upcoming, with_dst
from agentcron.schedule.zones import get_zone
from agentcron.service.job_requests import (
    GateIn,
    JobCreate,
    JobPatch,
    JobRenew,
    check_budget,
    check_history_tokens,
    check_interval,
)
from agentcron.service.paging import DEFAULT_PAGE, Page, check_limit, decode_cursor, page_of
from agentcron.service.runs import MAX_USAGE_DAYS, Runs, UsageSum
from agentcron.store.errors import ConflictError, SessionNotFoundError, VersionConflictError
from agentcron.store.ids import new_id
from agentcron.store.interface import JobCatalog, RunRecords, WriteQueue
from agentcron.store.writes import ArmedJob, InsertJobs, InSession, JobsInserted

_CAS_RETRIES = 5
log = logging.getLogger(__name__)


JOBS_CURSOR = "jobs"


class Keep(enum.Enum):
    """`KEEP`: leave a field as it is (where None is a value of its own)."""

    KEEP = "keep"


KEEP = Keep.KEEP

Publish = Callable[[JobAction, Job], Awaitable[None]]
"""Tells live views that a job was created, changed or deleted."""


@dataclass(frozen=True, slots=True)
class JobState:
    """A job as the API lists it: with its fire waiting or running now, if any."""

    job: Job
    active_run: Run | None = None


@dataclass(frozen=True, slots=True)
class JobDetail:
    """A job with its next fires, its last runs and what it has cost."""

    state: JobState
    upcoming: list[datetime]
    runs: list[Run]
    usage: dict[str, Any]
    waiting: Approval | None = None  # a scheduled run's call waiting for a person now


@dataclass(frozen=True, slots=True)
class JobSpend:
    """A job's spend against its budget: the running figures (today and this month, UTC;
    None: no budget) and its use per UTC day over the last days, oldest first.
    """

    job: Job
    spend: Spend | None
    days: list[tuple[date, UsageSum]]


class Jobs:
    """Create, read, change and remove jobs."""

    def __init__(
        self,
        catalog: JobCatalog,
        writes: WriteQueue,
        runs: Runs,
        usage: RunRecords,
        clock: Clock,
        *,
        wake: Callable[[datetime | None], None],
        publish: Publish,
        owner_of: Callable[[str], str] = lambda key: key,
        max_jobs: Callable[[], int | None] = lambda: None,
        retention: Callable[[], timedelta] = lambda: timedelta(days=30),
        min_interval: Callable[[], timedelta] = lambda: DEFAULT_MIN_INTERVAL,
        waiting: Callable[[str], Awaitable[Approval | None]] | None = None,
        gates: Callable[[], bool] = lambda: False,
        tool_names: Callable[[], Collection[str] | None] = lambda: None,
    ) -> None:
        self._catalog = catalog
        # a job's scheduled run waiting for a person (`Approvals.waiting_of_job`)
        self._waiting = waiting
        self._writes = writes  # the journal: concurrent creates share one transaction
        self._runs = runs
        self._usage = usage
        self._clock = clock
        self._wake = wake  # tells the engine a fire may be due at that instant
        self._publish = publish
        self._owner_of = owner_of  # the session a chat's jobs bind to (unified mode)
        self._max_jobs = max_jobs
        self._retention = retention  # how long a done job stays listed
        self._min_interval = min_interval  # `[engine] min_interval`: requests' schedules
        self._gates = gates  # `[engine] gates`: requests' gates may run code
        # The tools a job's allow-list may name (names or globs: an MCP server's prefix_*);
        # None: not known here (a runner of your own), only the names' form is checked.
        self._tool_names = tool_names

    def checked_gate(self, given: GateIn | None) -> Gate | None:
        """A request's gate, checked: in its bounds, and one that runs code (command,
        python) only where the setting `[engine] gates` allows it (`InvalidInputError`).
        """
        if given is None:
            return None
        gate = given.to_gate()
        if gate.kind in CODE_KINDS and not self._gates():
            raise InvalidInputError(f"gate.kind {gate.kind.value}: {GATES_OFF}")
        return gate

    def check_tools(self, tools: Sequence[str] | None) -> tuple[str, ...] | None:
        """A job's tool allow-list, checked (InvalidInputError for a bad or unknown name)."""
        names = check_job_tools(None if tools is None else list(tools))
        known = self._tool_names()
        if names is None or known is None:
            return names
        unknown = [n for n in names if not any(fnmatch.fnmatchcase(n, k) for k in known)]
        if unknown:
            listed = ", ".join(sorted(known)[:40])
            raise InvalidInputError(
                f"tools: no tool named {', '.join(unknown)} (the tools are: {listed})"
            )
        return names

    def check_interval(self, spec: AnySpec) -> None:
        """Refuse a schedule from a person or an agent that recurs more often than the
        setting `[engine] min_interval` allows (TooFrequentError): the API's, the CLI's and
        the agent tools' one rule.
        """
        check_interval(spec, self._clock.now(), self._min_interval())

    # -- create ---------------------------------------------------------------------------

    def _armed(self, new: NewJob, now: datetime) -> ArmedJob:
        job_id = new_id()
        fire, due = arm(new.spec, new.policy, job_id, now, new.policy.max_runs)
        return ArmedJob(job_id, new, fire, due)

    async def create(
        self,
        *,
        name: str,
        when: str | None = None,
        spec: AnySpec | None = None,
        tz: str = "UTC",
        message: str = "",
        session_key: str | None = None,
        kind: JobKind = JobKind.AGENT_TURN,
        created_by: CreatedBy = CreatedBy.API,
        overlap: Overlap = Overlap.BUFFER_ONE,
        catchup: Catchup = Catchup.LATEST,
        catchup_window: timedelta = timedelta(hours=24),
        max_failures: int = 5,
        max_runs: int | None = None,
        end_at: datetime | None = None,
        delete_after_run: bool = False,
        jitter: bool = False,
        notify: Notify = Notify.ALWAYS,
        quiet: QuietMode = QuietMode.HOLD,
        dst_gap: DstGap | str | None = None,
        dst_fold: DstFold | str | None = None,
        cadence: CadenceBounds | None = None,
        idempotency_key: str | None = None,
        enabled: bool = True,
        model: str | None = None,
        call_type: RecallCallType | None = None,
        internal_comment: str | None = None,
        runner_url: str | None = None,
        budget: Budget | None = None,
        context: ContextMode = ContextMode.CONTINUE,
        history_tokens: int | None = None,
        tools: Sequence[str] | None = None,
    ) -> Job:
        """Create one job from `when` (anything parse_when reads) or a ready `spec`; `model`
        names the model its turns run on (None: the runner's default), `runner_url` the runner
        its fires run on (None: its session's, else the process's); a recall keeps its
        `call_type` and `internal_comment`. `dst_gap` / `dst_fold` set a wall-clock schedule's
        DST policy (None: the spec's own, by default shift / first); another value on an
        interval or a one-time schedule is an InvalidSpecError. `budget` caps its tokens and
        cost, `context`, `history_tokens` and `tools` shape its turns (domain/budgets.py).
        """
        now = self._clock.now()
        checked_tools = self.check_tools(tools)
        new = _new_job(
            now,
            name=name,
            when=when,
            spec=spec,
            tz=tz,
            message=message,
            session_key=session_key,
            kind=kind,
            created_by=created_by,
            overlap=overlap,
            catchup=catchup,
            catchup_window=catchup_window,
            max_failures=max_failures,
            max_runs=max_runs,
            end_at=end_at,
            delete_after_run=delete_after_run,
            jitter=jitter,
            notify=notify,
            quiet=quiet,
            dst_gap=dst_gap,
            dst_fold=dst_fold,
            cadence=cadence,
            idempotency_key=idempotency_key,
            enabled=enabled,
            model=model,
            runner_url=runner_url,
            budget=budget,
            context=context,
            history_tokens=history_tokens,
            tools=checked_tools,
        )
        if call_type is not None or internal_comment is not None:
            new = _with_recall_note(new, call_type, internal_comment)
        return (await self.create_many([new]))[0]

    async def create_many(self, new_jobs: Sequence[NewJob]) -> list[Job]:
        """Create many jobs in one transaction (concurrent calls share one: the journal)."""
        now = self._clock.now()
        armed = [self._armed(n, now) for n in new_jobs]
        return await self._insert(InsertJobs(armed, now, max_jobs=self._max_jobs()))

    async def create_in_session(self, body: JobCreate) -> Job:
        """A job from the API's request, bound to the existing session `body.session_key`
        (its zone by default; in unified mode web chats' jobs bind to the shared session).

        The session is read in the insert's transaction (`InSession`), not before it: one
        write per request, shared with the concurrent ones. The answers are those of a read
        first: a missing session before anything wrong with the request.
        """
        now = self._clock.now()
        key = body.session_key
        owner = self._owner_of(key)
        end_at = body.end_at
        minimum = self._min_interval()
        gate = self.checked_gate(body.gate)
        tools = self.check_tools(body.tools)

        def armed(session_tz: str) -> ArmedJob:
            # Runs inside the transaction, on the database thread: pure, `now` fixed above.
            new = _new_job(
                now,
                name=body.name,
                when=body.when,
                tz=body.tz or session_tz,
                message=body.message,
                session_key=owner,
                overlap=body.overlap,
                catchup=body.catchup,
                max_runs=body.max_runs,
                end_at=_aware(end_at, "end_at"),
                idempotency_key=body.idempotency_key,
                model=body.model,
                runner_url=body.runner_url,
                delete_after_run=body.delete_after_run,
                notify=body.notify,
                quiet=body.quiet,
                dst_gap=body.dst_gap,
                dst_fold=body.dst_fold,
                cadence=None if body.cadence is None else body.cadence.bounds(),
                gate=gate,
                budget=None if body.budget is None else body.budget.budget(),
                context=body.context,
                history_tokens=body.history_tokens,
                tools=tools,
            )
            check_interval(new.spec, now, minimum)
            return self._armed(new, now)

        shared = None if owner == key else owner
        place = InSession(key, armed, shared, None if shared is None else UNIFIED_SESSION_TITLE)
        try:
            (job,) = await self._insert(
                InsertJobs([], now, max_jobs=self._max_jobs(), in_session=place)
            )
        except SessionNotFoundError as exc:
            raise SessionNotFoundError(
                key, f"no session {key!r}: create it first with POST /api/sessions"
            ) from exc
        return job

    async def _insert(self, write: InsertJobs) -> list[Job]:
        """Insert through the journal, then wake the engine for the earliest new fire and
        tell live views.
        """
        inserted = await self._writes.write(write)
        if not isinstance(inserted, JobsInserted):
            raise TypeError(f"creating jobs was answered with {inserted!r}")
        if inserted.refused is not None:
            raise inserted.refused
        created = inserted.jobs
        self._wake(min((j.next_run_at for j in created if j.next_run_at), default=None))
        for job in created:
            await self._publish(JobAction.CREATED, job)
        return created

    # -- read -----------------------------------------------------------------------------

    async def count(self) -> int:
        """How many jobs are stored (system jobs included); one cheap read, so it also says
        whether the database answers (`/readyz`).
        """
        return await self._catalog.count_jobs()

    async def get(self, job_id: str) -> Job:
        return await self._catalog.get_job(job_id)

    async def usage(self, job_id: str) -> dict[str, Any]:
        """Tokens and cost summed over the job's run records: what this schedule costs."""
        return await self._usage.usage_totals(job_id=job_id)

    async def spend(self, job_id: str, days: int = 30) -> JobSpend:
        """A job's spend against its budget: its running figures as of now, and its use per
        UTC day over the last `days` days (today included; days without use count zero).
        """
        if not 1 <= days <= MAX_USAGE_DAYS:
            raise InvalidInputError(f"days must be between 1 and {MAX_USAGE_DAYS} (got {days})")
        job = await self.get(job_id)
        now = self._clock.now()
        today = now.astimezone(UTC).date()
        first = today - timedelta(days=days - 1)
        found = await self._runs.usage(job_id=job_id, since=first, until=today, tz="UTC")
        per_day = {first + timedelta(days=i): UsageSum() for i in range(days)}
        for row in found.days:
            bucket = per_day.get(row.day)
            if bucket is not None:
                bucket.merge(row)
        spent = None if job.policy.budget is None else spend_at(job.spend, now)
        return JobSpend(job, spent, sorted(per_day.items()))

    async def _spent_so_far(self, job_id: str) -> Spend:
        """What a job spent this UTC day and month, with the estimate of one run from its
        last runs: where a budget given to it later starts.
        """
        now = self._clock.now()
        today = now.astimezone(UTC).date()
        found = await self._runs.usage(
            job_id=job_id, since=today.replace(day=1), until=today, tz="UTC"
        )
        day, month = UsageSum(), UsageSum()
        for row in found.days:
            month.merge(row)
            if row.day == today:
                day.merge(row)
        estimate: Spend | None = None
        recent = [r for r in await self._runs.list(job_id, limit=20) if r.usage]
        for run in reversed(recent[:5]):  # oldest first, as they ended
            usage = run.usage or {}
            tokens = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
            cost = usage.get("cost_usd")
            at = run.finished_at or now
            estimate = add_run(
                estimate, at, tokens, float(cost) if isinstance(cost, int | float) else None
            )
        base = spend_at(None, now)
        return replace(
            base,
            day_usd=round(day.cost_usd or 0.0, 6),
            day_tokens=day.input_tokens + day.output_tokens,
            month_usd=round(month.cost_usd or 0.0, 6),
            month_tokens=month.input_tokens + month.output_tokens,
            est_usd=0.0 if estimate is None else estimate.est_usd,
            est_tokens=0 if estimate is None else estimate.est_tokens,
            est_runs=0 if estimate is None else estimate.est_runs,
        )

    async def for_session(self, session_key: str) -> builtins.list[Job]:
        """The jobs and recall a chat shows: its own, and in unified mode also those of
        `unified:default` (which every web chat lists).
        """
        found: builtins.list[Job] = []
        for key in dict.fromkeys([session_key, self._owner_of(session_key)]):
            found.extend(await self.list(session_key=key))
        return found

    async def list(
        self,
        *,
        session_key: str | None = None,
        kind: JobKind | None = None,
        enabled: bool | None = None,
        limit: int | None = None,
    ) -> builtins.list[Job]:
        return await self._catalog.list_jobs(
            session_key=session_key, kind=kind, enabled=enabled, limit=limit
        )

    async def page(
        self,
        *,
        session_key: str | None = None,
        kind: JobKind | None = None,
        enabled: bool | None = None,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
    ) -> Page[JobState]:
        """One page of the jobs with their state, or of a chat's (its own and, in unified
        mode, the shared ones), oldest first (by id); `next_cursor` reads on.
        """
        check_limit(limit)
        after = None if cursor is None else str(decode_cursor(JOBS_CURSOR, cursor, (str,))[0])
        if session_key is None:
            found = await self._catalog.list_jobs(
                kind=kind, enabled=enabled, limit=limit + 1, after=after
            )
        else:
            found = sorted(
                (
                    j
                    for j in await self.for_session(session_key)
                    if (kind is None or j.kind is kind)
                    and (enabled is None or j.enabled is enabled)
                    and (after is None or j.id > after)
                ),
                key=lambda j: j.id,
            )[: limit + 1]
        page = page_of(found, limit, JOBS_CURSOR, lambda j: (j.id,))
        return Page(await self.with_state(page.items), page.next_cursor)

    async def with_state(self, jobs: Sequence[Job]) -> builtins.list[JobState]:
        """Each job with the run it has waiting or running now (one read of active runs)."""
        if not jobs:
            return []
        active = await self._runs.list(states=sorted(ACTIVE_STATES), limit=None)
        ids = {j.id for j in jobs}
        found: dict[str, Run] = {}
        for run in sorted(active, key=lambda r: r.fire_at):
            if run.job_id in ids:
                found.setdefault(run.job_id, run)
        return [JobState(j, found.get(j.id)) for j in jobs]

    async def detail(self, job_id: str) -> JobDetail:
        """The job with its next 5 fire times, its last 10 runs and what it cost."""
        job = await self.get(job_id)
        (state,) = await self.with_state([job])
        nxt = job.next_fire_at
        fires = [] if nxt is None else [nxt, *upcoming(job.spec, nxt, 4)]
        runs = await self._runs.list(job.id, limit=10)
        waiting = None if self._waiting is None else await self._waiting(job.id)
        return JobDetail(state, fires, runs, await self.usage(job.id), waiting)

    async def recalls(
        self,
        session_key: str,
        *,
        states: Iterable[RecallState] | None = None,
        limit: int = 100,
    ) -> builtins.list[Recall]:
        """A session's recalls (seed 003): the pending (or paused) one first, then those that
        fired or were cancelled, newest first; `states` keeps only some of them.
        """
        wanted = None if states is None else set(states)
        live = {RecallState.PENDING, RecallState.PAUSED}
        found: builtins.list[Recall] = []
        if wanted is None or wanted & live:
            stored = await self.list(session_key=session_key, kind=JobKind.RECALL)
            found.extend(r for r in map(Recall.live, stored) if wanted is None or r.state in wanted)
        ended = None if wanted is None else wanted - live
        if ended is None or ended:
            found.extend(await self._catalog.recall_history(session_key, states=ended, limit=limit))
        return found[:limit]

    # -- change ---------------------------------------------------------------------------

    async def update(
        self,
        job_id: str,
        *,
        name: str | None = None,
        message: str | None = None,
        when: str | None = None,
        spec: AnySpec | None = None,
        tz: str | None = None,
        expected_version: int | None = None,
        model: str | Keep | None = KEEP,
        runner_url: str | Keep | None = KEEP,
        dst_gap: DstGap | str | None = None,
        dst_fold: DstFold | str | None = None,
        context: ContextMode | None = None,
        history_tokens: int | Keep | None = KEEP,
        tools: Sequence[str] | Keep | None = KEEP,
        **policy_changes: Any,
    ) -> Job:
        """Change a job. A new schedule re-computes the next fire at once; `model=None` goes
        back to the runner's default model, `runner_url=None` to its session's runner. A new
        `when` keeps the job's DST policy (when both are wall-clock schedules; a `spec` is
        taken as it is); `dst_gap` / `dst_fold` change it. `budget=None` removes its budget,
        `history_tokens=None` its own history budget, `tools=None` its tool allow-list. A
        budget given to a job that had none starts from what the job spent this UTC day and
        month, and the mean of its last runs.

        `expected_version` makes it a compare-and-set (VersionConflictError when the job moved
        on); without it the update retries on concurrent changes.
        """

        checked_tools = KEEP if isinstance(tools, Keep) else self.check_tools(tools)
        if not isinstance(history_tokens, Keep):
            check_history_tokens(history_tokens)
        if context is not None:
            context = ContextMode(context)
        seed: Spend | None = None
        if "budget" in policy_changes:
            policy_changes["budget"] = check_budget(policy_changes["budget"])
            if policy_changes["budget"] is not None:
                seed = await self._spent_so_far(job_id)

        def compute(job: Job, now: datetime) -> dict[str, Any]:
            changes: dict[str, Any] = {}
            if context is not None:
                changes["context"] = context.value
            if not isinstance(history_tokens, Keep):
                changes["history_tokens"] = history_tokens
            if not isinstance(checked_tools, Keep):
                changes["tools"] = None if checked_tools is None else list(checked_tools)
            if "budget" in policy_changes:
                if policy_changes["budget"] is None:
                    changes["spend"] = None
                elif job.policy.budget is None:
                    changes["spend"] = None if seed is None else seed.as_dict()
            _check_bounds(
                name=name,
                message=message,
                max_runs=policy_changes.get("max_runs"),
                end_at=policy_changes.get("end_at"),
                now=now,
            )
            if name is not None:
                changes["name"] = name
            if message is not None:
                changes["message"] = message
            if not isinstance(model, Keep):
                changes["model"] = check_model_name(model)
            if not isinstance(runner_url, Keep):
                changes["runner_url"] = check_runner_url(runner_url)
            new_spec = spec
            if when is not None:
                new_spec = carry_dst(job.spec, parse_when(when, now, tz or job.spec.tz))
            elif tz is not None and new_spec is None:
                get_zone(tz)  # an unknown zone is the caller's error (InvalidZoneError)
                new_spec = type(job.spec).model_validate({**job.spec.model_dump(), "tz": tz})
            if dst_gap is not None or dst_fold is not None:
                new_spec = with_dst(new_spec or job.spec, dst_gap, dst_fold)
            policy = replace(job.policy, **policy_changes) if policy_changes else job.policy
            if policy_changes:
                changes["policy"] = policy
            if new_spec is not None or policy_changes:
                changes["spec"] = new_spec or job.spec
                remaining = job.remaining_runs
                if "max_runs" in policy_changes:
                    remaining = (
                        None if policy.max_runs is None else max(policy.max_runs - job.run_count, 0)
                    )
                    changes["remaining_runs"] = remaining
                if job.enabled:
                    fire, due = arm(changes["spec"], policy, job.id, now, remaining)
                    changes.update(next_fire_at=fire, next_run_at=due)
            return changes

        return await self._change(job_id, compute, JobAction.UPDATED, expected_version)

    async def apply_renew(self, job_id: str, body: JobRenew) -> JobState:
        """The API's renew: `renew` with the body's end and runs."""
        job = await self.renew(job_id, end_at=_aware(body.end_at, "end_at"), runs=body.runs)
        (state,) = await self.with_state([job])
        return state

    async def apply_patch(self, job_id: str, body: JobPatch) -> JobState:
        """The API's PATCH: change what is given; `enabled` pauses or resumes."""
        changes = body.model_dump(exclude_unset=True, exclude={"enabled", "budget"})
        if "end_at" in changes:
            _aware(changes["end_at"], "end_at")
        policy: dict[str, Any] = {
            k: changes.pop(k)
            for k in ("overlap", "catchup", "max_runs", "end_at", "notify", "quiet")
            if k in changes
        }
        if "cadence" in changes:  # the bounds as a whole; null: the agent may not move it
            changes.pop("cadence")
            policy["cadence"] = None if body.cadence is None else body.cadence.bounds()
        if changes.pop("gate", KEEP) is not KEEP:
            policy["gate"] = self.checked_gate(body.gate)
        if "budget" in body.model_fields_set:
            policy["budget"] = None if body.budget is None else body.budget.budget()
        job = await self.get(job_id)
        if body.when is not None:  # checked as a new job's: before anything changes
            self.check_interval(parse_when(body.when, self._clock.now(), body.tz or job.spec.tz))
        if changes or policy:
            job = await self.update(job_id, **changes, **policy)
        if body.enabled is False and job.enabled:
            job = await self.pause(job_id)
        elif body.enabled is True and not job.enabled:
            job = await self.resume(job_id)
        (state,) = await self.with_state([job])
        return state

    async def reschedule(
        self,
        job_id: str,
        to: datetime,
        *,
        reason: str,
        run_id: str | None = None,
    ) -> Job:
        """Move the job's next fire to `to`: the agent's adaptive cadence, within the bounds a
        person set on the job (`JobPolicy.cadence`; CadenceRefusedError, its message for the
        model, outside them or without them). The move is kept on the job (`rescheduled`)
        and, from a fire's turn, on that run (`run_id`: its `reschedules`), in one write;
        after the moved fire the schedule goes on at its own cadence.
        """
        reason = " ".join(reason.split())[:MAX_REASON_CHARS]
        if not reason:
            raise InvalidInputError("say why the next run moves (`reason`)")
        attempt = 0
        while True:
            job = await self._catalog.get_job(job_id)
            now = self._clock.now()
            if job.status is not JobStatus.ACTIVE or job.next_fire_at is None:
                raise CadenceRefusedError(
                    f"“{job.name}” is {job.status.value} and has no next run to move; "
                    "it must be active"
                )
            if isinstance(job.spec, AtSpec):
                raise CadenceRefusedError(
                    f"“{job.name}” runs once; change its time with update instead"
                )
            check_move(job.policy.cadence, now, to, job.spec.tz)
            move = Reschedule(job.id, job.next_fire_at, to, reason, now, run_id)
            changes = {"next_fire_at": to, "next_run_at": to, "rescheduled": move.to_data()}
            try:
                updated = await self._catalog.reschedule_job(
                    job_id,
                    changes,
                    now,
                    expected_version=job.version,
                    run_id=run_id,
                    note=move.to_data(),
                )
            except VersionConflictError:
                attempt += 1
                if attempt >= _CAS_RETRIES:
                    raise
                continue
            log.info(
                "job rescheduled",
                extra={"job_id": job.id, "from": job.next_fire_at, "to": to, "run_id": run_id},
            )
            self._wake(updated.next_run_at)
            await self._publish(JobAction.UPDATED, updated)
            return updated

    async def pause(self, job_id: str, reason: str = "paused by user") -> Job:
        def compute(job: Job, now: datetime) -> dict[str, Any]:
            return {
                "enabled": False,
                "paused_reason": reason,
                "paused_at": now,
                "next_fire_at": None,
                "next_run_at": None,
            }

        return await self._change(job_id, compute, JobAction.PAUSED)

    async def resume(self, job_id: str) -> Job:
        """Re-enable a job from now on (fires due while it was paused do not run); a done job
        comes back only when its schedule (e.g. a new `when`) has a fire left.
        """

        def compute(job: Job, now: datetime) -> dict[str, Any]:
            fire, due = arm(job.spec, job.policy, job.id, now, job.remaining_runs)
            if fire is None and job.finished_at is not None:
                return {}  # done, and its schedule (unchanged or edited) has no fire left
            return {
                "finished_at": None,
                "enabled": True,
                "paused_reason": None,
                "paused_at": None,
                "consecutive_failures": 0,
                "next_fire_at": fire,
                "next_run_at": due,
            }

        return await self._change(job_id, compute, JobAction.RESUMED)

    async def renew(
        self, job_id: str, *, end_at: datetime | None = None, runs: int | None = None
    ) -> Job:
        """Give a job that ends (`end_at`, `max_runs`) more time: a later `end_at` and/or
        `runs` more runs. A done job comes back (armed from now on); a paused one stays paused
        with its new limits. Its end may be announced again (`JobEnding`) when it nears.
        """
        if end_at is None and runs is None:
            raise InvalidInputError("renew needs a new end_at, more runs, or both")
        if runs is not None and not 1 <= runs <= MAX_RUNS:
            raise InvalidInputError(f"runs must be between 1 and {MAX_RUNS} (got {runs})")

        def compute(job: Job, now: datetime) -> dict[str, Any]:
            _check_bounds(name=None, message=None, max_runs=None, end_at=end_at, now=now)
            policy, remaining = job.policy, job.remaining_runs
            if end_at is not None:
                policy = replace(policy, end_at=end_at)
            if runs is not None:
                if policy.max_runs is None:
                    raise InvalidInputError(
                        f"job {job.id!r} has no run limit (max_runs): there are no runs to add"
                    )
                if policy.max_runs + runs > MAX_RUNS:
                    raise InvalidInputError(f"max_runs would pass {MAX_RUNS}")
                policy = replace(policy, max_runs=policy.max_runs + runs)
                remaining = (remaining or 0) + runs
            changes: dict[str, Any] = {
                "policy": policy,
                "remaining_runs": remaining,
                "ending_warned_at": None,
            }
            if job.enabled or job.finished_at is not None:
                fire, due = arm(job.spec, policy, job.id, now, remaining)
                if fire is None:
                    raise InvalidInputError(
                        f"job {job.id!r} would still have no fire left: give a later end_at "
                        "or more runs"
                    )
                changes.update(next_fire_at=fire, next_run_at=due)
                if job.finished_at is not None:
                    changes.update(
                        finished_at=None, enabled=True, paused_reason=None, paused_at=None
                    )
            return changes

        return await self._change(job_id, compute, JobAction.UPDATED)

    async def skip_next(self, job_id: str) -> Job:
        """Skip the job's next fire; the one after it is computed from now at the earliest,
        so a skip never schedules into the past. A paused job has no next fire to skip
        (ConflictError): arming it here would make it fire while paused.
        """

        def compute(job: Job, now: datetime) -> dict[str, Any]:
            if not job.enabled:
                raise ConflictError(f"job {job.id!r} is paused: resume it first")
            after = max(job.next_fire_at or now, now)
            fire, due = arm(job.spec, job.policy, job.id, after, job.remaining_runs)
            return {"next_fire_at": fire, "next_run_at": due}

        return await self._change(job_id, compute, JobAction.SKIPPED)

    async def _change(
        self,
        job_id: str,
        compute: Callable[[Job, datetime], dict[str, Any]],
        action: JobAction,
        expected_version: int | None = None,
    ) -> Job:
        """Read, compute the changes, compare-and-set; retry on a concurrent change unless the
        caller pinned `expected_version`. Wakes the engine: the next fire may have moved.
        """
        attempt = 0
        while True:
            job = await self._catalog.get_job(job_id)
            now = self._clock.now()
            try:
                updated = await self._catalog.update_job(
                    job_id, compute(job, now), now, expected_version=expected_version or job.version
                )
            except VersionConflictError:
                attempt += 1
                if expected_version is not None or attempt >= _CAS_RETRIES:
                    raise
                continue
            # A later or removed fire needs nothing: the engine finds it at its next wake-up.
            self._wake(updated.next_run_at)
            await self._publish(action, updated)
            return updated

    async def sweep_finished(self) -> builtins.list[Job]:
        """Remove the done jobs that finished more than `retention_age` ago (with the engine's
        periodic reap) and tell live views; returns them.
        """
        swept = await self._catalog.delete_finished_jobs(self._clock.now() - self._retention())
        for job in swept:
            await self._publish(JobAction.DELETED, job)
        return swept

    async def delete(self, job_id: str, *, allow_system: bool = False) -> Job:
        """Delete a job; a deleted recall is cancelled and stays readable in `recalls`."""
        job = await self._catalog.delete_job(
            job_id, allow_system=allow_system, now=self._clock.now()
        )
        await self._publish(JobAction.DELETED, job)
        return job


def _new_job(
    now: datetime,
    *,
    name: str,
    when: str | None = None,
    spec: AnySpec | None = None,
    tz: str = "UTC",
    message: str = "",
    session_key: str | None = None,
    kind: JobKind = JobKind.AGENT_TURN,
    created_by: CreatedBy = CreatedBy.API,
    overlap: Overlap = Overlap.BUFFER_ONE,
    catchup: Catchup = Catchup.LATEST,
    catchup_window: timedelta = timedelta(hours=24),
    max_failures: int = 5,
    max_runs: int | None = None,
    end_at: datetime | None = None,
    delete_after_run: bool = False,
    jitter: bool = False,
    notify: Notify = Notify.ALWAYS,
    quiet: QuietMode = QuietMode.HOLD,
    dst_gap: DstGap | str | None = None,
    dst_fold: DstFold | str | None = None,
    cadence: CadenceBounds | None = None,
    idempotency_key: str | None = None,
    enabled: bool = True,
    model: str | None = None,
    runner_url: str | None = None,
    gate: Gate | None = None,
    budget: Budget | None = None,
    context: ContextMode = ContextMode.CONTINUE,
    history_tokens: int | None = None,
    tools: tuple[str, ...] | None = None,
) -> NewJob:
    """A job to create, checked (InvalidInputError, ScheduleError), its schedule read at `now`."""
    if (when is None) == (spec is None):
        raise InvalidInputError("give exactly one of `when` or `spec`")
    _check_bounds(name=name, message=message, max_runs=max_runs, end_at=end_at, now=now)
    resolved = spec if spec is not None else parse_when(when or "", now, tz)
    resolved = with_dst(resolved, dst_gap, dst_fold)
    policy = JobPolicy(
        overlap=Overlap(overlap),
        catchup=Catchup(catchup),
        catchup_window=catchup_window,
        max_failures=max_failures,
        max_runs=max_runs,
        end_at=end_at,
        delete_after_run=delete_after_run,
        jitter=jitter,
        notify=Notify(notify),
        quiet=QuietMode(quiet),
        cadence=cadence,
        gate=gate,
        budget=check_budget(budget),
    )
    return NewJob(
        name=name,
        spec=resolved,
        message=message,
        session_key=session_key,
        kind=JobKind(kind),
        created_by=CreatedBy(created_by),
        policy=policy,
        idempotency_key=idempotency_key,
        enabled=enabled,
        model=check_model_name(model),
        runner_url=check_runner_url(runner_url),
        context=ContextMode(context),
        history_tokens=check_history_tokens(history_tokens),
        tools=tools,
    )


def _with_recall_note(
    new: NewJob, call_type: RecallCallType | None, internal_comment: str | None
) -> NewJob:
    """`new` with what a recall keeps of how it was asked for (InvalidInputError on any other
    kind of job, or a comment that cannot be stored).
    """
    if new.kind is not JobKind.RECALL:
        raise InvalidInputError("call_type and internal_comment are for recalls only")
    if internal_comment is not None:
        check_text(internal_comment, "internal_comment")
        if len(internal_comment) > MAX_MESSAGE_CHARS:
            raise InvalidInputError(
                f"internal_comment has at most {MAX_MESSAGE_CHARS} characters "
                f"(this one has {len(internal_comment)})"
            )
    kept = None if call_type is None else RecallCallType(call_type)
    return replace(new, call_type=kept, internal_comment=internal_comment)


def _check_bounds(
    *,
    name: str | None,
    message: str | None,
    max_runs: int | None,
    end_at: datetime | None,
    now: datetime,
) -> None:
    """The limits of `agentcron.limits` for the library as for the API (InvalidInputError)."""
    if name is not None:
        check_text(name, "name")
    if message is not None:
        check_text(message, "message")
    if max_runs is not None and not 1 <= max_runs <= MAX_RUNS:
        raise InvalidInputError(f"max_runs must be between 1 and {MAX_RUNS} (got {max_runs})")
    if end_at is not None:
        _aware(end_at, "end_at")
        if end_at <= now:
            raise InvalidInputError(
                f"end_at {end_at.isoformat()} is not in the future: the job could never fire"
            )


def _aware(value: datetime | None, field: str) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise InvalidInputError(f"{field} needs a UTC offset, e.g. 2026-12-31T18:00:00+01:00")
    return value
