"""Per-job policies as pure functions: arming, catch-up, overlap, limits, backoff, auto-pause."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from agentcron.config import EngineSettings
from agentcron.domain.budgets import add_run, cap_reached, over_budget, session_blocked
from agentcron.domain.jobs import AnySpec, Catchup, Job, JobPolicy, Overlap
from agentcron.domain.runs import FirePlan
from agentcron.domain.states import RunState
from agentcron.schedule import AtSpec, jittered, next_fire
from agentcron.store.writes import JobFinish, JobOutcome

_TICK = timedelta(microseconds=1)


def due_time(spec: AnySpec, policy: JobPolicy, job_id: str, fire_at: datetime) -> datetime:
    """When a fire is due: its nominal time, moved by the job's jitter if enabled."""
    return jittered(spec, fire_at, job_id) if policy.jitter else fire_at


def arm(
    spec: AnySpec, policy: JobPolicy, job_id: str, after: datetime, remaining: int | None = None
) -> tuple[datetime | None, datetime | None]:
    """(next_fire_at, next_run_at) for a job looking for its first fire after `after`."""
    if remaining is not None and remaining <= 0:
        return None, None
    fire = next_fire(spec, after)
    if fire is None or (policy.end_at is not None and fire > policy.end_at):
        return None, None
    return fire, due_time(spec, policy, job_id, fire)


def _due_fires(
    job: Job, now: datetime, settings: EngineSettings
) -> tuple[list[datetime], int, bool, datetime | None]:
    """Fires due at `now`, oldest first; how many older ones were dropped from that list;
    whether a long gap was jumped without counting; and the first fire after `now`.
    """
    spec, policy = job.spec, job.policy
    if job.next_fire_at is None:  # the claim query selects armed jobs only
        raise TypeError(f"job {job.id} has no next fire to plan from")
    # Older than this, a fire can only be missed: no need to list each one.
    keep_span = settings.misfire_grace
    if policy.catchup is not Catchup.SKIP:
        keep_span = max(policy.catchup_window, settings.misfire_grace)
    keep_from = now - keep_span
    limit = settings.catchup_scan_limit
    due: list[datetime] = []
    jumped = False
    fire: datetime | None = job.next_fire_at
    while fire is not None and fire <= now:
        if policy.end_at is not None and fire > policy.end_at:
            break
        if len(due) >= limit and fire <= keep_from and not jumped:
            # Long downtime: jump to the fires that can still matter instead of listing all.
            jumped = True
            fire = next_fire(spec, max(keep_from, due[-1]))
            continue
        due.append(fire)
        fire = next_fire(spec, fire)
    dropped = max(0, len(due) - limit)
    due = due[dropped:]
    while fire is not None and fire <= now:  # only when end_at stopped the loop
        fire = next_fire(spec, fire)
    if fire is not None and policy.end_at is not None and fire > policy.end_at:
        fire = None
    return due, dropped, jumped, fire


def plan_fires(
    job: Job, now: datetime, active: int, waiting: int, settings: EngineSettings
) -> FirePlan:
    """Decide, for a due job, which fires run, which are missed or skipped, and what is next.

    - catch-up: fires later than `misfire_grace` are late. `skip` records them missed;
      `latest` runs the newest late one (if inside the catch-up window) when none is on time;
      `all` runs every fire inside the window. Everything else is recorded missed.
    - overlap (with `active` runs of this job still queued/running, `waiting` not yet started):
      `defer` queues every fire; `skip` runs one only when nothing is active; `buffer_one`
      (the default) keeps at most one waiting.
    - limits: remaining runs and end time end the job; a spent one-shot ends it too.
    """
    policy = job.policy
    if job.next_fire_at is None:
        return FirePlan(run=[], missed=[], skipped=[], next_fire_at=None, next_run_at=None)
    due, dropped, jumped, upcoming = _due_fires(job, now, settings)
    late_cut = now - settings.misfire_grace
    window_cut = now - policy.catchup_window
    on_time = [f for f in due if f > late_cut]
    late = [f for f in due if f <= late_cut]
    if policy.catchup is Catchup.SKIP:
        run, missed = on_time, late
    elif policy.catchup is Catchup.LATEST:
        if on_time or not late or late[-1] <= window_cut:
            run, missed = on_time, late
        else:
            run, missed = [late[-1]], late[:-1]
    else:
        run = [f for f in late if f > window_cut] + on_time
        missed = [f for f in late if f <= window_cut]

    skipped: list[datetime] = []
    if policy.overlap is Overlap.SKIP:
        keep = 0 if active else 1
        run, skipped = run[:keep], run[keep:]
    elif policy.overlap is Overlap.BUFFER_ONE:
        keep = 0 if waiting else 1  # at most one fire of the job waits
        run, skipped = run[:keep], run[keep:]

    # A budget: fires whose estimate would pass it are skipped (only a budgeted job looks).
    over: list[datetime] = []
    reason = None
    if run and job.policy.budget is not None:
        reason = over_budget(job.policy.budget, job.spend, now)
        if reason is not None:
            over, run = run, []
    # Its session's budget (only a claim of a job whose session has one fills it).
    of_session = False
    if run and job.session_budget is not None:
        reason = session_blocked(job.session_budget, job.session_spend, now)
        if reason is not None:
            over, run, of_session = run, [], True

    # Only fires that run use up runs (a skipped one does not).
    if job.remaining_runs is not None and len(run) > job.remaining_runs:
        # The job ends at its last allowed run; later due fires never happen.
        run = run[: max(job.remaining_runs, 0)]
        upcoming = None

    remaining = None if job.remaining_runs is None else job.remaining_runs - len(run)
    if remaining is not None and remaining <= 0:
        upcoming = None
    next_run = due_time(job.spec, policy, job.id, upcoming) if upcoming is not None else None
    return FirePlan(
        run=run,
        missed=missed,
        skipped=skipped,
        next_fire_at=upcoming,
        next_run_at=next_run,
        unrecorded_missed=dropped,
        uncounted_missed=jumped,
        over_budget=tuple(over),
        budget_reason=reason,
        budget_notice=bool(over) and not of_session and job.last_status is not RunState.SKIPPED,
        session_budget=of_session,
    )


