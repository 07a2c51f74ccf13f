"""Pure job policies (engine/policies.py): arming, catch-up, overlap, limits, backoff, auto-pause.

Table-driven; fixed instants, no clock, no database. Every job names its overlap and catch-up
policy explicitly (the defaults may change).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentcron.config import EngineSettings
from agentcron.domain.budgets import Budget, Spend
from agentcron.domain.jobs import (
    AnySpec,
    Catchup,
    CreatedBy,
    Job,
    JobKind,
    JobPolicy,
    JobStatus,
    Overlap,
)
from agentcron.domain.states import RunState
from agentcron.engine.policies import arm, backoff_for, due_time, finish_job, plan_fires
from agentcron.schedule import AtSpec, CronSpec, EverySpec, jittered
from agentcron.store.writes import JobOutcome

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
MIN = timedelta(minutes=1)
H = timedelta(hours=1)
D = timedelta(days=1)

EVERY_MIN = EverySpec(seconds=60, anchor=T0)
HOURLY = EverySpec(seconds=3600, anchor=T0)

# misfire_grace 60 s, scan limit 1000, backoff 30 s / 1 min / 5 min (stated, not defaulted)
SETTINGS = EngineSettings(
    misfire_grace=MIN,
    catchup_scan_limit=1000,
    backoff=(30 * S, MIN, 5 * MIN),
)


def make_job(
    spec: AnySpec = EVERY_MIN,
    *,
    overlap: Overlap,
    catchup: Catchup = Catchup.LATEST,
    catchup_window: timedelta = D,
    next_fire_at: datetime | None = None,
    next_run_at: datetime | None = None,
    remaining_runs: int | None = None,
    end_at: datetime | None = None,
    max_failures: int = 5,
    consecutive_failures: int = 0,
    enabled: bool = True,
    delete_after_run: bool = False,
    jitter: bool = False,
    job_id: str = "01JOBPOLICYTEST",
) -> Job:
    """A stored job as the engine sees it; next_run_at defaults to next_fire_at."""
    policy = JobPolicy(
        overlap=overlap,
        catchup=catchup,
        catchup_window=catchup_window,
        max_failures=max_failures,
        max_runs=remaining_runs,
        end_at=end_at,
        delete_after_run=delete_after_run,
        jitter=jitter,
    )
    return Job(
        id=job_id,
        name="policy test",
        kind=JobKind.AGENT_TURN,
        session_key="test:policies",
        spec=spec,
        message="tick",
        enabled=enabled,
        paused_reason=None,
        paused_at=None,
        created_by=CreatedBy.API,
        policy=policy,
        next_fire_at=next_fire_at,
        next_run_at=next_run_at if next_run_at is not None else next_fire_at,
        last_run_at=None,
        last_status=None,
        consecutive_failures=consecutive_failures,
        run_count=0,
        remaining_runs=remaining_runs,
        idempotency_key=None,
        lease_owner=None,
        lease_expires_at=None,
        version=1,
        created_at=T0 - D,
        updated_at=T0 - D,
    )


def hours(*n: int) -> list[datetime]:
    return [T0 + k * H for k in n]


# -- plan_fires: catch-up -----------------------------------------------------------------

# An hourly job whose next fire is T0 (fires T0, T0+1h, T0+2h, T0+3h due at `now`).
# `late` = older than misfire_grace (60 s) at `now`.
# fmt: off
CATCHUP_CASES = [
    # id, catchup, window, now, run, missed, next
    ("on-time/latest", Catchup.LATEST, D, T0 + 10 * S, [T0], [], T0 + H),
    ("on-time/skip", Catchup.SKIP, D, T0 + 10 * S, [T0], [], T0 + H),
    ("on-time/all", Catchup.ALL, D, T0 + 10 * S, [T0], [], T0 + H),
    ("on-time at grace edge/skip", Catchup.SKIP, D, T0 + 59 * S, [T0], [], T0 + H),
    ("late by exactly grace/skip", Catchup.SKIP, D, T0 + MIN, [], [T0], T0 + H),
    # all four late (now = T0+3h30m)
    ("late/skip", Catchup.SKIP, D, T0 + 3.5 * H, [], hours(0, 1, 2, 3), T0 + 4 * H),
    ("late/latest", Catchup.LATEST, D, T0 + 3.5 * H, hours(3), hours(0, 1, 2), T0 + 4 * H),
    ("late/all", Catchup.ALL, D, T0 + 3.5 * H, hours(0, 1, 2, 3), [], T0 + 4 * H),
    # window 2h: cut at T0+1h30m -> only T0+2h and T0+3h are inside it
    ("late/all/window", Catchup.ALL, 2 * H, T0 + 3.5 * H, hours(2, 3), hours(0, 1), T0 + 4 * H),
    ("late/latest/window", Catchup.LATEST, 2 * H, T0 + 3.5 * H, hours(3), hours(0, 1, 2), T0 + 4 * H),
    # window 10 min: even the newest late fire is outside it
    ("outside window/latest", Catchup.LATEST, 10 * MIN, T0 + 3.5 * H, [], hours(0, 1, 2, 3), T0 + 4 * H),
    ("outside window/all", Catchup.ALL, 10 * MIN, T0 + 3.5 * H, [], hours(0, 1, 2, 3), T0 + 4 * H),
    # three late and one on time (now = T0+3h+30s)
    ("mixed/skip", Catchup.SKIP, D, T0 + 3 * H + 30 * S, hours(3), hours(0, 1, 2), T0 + 4 * H),
    ("mixed/latest: the on-time one wins", Catchup.LATEST, D, T0 + 3 * H + 30 * S, hours(3), hours(0, 1, 2), T0 + 4 * H),
    ("mixed/all", Catchup.ALL, D, T0 + 3 * H + 30 * S, hours(0, 1, 2, 3), [], T0 + 4 * H),
    ("mixed/all/window", Catchup.ALL, 2 * H, T0 + 3 * H + 30 * S, hours(2, 3), hours(0, 1), T0 + 4 * H),
]
# fmt: on


@pytest.mark.parametrize(
    ("catchup", "window", "now", "run", "missed", "upcoming"),
    [pytest.param(*case[1:], id=case[0]) for case in CATCHUP_CASES],
)
def test_plan_fires_catchup(
    catchup: Catchup,
    window: timedelta,
    now: datetime,
    run: list[datetime],
    missed: list[datetime],
    upcoming: datetime,
) -> None:
    job = make_job(
        HOURLY, overlap=Overlap.DEFER, catchup=catchup, catchup_window=window, next_fire_at=T0
    )
    plan = plan_fires(job, now, 0, 0, SETTINGS)
    assert plan.run == run
    assert plan.missed == missed
    assert plan.skipped == []
    assert plan.next_fire_at == upcoming
    assert plan.next_run_at == upcoming
    assert (plan.unrecorded_missed, plan.uncounted_missed) == (0, False)


def test_plan_fires_not_yet_due_runs_nothing_and_keeps_the_next_fire() -> None:
    job = make_job(HOURLY, overlap=Overlap.DEFER, catchup=Catchup.ALL, next_fire_at=T0 + H)
    plan = plan_fires(job, T0 + 30 * MIN, 0, 0, SETTINGS)
    assert (plan.run, plan.missed, plan.skipped) == ([], [], [])
    assert plan.next_fire_at == T0 + H


def test_plan_fires_unarmed_job_plans_nothing() -> None:
    job = make_job(HOURLY, overlap=Overlap.DEFER, next_fire_at=None)
    plan = plan_fires(job, T0 + D, 0, 0, SETTINGS)
    assert (plan.run, plan.missed, plan.skipped) == ([], [], [])
    assert (plan.next_fire_at, plan.next_run_at) == (None, None)


# -- plan_fires: overlap ------------------------------------------------------------------

# Four late hourly fires, catch-up `all`: all four would run without an overlap limit.
# `active` = runs of this job still queued/running; `waiting` = of those, not yet started.
OVERLAP_CASES = [
    # id, overlap, active, waiting, runs kept (oldest first)
    ("defer/idle", Overlap.DEFER, 0, 0, 4),
    ("defer/busy", Overlap.DEFER, 3, 2, 4),
    ("skip/idle: one runs", Overlap.SKIP, 0, 0, 1),
    ("skip/running", Overlap.SKIP, 1, 0, 0),
    ("skip/waiting", Overlap.SKIP, 1, 1, 0),
    # at most one fire of the job waits (running ones aside): never a queue of stale fires
    ("buffer_one/idle: one runs", Overlap.BUFFER_ONE, 0, 0, 1),
    ("buffer_one/running: one may wait", Overlap.BUFFER_ONE, 1, 0, 1),
    ("buffer_one/one waiting, none running", Overlap.BUFFER_ONE, 1, 1, 0),
    ("buffer_one/running and one waiting", Overlap.BUFFER_ONE, 2, 1, 0),
    ("buffer_one/two waiting", Overlap.BUFFER_ONE, 2, 2, 0),
    ("buffer_one/two running", Overlap.BUFFER_ONE, 2, 0, 1),
]


@pytest.mark.parametrize(
    ("overlap", "active", "waiting", "kept"),
    [pytest.param(*case[1:], id=case[0]) for case in OVERLAP_CASES],
)
def test_plan_fires_overlap(overlap: Overlap, active: int, waiting: int, kept: int) -> None:
    job = make_job(HOURLY, overlap=overlap, catchup=Catchup.ALL, next_fire_at=T0)
    plan = plan_fires(job, T0 + 3.5 * H, active, waiting, SETTINGS)
    due = hours(0, 1, 2, 3)
    assert plan.run == due[:kept]
    assert plan.skipped == due[kept:]
    assert plan.missed == []
    assert plan.next_fire_at == T0 + 4 * H  # overlap never ends the job


@pytest.mark.parametrize(
    ("overlap", "active", "waiting", "runs"),
    [
        (Overlap.DEFER, 1, 0, True),
        (Overlap.SKIP, 0, 0, True),
        (Overlap.SKIP, 1, 0, False),
        (Overlap.BUFFER_ONE, 1, 0, True),
        (Overlap.BUFFER_ONE, 2, 1, False),
    ],
)
def test_plan_fires_overlap_single_on_time_fire(
    overlap: Overlap, active: int, waiting: int, runs: bool
) -> None:
    job = make_job(EVERY_MIN, overlap=overlap, catchup=Catchup.LATEST, next_fire_at=T0 + MIN)
    plan = plan_fires(job, T0 + MIN, active, waiting, SETTINGS)
    fire = [T0 + MIN]
    assert (plan.run, plan.skipped) == ((fire, []) if runs else ([], fire))
    assert plan.next_fire_at == T0 + 2 * MIN


# -- plan_fires: limits -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("remaining", "run", "upcoming"),
    [
        pytest.param(None, hours(0, 1, 2, 3), T0 + 4 * H, id="unlimited"),
        pytest.param(5, hours(0, 1, 2, 3), T0 + 4 * H, id="room left: continues"),
        pytest.param(4, hours(0, 1, 2, 3), None, id="last runs: ends"),
        pytest.param(2, hours(0, 1), None, id="fewer left than due: ends at the last allowed"),
        pytest.param(0, [], None, id="none left"),
    ],
)
def test_plan_fires_remaining_runs(
    remaining: int | None, run: list[datetime], upcoming: datetime | None
) -> None:
    job = make_job(
        HOURLY,
        overlap=Overlap.DEFER,
        catchup=Catchup.ALL,
        next_fire_at=T0,
        remaining_runs=remaining,
    )
    plan = plan_fires(job, T0 + 3.5 * H, 0, 0, SETTINGS)
    assert plan.run == run
    assert plan.missed == []
    assert (plan.next_fire_at, plan.next_run_at) == (upcoming, upcoming)


def test_plan_fires_remaining_runs_counts_only_fires_that_run() -> None:
    # overlap skip drops three of the four due fires: one run is used, one is left, so the
    # job must go on to its next fire
    job = make_job(
        HOURLY, overlap=Overlap.SKIP, catchup=Catchup.ALL, next_fire_at=T0, remaining_runs=2
    )
    plan = plan_fires(job, T0 + 3.5 * H, 0, 0, SETTINGS)
    assert plan.run == hours(0)
    assert plan.skipped == hours(1, 2, 3)
    assert plan.next_fire_at == T0 + 4 * H


@pytest.mark.parametrize(
    ("end_at", "now", "run", "upcoming"),
    [
        pytest.param(T0 + 10 * H, T0 + 10 * S, [T0], T0 + H, id="before the end"),
        pytest.param(T0 + 30 * MIN, T0 + 10 * S, [T0], None, id="last fire before end_at"),
        pytest.param(T0, T0 + 10 * S, [T0], None, id="fire exactly at end_at runs"),
        # down from T0 to T0+3h30m; end_at T0+1h30m: T0 and T0+1h run, the rest never exist
        pytest.param(T0 + 1.5 * H, T0 + 3.5 * H, hours(0, 1), None, id="ended during downtime"),
    ],
)
def test_plan_fires_end_at(
    end_at: datetime, now: datetime, run: list[datetime], upcoming: datetime | None
) -> None:
    job = make_job(
        HOURLY, overlap=Overlap.DEFER, catchup=Catchup.ALL, next_fire_at=T0, end_at=end_at
    )
    plan = plan_fires(job, now, 0, 0, SETTINGS)
    assert plan.run == run
    assert plan.missed == []
    assert plan.next_fire_at == upcoming


@pytest.mark.parametrize(
    ("catchup", "window", "now", "run", "missed"),
    [
        pytest.param(Catchup.LATEST, D, T0 + 5 * S, [T0], [], id="on time"),
        pytest.param(Catchup.SKIP, D, T0 + H, [], [T0], id="late/skip"),
        pytest.param(Catchup.LATEST, D, T0 + H, [T0], [], id="late/latest"),
        pytest.param(Catchup.ALL, D, T0 + H, [T0], [], id="late/all"),
        pytest.param(Catchup.LATEST, D, T0 + 2 * D, [], [T0], id="outside window"),
    ],
)
def test_plan_fires_one_shot_ends_the_job(
    catchup: Catchup, window: timedelta, now: datetime, run: list[datetime], missed: list[datetime]
) -> None:
    job = make_job(
        AtSpec(at=T0), overlap=Overlap.DEFER, catchup=catchup, catchup_window=window,
        next_fire_at=T0,
    )  # fmt: skip
    plan = plan_fires(job, now, 0, 0, SETTINGS)
    assert (plan.run, plan.missed) == (run, missed)
    assert (plan.next_fire_at, plan.next_run_at) == (None, None)


def test_plan_fires_one_shot_with_overlap_skip_while_busy_is_skipped_and_ends() -> None:
    job = make_job(AtSpec(at=T0), overlap=Overlap.SKIP, next_fire_at=T0)
    plan = plan_fires(job, T0, 1, 0, SETTINGS)
    assert (plan.run, plan.skipped) == ([], [T0])
    assert plan.next_fire_at is None


# -- plan_fires: long downtime ------------------------------------------------------------


def test_plan_fires_long_downtime_jumps_instead_of_listing_every_fire() -> None:
    # every minute, down for ten days, window 1h, scan limit 5: 14 400 fires were due; the
    # stretch older than the window is jumped, and of the rest only the newest 5 are listed
    settings = replace(SETTINGS, catchup_scan_limit=5)
    now = T0 + 10 * D
    job = make_job(
        EVERY_MIN, overlap=Overlap.DEFER, catchup=Catchup.LATEST, catchup_window=H, next_fire_at=T0
    )
    plan = plan_fires(job, now, 0, 0, settings)
    assert plan.run == [now]  # the one within grace
    assert plan.missed == [now - k * MIN for k in (4, 3, 2, 1)]
    assert plan.uncounted_missed  # a stretch was jumped without counting
    # listed: T0..T0+4m, then (after the jump) the 60 fires of the last hour; 60 dropped
    assert plan.unrecorded_missed == 60
    assert plan.next_fire_at == now + MIN


def test_plan_fires_long_downtime_with_catchup_skip_jumps_to_now() -> None:
    # skip keeps only misfire_grace: after the first `limit` fires it jumps straight to now
    settings = replace(SETTINGS, catchup_scan_limit=5)
    now = T0 + 10 * D
    job = make_job(EVERY_MIN, overlap=Overlap.DEFER, catchup=Catchup.SKIP, next_fire_at=T0)
    plan = plan_fires(job, now, 0, 0, settings)
    assert plan.run == [now]
    assert plan.missed == [T0 + k * MIN for k in (1, 2, 3, 4)]
    assert (plan.unrecorded_missed, plan.uncounted_missed) == (1, True)
    assert len(plan.run) + len(plan.missed) == settings.catchup_scan_limit
    assert plan.next_fire_at == now + MIN


def test_plan_fires_many_fires_within_the_window_are_capped_not_jumped() -> None:
    # every minute, 10 minutes late, window 24h, scan limit 5: 11 fires due, the oldest 6
    # are dropped from the list (counted in unrecorded_missed), nothing is jumped
    settings = replace(SETTINGS, catchup_scan_limit=5)
    now = T0 + 10 * MIN
    job = make_job(EVERY_MIN, overlap=Overlap.DEFER, catchup=Catchup.ALL, next_fire_at=T0)
    plan = plan_fires(job, now, 0, 0, settings)
    assert plan.run == [T0 + k * MIN for k in range(6, 11)]
    assert plan.missed == []
    assert (plan.unrecorded_missed, plan.uncounted_missed) == (6, False)
    assert plan.next_fire_at == now + MIN


def test_plan_fires_long_downtime_all_runs_only_the_window() -> None:
    settings = replace(SETTINGS, catchup_scan_limit=1000)
    now = T0 + 30 * D
    job = make_job(
        HOURLY, overlap=Overlap.DEFER, catchup=Catchup.ALL, catchup_window=3 * H, next_fire_at=T0
    )
    plan = plan_fires(job, now, 0, 0, settings)
    assert plan.run == [now - 2 * H, now - H, now]  # inside the 3h window (cut excluded)
    assert all(f <= now - 3 * H for f in plan.missed)
    assert plan.next_fire_at == now + H


# -- plan_fires / arm / due_time: jitter --------------------------------------------------


def test_due_time_is_the_fire_without_jitter_and_the_jittered_fire_with_it() -> None:
    fire = T0 + H
    plain = JobPolicy(overlap=Overlap.DEFER, jitter=False)
    jit = JobPolicy(overlap=Overlap.DEFER, jitter=True)
    assert due_time(HOURLY, plain, "job-a", fire) == fire
    assert due_time(HOURLY, jit, "job-a", fire) == jittered(HOURLY, fire, "job-a")
    assert due_time(AtSpec(at=fire), jit, "job-a", fire) == fire  # one-shots never move
    moved = {due_time(HOURLY, jit, f"job-{i}", fire) for i in range(20)}
    assert len(moved) > 1
    assert all(fire <= m < fire + H for m in moved)


def test_plan_fires_next_run_at_is_jittered_next_fire() -> None:
    job = make_job(HOURLY, overlap=Overlap.DEFER, next_fire_at=T0, jitter=True, job_id="job-j")
    plan = plan_fires(job, T0 + 5 * MIN, 0, 0, SETTINGS)
    assert plan.run == [T0]
    assert plan.next_fire_at == T0 + H
    assert plan.next_run_at == jittered(HOURLY, T0 + H, "job-j")


# -- arm ----------------------------------------------------------------------------------

ARM_CASES = [
    # id, spec, policy changes, after, remaining, expected fire
    ("every: next grid point", EVERY_MIN, {}, T0 + 30 * S, None, T0 + MIN),
    ("every: strictly after a grid point", EVERY_MIN, {}, T0 + MIN, None, T0 + 2 * MIN),
    ("every: before the anchor", EverySpec(seconds=60, anchor=T0 + H), {}, T0, None, T0 + H),
    ("cron", CronSpec(expr="0 9 * * *"), {}, T0, None, datetime(2026, 11, 23, 9, 0, tzinfo=UTC)),
    ("at: future", AtSpec(at=T0 + H), {}, T0, None, T0 + H),
    ("at: past", AtSpec(at=T0 - H), {}, T0, None, None),
    ("at: exactly now", AtSpec(at=T0), {}, T0, None, None),
    ("remaining runs left", EVERY_MIN, {}, T0, 1, T0 + MIN),
    ("no remaining runs", EVERY_MIN, {}, T0, 0, None),
    ("end_at before next fire", EVERY_MIN, {"end_at": T0 + 30 * S}, T0, None, None),
    ("end_at on next fire", EVERY_MIN, {"end_at": T0 + MIN}, T0, None, T0 + MIN),
]


@pytest.mark.parametrize(
    ("spec", "changes", "after", "remaining", "fire"),
    [pytest.param(*case[1:], id=case[0]) for case in ARM_CASES],
)
def test_arm(
    spec: AnySpec,
    changes: dict[str, Any],
    after: datetime,
    remaining: int | None,
    fire: datetime | None,
) -> None:
    policy = JobPolicy(overlap=Overlap.DEFER, catchup=Catchup.LATEST, **changes)
    assert arm(spec, policy, "job-a", after, remaining) == (fire, fire)


def test_arm_with_jitter_keeps_the_fire_and_delays_the_due_time() -> None:
    policy = JobPolicy(overlap=Overlap.DEFER, jitter=True)
    fire, due = arm(HOURLY, policy, "job-b", T0)
    assert fire == T0 + H
    assert due == jittered(HOURLY, T0 + H, "job-b")


# -- backoff_for --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failures", "backoff", "expected"),
    [
        (1, (30 * S, MIN, 5 * MIN), 30 * S),
        (2, (30 * S, MIN, 5 * MIN), MIN),
        (3, (30 * S, MIN, 5 * MIN), 5 * MIN),
        (4, (30 * S, MIN, 5 * MIN), 5 * MIN),  # stays at the last step
        (100, (30 * S, MIN, 5 * MIN), 5 * MIN),
        (1, (), timedelta(0)),  # no backoff configured
        (7, (), timedelta(0)),
    ],
)
def test_backoff_for(failures: int, backoff: tuple[timedelta, ...], expected: timedelta) -> None:
    assert backoff_for(failures, replace(SETTINGS, backoff=backoff)) == expected


def test_backoff_for_default_settings_grows() -> None:
    steps = [backoff_for(n, EngineSettings()) for n in range(1, 8)]
    assert steps == sorted(steps)
    assert steps[0] > timedelta(0)


# -- finish_job ---------------------------------------------------------------------------

FINISHED = T0 + 45 * S


def outcome(status: RunState, error: str | None = None, at: datetime = FINISHED) -> JobOutcome:
    return JobOutcome(job_id="01JOBPOLICYTEST", status=status, finished_at=at, error=error)


@pytest.mark.parametrize("status", [RunState.SUCCEEDED, RunState.EMPTY])
def test_finish_job_success_resets_failures_and_releases_the_lease(status: RunState) -> None:
    job = make_job(EVERY_MIN, overlap=Overlap.DEFER, next_fire_at=T0 + MIN, consecutive_failures=3)
    change = finish_job(job, outcome(status), SETTINGS)
    values = change.values
    assert values == {
        "last_run_at": FINISHED,
        "last_status": status,
        "consecutive_failures": 0,
        "lease_owner": None,
        "lease_expires_at": None,
    }  # the schedule is not touched


# every minute, next fire T0+1m, the failed fire finished at T0+45s; backoff 30s / 1m / 5m
BACKOFF_CASES = [
    # id, failures before, finished at, expected next fire (None = not moved)
    ("1st failure: 30s -> T0+1m15s, next fire at or after is T0+2m", 0, FINISHED, T0 + 2 * MIN),
    ("2nd failure: 1m -> T0+1m45s -> T0+2m", 1, FINISHED, T0 + 2 * MIN),
    ("3rd failure: 5m -> T0+5m45s -> T0+6m", 2, FINISHED, T0 + 6 * MIN),
    ("4th failure: last step again", 3, FINISHED, T0 + 6 * MIN),
    ("backoff ends exactly on a fire: that fire is kept", 0, T0 + 30 * S, None),
    ("backoff ends exactly on a later fire: it is the next", 1, T0 + MIN, T0 + 2 * MIN),
]


@pytest.mark.parametrize(
    ("failures", "finished", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in BACKOFF_CASES],
)
def test_finish_job_failure_counts_and_backs_off(
    failures: int, finished: datetime, expected: datetime | None
) -> None:
    job = make_job(
        EVERY_MIN, overlap=Overlap.DEFER, next_fire_at=T0 + MIN, consecutive_failures=failures,
        max_failures=10,
    )  # fmt: skip
    change = finish_job(job, outcome(RunState.FAILED, "boom", at=finished), SETTINGS)
    values = change.values
    assert values["consecutive_failures"] == failures + 1
    assert values["last_status"] is RunState.FAILED
    assert values["last_run_at"] == finished
    assert "enabled" not in values
    if expected is None:
        assert "next_fire_at" not in values
    else:
        assert values["next_fire_at"] == expected
        assert values["next_run_at"] == expected


def test_finish_job_failure_does_not_move_a_fire_already_past_the_backoff() -> None:
    job = make_job(HOURLY, overlap=Overlap.DEFER, next_fire_at=T0 + H)
    change = finish_job(job, outcome(RunState.FAILED, "boom", at=T0 + S), SETTINGS)
    values = change.values
    assert values["consecutive_failures"] == 1
    assert "next_fire_at" not in values


def test_finish_job_failure_backoff_never_arms_past_end_at() -> None:
    ends = make_job(EVERY_MIN, overlap=Overlap.DEFER, next_fire_at=T0 + MIN, end_at=T0 + MIN)
    change = finish_job(ends, outcome(RunState.FAILED, "boom"), SETTINGS)
    values = change.values
    assert (values["next_fire_at"], values["next_run_at"]) == (None, None)


def test_finish_job_failure_of_a_one_shot_never_backs_off() -> None:
    job = make_job(AtSpec(at=T0 + MIN), overlap=Overlap.DEFER, next_fire_at=T0 + MIN)
    change = finish_job(job, outcome(RunState.FAILED, "boom"), SETTINGS)
    values = change.values
    assert values["consecutive_failures"] == 1
    assert "next_fire_at" not in values


@pytest.mark.parametrize(
    ("max_failures", "before", "pauses"),
    [
        (3, 1, False),
        (3, 2, True),  # the 3rd in a row
        (3, 7, True),  # already past the limit (limit lowered meanwhile)
        (1, 0, True),
        (0, 100, False),  # 0 = never auto-pause
    ],
)
def test_finish_job_auto_pauses_at_max_failures(
    max_failures: int, before: int, pauses: bool
) -> None:
    job = make_job(
        EVERY_MIN, overlap=Overlap.DEFER, next_fire_at=T0 + MIN, consecutive_failures=before,
        max_failures=max_failures,
    )  # fmt: skip
    change = finish_job(job, outcome(RunState.FAILED, "model unavailable"), SETTINGS)
    values = change.values
    assert values["consecutive_failures"] == before + 1
    if pauses:
        assert values["enabled"] is False
        assert values["paused_at"] == FINISHED
        assert values["paused_reason"] == (
            f"auto-paused after {before + 1} consecutive failures; last error: model unavailable"
        )
        assert (values["next_fire_at"], values["next_run_at"]) == (None, None)
    else:
        assert "enabled" not in values
        assert "paused_reason" not in values


def test_finish_job_auto_pause_reason_without_error_and_with_a_long_one() -> None:
    job = make_job(EVERY_MIN, overlap=Overlap.DEFER, next_fire_at=T0 + MIN, max_failures=1)
    unknown = finish_job(job, outcome(RunState.FAILED, None), SETTINGS).values
    assert unknown["paused_reason"].endswith("last error: unknown error")
    long = finish_job(job, outcome(RunState.FAILED, "x" * 1000), SETTINGS).values
    assert long["paused_reason"].endswith("last error: " + "x" * 300)


def test_finish_job_failure_of_a_paused_job_counts_but_neither_pauses_nor_backs_off() -> None:
    job = make_job(
        EVERY_MIN, overlap=Overlap.DEFER, next_fire_at=None, enabled=False,
        consecutive_failures=4, max_failures=5, delete_after_run=True,
    )  # fmt: skip
    change = finish_job(job, outcome(RunState.FAILED, "boom"), SETTINGS)
    values = change.values
    assert values["consecutive_failures"] == 5
    assert "enabled" not in values
    assert "next_fire_at" not in values
    assert not change.delete  # a paused job is never deleted by its last run


@pytest.mark.parametrize(
    ("spec", "next_fire_at", "status", "deleted"),
    [
        pytest.param(AtSpec(at=T0), None, RunState.SUCCEEDED, True, id="one-shot done"),
        pytest.param(AtSpec(at=T0), None, RunState.EMPTY, True, id="one-shot empty"),
        pytest.param(AtSpec(at=T0), None, RunState.FAILED, True, id="one-shot failed"),
        pytest.param(EVERY_MIN, None, RunState.SUCCEEDED, True, id="recurring, ended"),
        pytest.param(EVERY_MIN, T0 + MIN, RunState.SUCCEEDED, False, id="recurring, goes on"),
        pytest.param(EVERY_MIN, T0 + MIN, RunState.FAILED, False, id="recurring failed, goes on"),
    ],
)
def test_finish_job_delete_after_run(
    spec: AnySpec, next_fire_at: datetime | None, status: RunState, deleted: bool
) -> None:
    job = make_job(
        spec, overlap=Overlap.DEFER, next_fire_at=next_fire_at, delete_after_run=True,
        max_failures=5,
    )  # fmt: skip
    change = finish_job(
        job, outcome(status, "boom" if status is RunState.FAILED else None), SETTINGS
    )
    assert change.delete is deleted


def test_finish_job_without_delete_after_run_never_deletes() -> None:
    job = make_job(AtSpec(at=T0), overlap=Overlap.DEFER, next_fire_at=None)
    assert not finish_job(job, outcome(RunState.SUCCEEDED), SETTINGS).delete


@pytest.mark.parametrize(
    ("spec", "next_fire_at", "status", "done"),
    [
        pytest.param(AtSpec(at=T0), None, RunState.SUCCEEDED, True, id="one-shot ran"),
        pytest.param(AtSpec(at=T0), None, RunState.FAILED, True, id="one-shot failed"),
        pytest.param(AtSpec(at=T0), None, RunState.CANCELLED, True, id="one-shot stopped"),
        pytest.param(EVERY_MIN, None, RunState.SUCCEEDED, True, id="recurring, ended"),
        pytest.param(EVERY_MIN, T0 + MIN, RunState.SUCCEEDED, False, id="recurring, goes on"),
    ],
)
def test_finish_job_without_delete_after_run_marks_an_ended_job_done(
    spec: AnySpec, next_fire_at: datetime | None, status: RunState, done: bool
) -> None:
    job = make_job(spec, overlap=Overlap.DEFER, next_fire_at=next_fire_at)
    change = finish_job(
        job, outcome(status, "boom" if status is RunState.FAILED else None), SETTINGS
    )
    ended = job_with_values(job, change.values)
    assert not change.delete
    assert ended.status is (JobStatus.DONE if done else JobStatus.ACTIVE)
    if done:  # not enabled, nothing armed, and when it ended
        assert (ended.enabled, ended.next_run_at, ended.finished_at) == (False, None, FINISHED)
        assert ended.paused_reason is None
    else:
        assert "finished_at" not in change.values


def test_finish_job_the_last_run_of_a_paused_job_leaves_it_paused_not_done() -> None:
    job = make_job(AtSpec(at=T0), overlap=Overlap.DEFER, next_fire_at=None, enabled=False)
    change = finish_job(job, outcome(RunState.SUCCEEDED), SETTINGS)
    assert "finished_at" not in change.values
    assert job_with_values(job, change.values).status is JobStatus.PAUSED


def job_with_values(job: Job, values: dict[str, Any]) -> Job:
    return replace(job, **values)


def test_finish_job_auto_pause_wins_over_delete_after_run() -> None:
    # a failing recurring job that hits max_failures is paused (kept), not deleted
    job = make_job(
        EVERY_MIN, overlap=Overlap.DEFER, next_fire_at=T0 + MIN, delete_after_run=True,
        max_failures=1,
    )  # fmt: skip
    change = finish_job(job, outcome(RunState.FAILED, "boom"), SETTINGS)
    values = change.values
    assert values["enabled"] is False
    assert not change.delete


def test_finish_job_failure_whose_backoff_passes_end_at_ends_and_deletes() -> None:
    # the failed fire's backoff pushes the next fire past end_at: the job has no fire left,
    # so it has ended and delete_after_run applies (as for a job that ended any other way)
    job = make_job(
        EVERY_MIN, overlap=Overlap.DEFER, next_fire_at=T0 + MIN, end_at=T0 + MIN,
        delete_after_run=True,
    )  # fmt: skip
    change = finish_job(job, outcome(RunState.FAILED, "boom"), SETTINGS)
    values = change.values
    assert values["next_fire_at"] is None
    assert change.delete is True


@pytest.mark.parametrize("status", [RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED])
@pytest.mark.parametrize("spec", [EVERY_MIN, AtSpec(at=T0 + MIN)], ids=["recurring", "one-shot"])
def test_finish_job_of_a_manual_run_only_records_the_last_run(
    spec: AnySpec, status: RunState
) -> None:
    # A person's "run now": no failure counted, no backoff, no auto-pause, no deletion.
    job = make_job(
        spec, overlap=Overlap.DEFER, next_fire_at=T0 + MIN, consecutive_failures=2,
        max_failures=1, delete_after_run=True,
    )  # fmt: skip
    manual = replace(outcome(status, "boom"), manual=True)
    assert not manual.simple  # the job is read: the finisher decides
    change = finish_job(job, manual, SETTINGS)
    assert change.values == {"last_run_at": FINISHED, "last_status": status}
    assert not change.delete


# -- finish_job: a budgeted job's figures and its pause at a cap ----------------------------


def budgeted(budget: Budget, spend: Spend | None = None, **kw: Any) -> Job:
    job = make_job(HOURLY, overlap=Overlap.DEFER, next_fire_at=T0 + H, **kw)
    return replace(job, policy=replace(job.policy, budget=budget), spend=spend)


def ended(
    tokens: int,
    usd: float | None,
    *,
    status: RunState = RunState.SUCCEEDED,
    manual: bool = False,
    is_budgeted: bool = True,
) -> JobOutcome:
    return JobOutcome(
        "01JOBPOLICYTEST",
        status,
        T0 + MIN,
        manual=manual,
        budgeted=is_budgeted,
        tokens=tokens,
        cost_usd=usd,
        session_key="test:policies",
        job_name="policy test",
    )


def test_finish_without_a_budget_keeps_no_figures() -> None:
    job = make_job(HOURLY, overlap=Overlap.DEFER, next_fire_at=T0 + H)
    finish = finish_job(job, ended(100, 0.1, is_budgeted=False), SETTINGS)
    assert "spend" not in finish.values
    assert finish.budget_reached is None


def test_finish_adds_the_run_to_the_figures_within_the_budget() -> None:
    finish = finish_job(budgeted(Budget(usd_day=1.0)), ended(100, 0.25), SETTINGS)
    spend = finish.values["spend"]
    assert (spend.day, spend.day_usd, spend.day_tokens, spend.est_runs) == (
        "2026-11-22",
        0.25,
        100,
        1,
    )
    assert finish.budget_reached is None
    assert "enabled" not in finish.values  # the schedule is untouched


# fmt: off
BUDGET_FINISH_CASES = [
    # id, budget, figures before, run tokens, run usd, status, manual, paused reason or None
    ("reaches the day cap", Budget(usd_day=0.5), Spend("2026-11-22", 0.3, 0, "2026-11", 0.3), 10, 0.2, RunState.SUCCEEDED, False, "budget reached: $0.50 of $0.50 per day"),
    ("yesterday's spend does not count", Budget(usd_day=0.5), Spend("2026-11-21", 0.45, 0, "2026-11", 0.45), 10, 0.2, RunState.SUCCEEDED, False, None),
    ("a failed run's use counts too", Budget(tokens_day=100), None, 150, None, RunState.FAILED, False, "budget reached: 150 of 100 tokens per day"),
    ("a person's run now counts and pauses", Budget(usd_run=0.1), None, 10, 0.2, RunState.SUCCEEDED, True, "budget reached: $0.20 of $0.10 per run"),
]
# fmt: on


@pytest.mark.parametrize(
    ("budget", "before", "tokens", "usd", "status", "manual", "reason"),
    [pytest.param(*c[1:], id=c[0]) for c in BUDGET_FINISH_CASES],
)
def test_finish_pauses_a_job_at_a_cap(
    budget: Budget,
    before: Spend | None,
    tokens: int,
    usd: float | None,
    status: RunState,
    manual: bool,
    reason: str | None,
) -> None:
    finish = finish_job(
        budgeted(budget, before), ended(tokens, usd, status=status, manual=manual), SETTINGS
    )
    assert finish.budget_reached == reason
    assert finish.values["spend"].day_tokens == tokens + (
        before.day_tokens if before and before.day == "2026-11-22" else 0
    )
    if reason is None:
        assert "paused_reason" not in finish.values
        return
    assert finish.values["enabled"] is False
    assert finish.values["paused_reason"] == f"paused: {reason}"
    assert finish.values["paused_at"] == T0 + MIN
    assert (finish.values["next_fire_at"], finish.values["next_run_at"]) == (None, None)


def test_finish_at_a_cap_of_a_job_already_paused_or_ended_tells_nothing() -> None:
    # paused by a person while its fire ran: the figures still count, no second pause
    job = budgeted(Budget(usd_day=0.1), enabled=False)
    finish = finish_job(job, ended(10, 0.5), SETTINGS)
    assert finish.budget_reached is None
    assert finish.values["spend"].day_usd == 0.5
    # its last fire: the job ends (done), not paused for the budget
    last = replace(budgeted(Budget(usd_day=0.1)), spec=AtSpec(at=T0), next_fire_at=None)
    finish = finish_job(last, ended(10, 0.5), SETTINGS)
    assert finish.budget_reached is None
    assert finish.values["finished_at"] == T0 + MIN


def test_finish_of_a_one_shot_removed_keeps_no_figures() -> None:
    job = replace(
        budgeted(Budget(usd_day=0.1), delete_after_run=True), spec=AtSpec(at=T0), next_fire_at=None
    )
    finish = finish_job(job, ended(10, 0.5), SETTINGS)
    assert finish.delete
    assert finish.budget_reached is None
    assert "spend" not in finish.values


def test_plan_fires_skips_every_due_fire_over_the_budget_and_notes_the_first_stretch() -> None:
    over = Spend("2026-11-22", 0.45, 0, "2026-11", 0.45, est_usd=0.1, est_runs=1)
    job = budgeted(Budget(usd_day=0.5), over)
    job = replace(job, policy=replace(job.policy, catchup=Catchup.ALL), next_fire_at=T0)
    job = replace(job, next_run_at=T0)
    plan = plan_fires(job, T0 + 2.5 * H, 0, 0, SETTINGS)
    assert plan.run == []
    assert plan.over_budget == tuple(hours(0, 1, 2))
    assert plan.budget_reason is not None
    assert plan.budget_reason.endswith("per day")
    assert plan.budget_notice is True
    # the job's last fire was already skipped: the stretch goes on without a new notice
    plan = plan_fires(replace(job, last_status=RunState.SKIPPED), T0 + 2.5 * H, 0, 0, SETTINGS)
    assert plan.over_budget
    assert plan.budget_notice is False
    # within the budget: they run
    plan = plan_fires(replace(job, spend=None), T0 + 2.5 * H, 0, 0, SETTINGS)
    assert plan.run == hours(0, 1, 2)
    assert plan.over_budget == ()