def backoff_for(failures: int, settings: EngineSettings) -> timedelta:
    """The pause after the n-th consecutive failure (n >= 1)."""
    steps = settings.backoff
    return steps[min(failures, len(steps)) - 1] if steps else timedelta(0)


def finish_job(job: Job, outcome: JobOutcome, settings: EngineSettings) -> JobFinish:
    """How a job whose fire just ended changes (`_finish_schedule`), and for a budgeted
    job its running figures: the run's tokens and cost added; at a cap of its budget it
    pauses (`budget_reached` says why) until a person resumes it.
    """
    finish = _finish_schedule(job, outcome, settings)
    budget = job.policy.budget
    if not outcome.budgeted or budget is None or finish.delete:
        return finish
    spend = add_run(job.spend, outcome.finished_at, outcome.tokens, outcome.cost_usd)
    values = {**finish.values, "spend": spend}
    reached = cap_reached(budget, spend, outcome.tokens, outcome.cost_usd)
    live = values.get("enabled", job.enabled) and values.get("finished_at", job.finished_at) is None
    if reached is None or not live:
        return JobFinish(values)
    values.update(
        enabled=False,
        paused_at=outcome.finished_at,
        paused_reason=f"paused: {reached}"[:500],
        next_fire_at=None,
        next_run_at=None,
    )
    return JobFinish(values, budget_reached=reached)


def _finish_schedule(job: Job, outcome: JobOutcome, settings: EngineSettings) -> JobFinish:
    """How a job whose fire just ended changes: new values (see store FINISH_COLUMNS), and
    whether it is removed.

    A manual run (a person's "run now") is only recorded as the job's last run: its failure
    count, its next fire and its life stay the schedule's.

    Success or empty resets the failure count. A failure counts; at `max_failures` in a row
    the job pauses with the reason recorded, otherwise a recurring job backs off: its next fire
    is the first one at or after finish + backoff. A job with no fire left ends: removed
    with `delete_after_run`, else done (disabled, `finished_at` set).
    """
    if outcome.manual:
        return JobFinish({"last_run_at": outcome.finished_at, "last_status": outcome.status})
    # A run a person stopped (cancelled) is no failure, nor a success: the count stays.
    if outcome.failed:
        failures = job.consecutive_failures + 1
    elif outcome.status is RunState.CANCELLED:
        failures = job.consecutive_failures
    else:
        failures = 0
    values: dict[str, Any] = {
        "last_run_at": outcome.finished_at,
        "last_status": outcome.status,
        "consecutive_failures": failures,
        "lease_owner": None,
        "lease_expires_at": None,
    }
    failures = values["consecutive_failures"]
    if outcome.failed and job.enabled:
        limit = job.policy.max_failures
        if limit and failures >= limit:
            values.update(
                enabled=False,
                paused_at=outcome.finished_at,
                paused_reason=(
                    f"auto-paused after {failures} consecutive failures; last error: "
                    f"{(outcome.error or 'unknown error')[:300]}"
                ),
                next_fire_at=None,
                next_run_at=None,
            )
            return JobFinish(values)
        if job.next_fire_at is not None and not isinstance(job.spec, AtSpec):
            until = outcome.finished_at + backoff_for(failures, settings)
            if job.next_run_at is not None and job.next_run_at < until:
                fire, due = arm(job.spec, job.policy, job.id, until - _TICK, job.remaining_runs)
                values.update(next_fire_at=fire, next_run_at=due)
    # Ended: no fire left, also when a failure's backoff pushed the next one past the end.
    ended = values.get("next_fire_at", job.next_fire_at) is None and job.enabled
    if ended and not job.policy.delete_after_run:
        # Done: listed as such (and counted toward no limit) until `retention_age` has passed.
        values.update(enabled=False, next_run_at=None, finished_at=outcome.finished_at)
    return JobFinish(values, delete=ended and job.policy.delete_after_run)
