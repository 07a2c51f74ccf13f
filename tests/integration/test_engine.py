"""Engine scenarios on the fake clock: firing, policies, failures, limits, restarts, retention."""

from __future__ import annotations

import asyncio
import socket
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agentcron.agent.runner import Outcome, Trigger
from agentcron.config import EngineSettings
from agentcron.domain.jobs import Catchup, JobKind, Overlap
from agentcron.domain.states import ACTIVE_STATES, STOPPED_MID_TURN, RunState
from agentcron.engine.policies import plan_fires
from agentcron.schedule import AtSpec, CronSpec, EverySpec
from agentcron.store import ProtectedJobError, Transition, VersionConflictError
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import T0, CronFactory, Recorder
from tests.helpers.store_setup import record_runs

MIN = timedelta(minutes=1)


async def step(cron: object, clock: FakeClock, delta: timedelta, *, busy_ok: bool = False) -> None:
    """Move the fake clock, then wait until the engine has done everything that made due."""
    clock.advance(delta)
    await wait_settled(cron.engine, busy_ok=busy_ok)  # type: ignore[attr-defined]


async def states(cron: object, job_id: str) -> list[str]:
    runs = await cron.runs.list(job_id)  # type: ignore[attr-defined]
    return [r.state.value for r in reversed(runs)]


class Gate:
    """A runner that blocks each turn until released, to hold fires 'running'."""

    def __init__(self) -> None:
        self.started: list[Trigger] = []
        self.release = asyncio.Event()

    async def __call__(self, trigger: Trigger) -> str:
        self.started.append(trigger)
        await self.release.wait()
        return "released"


async def test_one_shot_fires_once_at_its_time(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    cron = await make_cron()
    job = await cron.jobs.create(name="stretch", when="in 10m", message="stand up")
    assert job.next_fire_at == T0 + 10 * MIN
    await step(cron, clock, 9 * MIN)
    assert recorder.triggers == []
    await step(cron, clock, MIN)
    assert recorder.names() == ["stretch"]
    assert recorder.triggers[0].message == "stand up"
    assert recorder.triggers[0].fire_at == T0 + 10 * MIN
    await step(cron, clock, timedelta(days=3))
    assert len(recorder.triggers) == 1
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    assert run.output == "done: stretch"
    assert run.claimed_at == run.started_at == run.finished_at == T0 + 10 * MIN
    assert run.queued_at is None  # a free slot: it started at once, never waited
    stored = await cron.jobs.get(job.id)
    assert stored.next_fire_at is None
    assert stored.last_status is RunState.SUCCEEDED
    assert stored.run_count == 1


async def test_interval_fires_on_the_grid_without_drift(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    async def slow(trigger: Trigger) -> str:
        clock.advance(timedelta(seconds=40))  # the turn takes 40 s of (fake) time
        return "ok"

    recorder.result = slow
    cron = await make_cron()
    job = await cron.jobs.create(name="poll", spec=EverySpec(seconds=120, anchor=T0))
    for _ in range(3):
        await step(cron, clock, 2 * MIN - timedelta(seconds=40) if recorder.triggers else 2 * MIN)
    fires = [t.fire_at for t in recorder.triggers]
    assert fires == [T0 + 2 * MIN, T0 + 4 * MIN, T0 + 6 * MIN]
    assert (await cron.jobs.get(job.id)).next_fire_at == T0 + 8 * MIN


async def test_cron_job_across_dst_fires_once_per_local_day(
    make_cron: CronFactory, recorder: Recorder
) -> None:
    clock = FakeClock(datetime(2026, 10, 23, 12, tzinfo=UTC))
    cron = await make_cron(clock=clock)
    await cron.jobs.create(name="nightly", when="30 2 * * *", tz="Europe/Berlin")
    for _ in range(4 * 24):
        await step(cron, clock, timedelta(hours=1))
    local = [t.fire_at.astimezone(ZoneInfo("Europe/Berlin")) for t in recorder.triggers]
    assert [d.date().isoformat() for d in local] == [
        "2026-10-24", "2026-10-25", "2026-10-26", "2026-10-27",
    ]  # fmt: skip
    # the fall-back night fires at the first 02:30 (CEST), then CET
    assert [d.utcoffset() for d in local] == [timedelta(hours=2)] * 2 + [timedelta(hours=1)] * 2


async def test_runner_that_raises_fails_the_run_and_the_engine_goes_on(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    async def flaky(trigger: Trigger) -> str:
        if trigger.job_name == "broken":
            raise RuntimeError("model endpoint unreachable")
        return "fine"

    recorder.result = flaky
    cron = await make_cron()
    broken = await cron.jobs.create(name="broken", when="in 1m", max_failures=0)
    healthy = await cron.jobs.create(name="healthy", when="every 1m")
    await step(cron, clock, MIN)
    await step(cron, clock, MIN)
    (run,) = await cron.runs.list(broken.id)
    assert run.state is RunState.FAILED
    assert run.error == "RuntimeError: model endpoint unreachable"
    assert run.error_details is not None
    assert "Traceback" in run.error_details["traceback"]
    assert await states(cron, healthy.id) == ["succeeded", "succeeded"]
    job = await cron.jobs.get(broken.id)
    assert job.last_status is RunState.FAILED
    assert job.consecutive_failures == 1


async def test_outcomes_empty_and_explicit_failure(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    async def script(trigger: Trigger) -> Outcome | str | None:
        return {"quiet": None, "blank": "  ", "no": Outcome.failed("nothing to check")}.get(
            trigger.job_name, "x"
        )

    recorder.result = script  # type: ignore[assignment]
    cron = await make_cron()
    ids = {n: (await cron.jobs.create(name=n, when="in 1m")).id for n in ("quiet", "blank", "no")}
    await step(cron, clock, MIN)
    assert await states(cron, ids["quiet"]) == ["empty"]
    assert await states(cron, ids["blank"]) == ["empty"]
    assert await states(cron, ids["no"]) == ["failed"]
    assert (await cron.runs.list(ids["no"]))[0].error == "nothing to check"


async def test_failures_back_off_then_auto_pause_with_reason(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    async def fail(trigger: Trigger) -> str:
        raise ValueError("bad credentials")

    recorder.result = fail
    settings = EngineSettings(backoff=(timedelta(minutes=5), timedelta(minutes=30)))
    cron = await make_cron(settings=settings)
    job = await cron.jobs.create(name="sync", when="every 1m", max_failures=3)
    await step(cron, clock, MIN)  # failure 1 at T0+1m: next fire at/after +5m backoff
    job = await cron.jobs.get(job.id)
    assert job.consecutive_failures == 1
    assert job.next_fire_at == T0 + 6 * MIN
    await step(cron, clock, 4 * MIN)
    assert len(recorder.triggers) == 1  # backing off
    await step(cron, clock, MIN)  # failure 2 at +6m: backoff 30m
    assert (await cron.jobs.get(job.id)).next_fire_at == T0 + 36 * MIN
    await step(cron, clock, 30 * MIN)  # failure 3: auto-pause
    job = await cron.jobs.get(job.id)
    assert [t.fire_at for t in recorder.triggers] == [T0 + MIN, T0 + 6 * MIN, T0 + 36 * MIN]
    assert not job.enabled
    assert job.next_run_at is None
    assert job.paused_reason == (
        "auto-paused after 3 consecutive failures; last error: ValueError: bad credentials"
    )
    await step(cron, clock, timedelta(hours=2))
    assert len(recorder.triggers) == 3
    # resuming clears the failure count and re-arms from now
    recorder.result = None
    job = await cron.jobs.resume(job.id)
    assert job.consecutive_failures == 0
    await step(cron, clock, MIN)
    assert (await cron.jobs.get(job.id)).last_status is RunState.SUCCEEDED


async def test_success_resets_failure_count(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    outcomes = iter([RuntimeError("x"), "ok"])

    async def alternate(trigger: Trigger) -> str:
        value = next(outcomes)
        if isinstance(value, Exception):
            raise value
        return value

    recorder.result = alternate
    cron = await make_cron(settings=EngineSettings(backoff=(MIN,)))
    job = await cron.jobs.create(name="j", when="every 1m")
    await step(cron, clock, MIN)
    assert (await cron.jobs.get(job.id)).consecutive_failures == 1
    await step(cron, clock, MIN)
    assert (await cron.jobs.get(job.id)).consecutive_failures == 0


@pytest.mark.parametrize(
    ("catchup", "expected"),
    [
        # down from T0+30s to T0+5m30s: fires at 1..5 min came due while down
        (Catchup.SKIP, ["missed"] * 5),
        (Catchup.LATEST, ["missed"] * 4 + ["succeeded"]),
        (Catchup.ALL, ["succeeded"] * 5),
    ],
)
async def test_catchup_after_downtime(
    make_cron: CronFactory,
    clock: FakeClock,
    recorder: Recorder,
    catchup: Catchup,
    expected: list[str],
) -> None:
    settings = EngineSettings(misfire_grace=timedelta(seconds=10))
    cron = await make_cron(settings=settings)
    # `all` runs every late fire only when they may queue behind each other (overlap defer)
    job = await cron.jobs.create(name="tick", when="every 1m", catchup=catchup,
                                 overlap=Overlap.DEFER)  # fmt: skip
    await step(cron, clock, timedelta(seconds=30))
    await cron.close()
    clock.advance(5 * MIN)  # the fire at 5m is now 30 s late: past the grace
    cron = await make_cron(settings=settings)
    await wait_settled(cron.engine)
    assert await states(cron, job.id) == expected
    missed = [r for r in await cron.runs.list(job.id) if r.state is RunState.MISSED]
    assert all(r.error and r.error.startswith("missed:") for r in missed)
    # the schedule continues on its grid
    assert (await cron.jobs.get(job.id)).next_fire_at == T0 + 6 * MIN
    clock.set(T0 + 6 * MIN)
    await wait_settled(cron.engine)
    assert (await states(cron, job.id))[-1] == "succeeded"


async def test_catchup_window_bounds_all_and_latest(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    cron = await make_cron()
    every = await cron.jobs.create(
        name="all",
        when="every 1h",
        catchup=Catchup.ALL,
        catchup_window=timedelta(hours=3),
        overlap=Overlap.DEFER,
    )
    once = await cron.jobs.create(
        name="latest", when="in 1h", catchup=Catchup.LATEST, catchup_window=timedelta(hours=3)
    )
    await cron.close()
    clock.advance(timedelta(hours=10, minutes=30))
    cron = await make_cron()
    await wait_settled(cron.engine)
    # fires at 1h..10h: those older than 3h are missed, the last three run
    assert await states(cron, every.id) == ["missed"] * 7 + ["succeeded"] * 3
    # the one-shot is 9.5h late, outside its window: missed, not run
    assert await states(cron, once.id) == ["missed"]


async def test_long_downtime_is_bounded_work(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    settings = EngineSettings(catchup_scan_limit=50)
    cron = await make_cron(settings=settings)
    job = await cron.jobs.create(name="minutely", when="* * * * *", catchup=Catchup.SKIP)
    await cron.close()
    clock.advance(timedelta(days=30))  # ~43,000 fires came due
    cron = await make_cron(settings=settings)
    await wait_settled(cron.engine)
    runs = await cron.runs.list(job.id, limit=None)
    assert len(runs) <= 50 + 1
    assert runs[0].fire_at == clock.now()  # due right now: on time, so it runs
    assert runs[0].state is RunState.SUCCEEDED
    assert all(r.state is RunState.MISSED for r in runs[1:])
    overflow = [r for r in runs if r.error_details]
    assert overflow
    assert overflow[0].error_details == {"unrecorded_missed_fires": 1, "more_uncounted": True}
    assert (await cron.jobs.get(job.id)).next_fire_at == clock.now() + MIN


async def test_overlap_defer_queues_behind_the_running_fire(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    gate = Gate()
    cron = await make_cron(runner=gate)
    job = await cron.jobs.create(name="long", when="every 1m", overlap=Overlap.DEFER)
    await step(cron, clock, MIN, busy_ok=True)
    await step(cron, clock, MIN, busy_ok=True)
    assert len(gate.started) == 1  # the second fire waits for the first
    runs = await cron.runs.list(job.id)
    assert {r.state for r in runs} == {RunState.RUNNING, RunState.QUEUED}
    gate.release.set()
    await wait_settled(cron.engine)
    assert [t.fire_at for t in gate.started] == [T0 + MIN, T0 + 2 * MIN]
    assert await states(cron, job.id) == ["succeeded", "succeeded"]


async def test_overlap_skip_records_skipped(make_cron: CronFactory, clock: FakeClock) -> None:
    gate = Gate()
    cron = await make_cron(runner=gate)
    job = await cron.jobs.create(name="long", when="every 1m", overlap=Overlap.SKIP)
    await step(cron, clock, MIN, busy_ok=True)
    await step(cron, clock, MIN, busy_ok=True)
    await step(cron, clock, MIN, busy_ok=True)
    gate.release.set()
    await wait_settled(cron.engine)
    assert len(gate.started) == 1
    assert await states(cron, job.id) == ["succeeded", "skipped", "skipped"]
    skipped = (await cron.runs.list(job.id))[0]
    assert skipped.error is not None
    assert skipped.error.startswith("skipped:")


async def test_overlap_buffer_one_keeps_one_waiting(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    gate = Gate()
    cron = await make_cron(runner=gate)
    job = await cron.jobs.create(name="long", when="every 1m", overlap=Overlap.BUFFER_ONE)
    for _ in range(4):
        await step(cron, clock, MIN, busy_ok=True)
    gate.release.set()
    await wait_settled(cron.engine)
    assert len(gate.started) == 2
    assert await states(cron, job.id) == ["succeeded", "succeeded", "skipped", "skipped"]


async def test_bounded_concurrency(make_cron: CronFactory, clock: FakeClock) -> None:
    gate = Gate()
    cron = await make_cron(runner=gate, settings=EngineSettings(max_concurrent_runs=3))
    for i in range(10):
        await cron.jobs.create(name=f"j{i}", when="in 1m")
    await step(cron, clock, MIN, busy_ok=True)
    assert len(gate.started) == 3
    assert cron.engine.slots.runs.in_runner == 3  # the isolated runs in flight
    gate.release.set()
    await wait_settled(cron.engine)
    assert len(gate.started) == 10


async def test_limits_max_runs_end_at_and_delete_after_run(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    cron = await make_cron()
    capped = await cron.jobs.create(name="capped", when="every 1m", max_runs=3)
    ending = await cron.jobs.create(name="ending", when="every 1m", end_at=T0 + 2 * MIN)
    oneshot = await cron.jobs.create(name="oneshot", when="in 1m", delete_after_run=True)
    for _ in range(6):
        await step(cron, clock, MIN)
    assert recorder.names().count("capped") == 3
    assert recorder.names().count("ending") == 2
    assert recorder.names().count("oneshot") == 1
    capped_job = await cron.jobs.get(capped.id)
    assert capped_job.remaining_runs == 0
    assert capped_job.next_fire_at is None
    assert (await cron.jobs.get(ending.id)).next_fire_at is None
    assert {j.id for j in await cron.jobs.list()} == {capped.id, ending.id}
    # the deleted one-shot's run history outlives it
    assert await states(cron, oneshot.id) == ["succeeded"]


async def test_pause_resume_update_while_a_fire_is_running(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    gate = Gate()
    cron = await make_cron(runner=gate)
    job = await cron.jobs.create(name="long", when="every 1m")
    await step(cron, clock, MIN, busy_ok=True)
    assert len(gate.started) == 1
    paused = await cron.jobs.pause(job.id, reason="holiday")
    assert paused.paused_reason == "holiday"
    gate.release.set()
    await wait_settled(cron.engine)
    job_now = await cron.jobs.get(job.id)
    assert not job_now.enabled  # the finishing fire did not undo the pause
    assert job_now.next_run_at is None
    assert job_now.last_status is RunState.SUCCEEDED
    await step(cron, clock, 10 * MIN)
    assert len(gate.started) == 1
    resumed = await cron.jobs.resume(job.id)
    assert resumed.next_fire_at == clock.now() + MIN
    gate.release.clear()
    await step(cron, clock, MIN, busy_ok=True)
    assert len(gate.started) == 2
    # change the schedule while that fire runs: the new spec holds afterwards
    updated = await cron.jobs.update(job.id, when="every 1h", message="new text")
    assert updated.next_fire_at == clock.now() + timedelta(hours=1)
    gate.release.set()
    await wait_settled(cron.engine)
    after = await cron.jobs.get(job.id)
    assert after.next_fire_at == updated.next_fire_at
    assert after.message == "new text"
    await step(cron, clock, timedelta(hours=1))
    assert gate.started[-1].message == "new text"
    assert len(gate.started) == 3


async def test_update_compare_and_set(make_cron: CronFactory) -> None:
    cron = await make_cron()
    job = await cron.jobs.create(name="a", when="every 1h")
    await cron.jobs.update(job.id, name="b", expected_version=job.version)
    with pytest.raises(VersionConflictError, match="re-read it and retry"):
        await cron.jobs.update(job.id, name="c", expected_version=job.version)
    assert (await cron.jobs.get(job.id)).name == "b"


async def test_update_changes_policies_and_zone(make_cron: CronFactory) -> None:
    cron = await make_cron()
    job = await cron.jobs.create(name="a", when="every day at 9", tz="UTC")
    moved = await cron.jobs.update(job.id, tz="Asia/Tokyo", overlap=Overlap.SKIP)
    assert moved.spec == CronSpec(expr="0 9 * * *", tz="Asia/Tokyo")
    assert moved.policy.overlap is Overlap.SKIP
    assert moved.next_fire_at == datetime(2026, 11, 23, 0, tzinfo=UTC)


async def test_delete_while_running_and_system_jobs_are_protected(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    gate = Gate()
    cron = await make_cron(runner=gate)
    job = await cron.jobs.create(name="doomed", when="in 1m")
    system = await cron.jobs.create(name="heartbeat", when="every 30m", kind=JobKind.SYSTEM_EVENT)
    await step(cron, clock, MIN, busy_ok=True)
    await cron.jobs.delete(job.id)
    gate.release.set()
    await wait_settled(cron.engine)
    assert await states(cron, job.id) == ["succeeded"]  # the run still ends in one state
    with pytest.raises(ProtectedJobError, match="system job"):
        await cron.jobs.delete(system.id)
    await cron.jobs.delete(system.id, allow_system=True)


def _planner(job: Any, now: datetime, active: int, waiting: int) -> Any:
    return plan_fires(job, now, active, waiting, EngineSettings())


async def test_restart_settles_fires_of_a_dead_process(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    cron = await make_cron()
    started = await cron.jobs.create(name="started", when="every 1m")
    waiting = await cron.jobs.create(name="waiting", when="every 1m")
    await cron.close()
    clock.advance(MIN)
    # a process that has since died (pid 2**22+1 never exists on Linux) claimed both fires
    # and had begun the turn of one of them
    dead = f"{socket.gethostname()}:4194305:01DEAD"
    await cron.store.open()
    claimed, *_ = await cron.store.claim_due(
        clock.now(), owner=dead, lease_until=clock.now() + timedelta(hours=1), limit=10,
        planner=_planner,
    )  # fmt: skip
    running = next(c for c in claimed if c.job.id == started.id)
    await record_runs(cron.store, [Transition(running.run_id, RunState.RUNNING, clock.now())])
    await cron.store.close()
    cron = await make_cron()
    await wait_settled(cron.engine)
    (run,) = await cron.runs.list(started.id)
    assert run.state is RunState.INTERRUPTED  # it may have half-run: never re-run silently
    assert run.error is not None
    assert "not re-run" in run.error
    assert (await cron.jobs.get(started.id)).last_status is RunState.INTERRUPTED
    # the other never started: it is adopted and runs once, late but not lost
    (adopted,) = await cron.runs.list(waiting.id)
    assert adopted.state is RunState.SUCCEEDED
    assert recorder.names() == ["waiting"]
    await step(cron, clock, MIN)  # the schedules continue
    assert sorted(recorder.names()) == ["started", "waiting", "waiting"]


async def test_lease_expiry_settles_fires_of_a_silent_process(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    cron = await make_cron(settings=EngineSettings(lease=timedelta(seconds=30)))
    started = await cron.jobs.create(name="started", when="in 1h")
    waiting = await cron.jobs.create(name="waiting", when="in 1h")
    clock.advance(timedelta(hours=1))
    # another live process (not provably dead) holds unexpired leases
    other = "elsewhere:1:01OTHER"
    claimed, *_ = await cron.store.claim_due(
        clock.now(), owner=other, lease_until=clock.now() + timedelta(seconds=30), limit=10,
        planner=_planner,
    )  # fmt: skip
    running = next(c for c in claimed if c.job.id == started.id)
    await record_runs(cron.store, [Transition(running.run_id, RunState.RUNNING, clock.now())])
    cron.engine.wake()
    await wait_settled(cron.engine)
    assert await states(cron, started.id) == ["running"]
    assert await states(cron, waiting.id) == ["claimed"]
    await step(cron, clock, timedelta(seconds=31))  # the engine wakes at the lease expiry
    assert await states(cron, started.id) == ["interrupted"]
    assert await states(cron, waiting.id) == ["succeeded"]
    assert recorder.names() == ["waiting"]


async def test_graceful_stop_waits_then_releases_unstarted_fires(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    gate = Gate()
    cron = await make_cron(runner=gate, settings=EngineSettings(max_concurrent_runs=1))
    first = await cron.jobs.create(name="first", when="in 1m")
    second = await cron.jobs.create(name="second", when="in 1m")
    await step(cron, clock, MIN, busy_ok=True)
    assert len(gate.started) == 1
    started_name = gate.started[0].job_name

    async def release_soon() -> None:
        await asyncio.sleep(0.05)
        gate.release.set()

    releaser = asyncio.create_task(release_soon())
    await cron.close(grace=5)
    await releaser
    by_name = {"first": first.id, "second": second.id}
    waiting_name = "second" if started_name == "first" else "first"
    cron2 = await make_cron()
    assert await states(cron2, by_name[started_name]) == ["succeeded"]
    # the other one never started: released (still queued, no owner) for the next engine
    await wait_settled(cron2.engine)
    assert recorder.names() == [waiting_name]
    assert await states(cron2, by_name[waiting_name]) == ["succeeded"]


async def test_stop_timeout_interrupts_a_turn_that_will_not_end(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    gate = Gate()  # never released
    cron = await make_cron(runner=gate)
    job = await cron.jobs.create(name="stuck", when="in 1m")
    await step(cron, clock, MIN, busy_ok=True)
    await cron.close(grace=0.1)
    cron2 = await make_cron()
    (run,) = await cron2.runs.list(job.id)
    assert run.state is RunState.INTERRUPTED
    assert run.error is not None
    assert run.error == STOPPED_MID_TURN  # one text for a turn cut off by a stop


async def test_two_engines_never_run_a_fire_twice(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    a = await make_cron(settings=EngineSettings(batch_size=7))
    b = await make_cron(settings=EngineSettings(batch_size=5))
    for i in range(60):
        await a.jobs.create(name=f"j{i}", when="every 1m")
    for _ in range(3):
        clock.advance(MIN)
        await asyncio.gather(wait_settled(a.engine), wait_settled(b.engine))
    fires = [(t.job_id, t.fire_at) for t in recorder.triggers]
    assert len(fires) == 180
    assert len(set(fires)) == 180
    assert a.status().fires_claimed + b.status().fires_claimed == 180


async def test_retention_prunes_old_runs(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    settings = EngineSettings(
        retention_runs_per_job=5, retention_age=timedelta(days=1), prune_interval=MIN
    )
    cron = await make_cron(settings=settings)
    job = await cron.jobs.create(name="j", when="every 1m")
    for _ in range(20):
        await step(cron, clock, MIN)
    runs = await cron.runs.list(job.id, limit=None)
    assert len(runs) <= 6  # pruned down to 5, plus at most one since the last prune
    assert runs[0].fire_at == T0 + 20 * MIN  # the newest are kept
    # age: a job that stops firing loses its history after retention_age
    await cron.jobs.pause(job.id)
    other = await cron.jobs.create(name="k", when="every 1h")
    await step(cron, clock, timedelta(days=2))
    await step(cron, clock, timedelta(hours=1))
    assert await cron.runs.list(job.id) == []
    assert await states(cron, other.id)


async def test_no_run_is_left_active_after_a_clean_stop(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    cron = await make_cron()
    for i in range(50):
        await cron.jobs.create(name=f"j{i}", when="every 1m")
    await step(cron, clock, MIN)
    await cron.close()
    cron2 = await make_cron()
    assert await cron2.store.count_runs(states=ACTIVE_STATES) == 0
    assert await cron2.store.count_runs() == 50


async def test_creating_a_job_wakes_a_sleeping_engine(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    # a job due before the engine's next wake-up wakes it; a later one is found then
    cron = await make_cron(settings=EngineSettings(reap_interval=timedelta(days=1)))
    await cron.jobs.create(name="far", when="in 1h")
    await wait_settled(cron.engine)
    assert cron.engine._next_due == T0 + timedelta(hours=1)
    await cron.jobs.create(name="near", when="in 1m")
    await wait_settled(cron.engine)
    assert cron.engine._next_due == T0 + MIN
    await cron.jobs.create(name="later", when="in 2h")  # after the next wake-up: no claim now
    await wait_settled(cron.engine)
    assert cron.engine._next_due == T0 + MIN
    await step(cron, clock, MIN)
    assert recorder.names() == ["near"]


async def test_idempotency_key_returns_the_existing_job(make_cron: CronFactory) -> None:
    cron = await make_cron()
    a = await cron.jobs.create(name="a", when="every 1h", session_key="web:1", idempotency_key="k1")
    again = await cron.jobs.create(
        name="other name", when="every 2h", session_key="web:1", idempotency_key="k1"
    )
    elsewhere = await cron.jobs.create(
        name="a", when="every 1h", session_key="web:2", idempotency_key="k1"
    )
    assert again.id == a.id
    assert again.name == "a"
    assert elsewhere.id != a.id


async def test_one_shot_in_the_past_is_rejected(make_cron: CronFactory) -> None:
    from agentcron.schedule import PastInstantError

    cron = await make_cron()
    with pytest.raises(PastInstantError):
        await cron.jobs.create(name="late", when="2020-01-01T00:00")
    # a ready spec in the past is accepted but never fires (nothing to arm)
    job = await cron.jobs.create(name="late", spec=AtSpec(at=T0 - MIN))
    assert job.next_fire_at is None


HERD_KEYS = [f"api:herd-{s}" for s in range(10)]


async def herd_of(cron: Any, n: int) -> None:
    """`n` one-shots due at T0 + 1m, job i bound to session i mod 10, created in order."""
    from agentcron.domain.jobs import NewJob

    await cron.jobs.create_many(
        [
            NewJob(name=f"j{i}", spec=AtSpec(at=T0 + MIN), session_key=HERD_KEYS[i % 10])
            for i in range(n)
        ]
    )


def herd_order_ok(names: list[str]) -> bool:
    """Each session's fires ran in the order their jobs were created (all due at once)."""
    last = dict.fromkeys(HERD_KEYS, -1)
    for name in names:
        i = int(name[1:])
        if i < last[HERD_KEYS[i % 10]]:
            return False
        last[HERD_KEYS[i % 10]] = i
    return True


async def test_a_herd_is_claimed_as_its_fires_end_not_all_at_once(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    # 4 claims of 8 (more than the 2 slots): at most 32 fires held claimed and not ended
    settings = EngineSettings(batch_size=8, max_concurrent_runs=2)
    gate = Gate()
    held: list[int] = []

    async def runner(trigger: Trigger) -> str:
        held.append(len(cron.engine.live_work.runs))
        return await gate(trigger)

    cron = await make_cron(runner=runner, settings=settings)
    await herd_of(cron, 100)
    await step(cron, clock, MIN, busy_ok=True)  # two turns in the runner, the rest waits
    assert len(gate.started) == 2
    assert await cron.store.count_runs() == 32  # claimed: four claims, not the whole herd
    gate.release.set()
    await wait_settled(cron.engine)
    assert len(gate.started) == 100
    assert len({t.run_id for t in gate.started}) == 100  # every job fired once
    assert max(held) <= 32
    assert await cron.store.count_runs(states=[RunState.SUCCEEDED]) == 100
    assert herd_order_ok([t.job_name for t in gate.started])


async def test_a_managed_claim_of_a_herd_claims_it_all_as_its_fires_end(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    # the managed wake asks once for the instant (`claim_for`): the loop does not keep the
    # request, so the claim must not stop at the cap and drop the rest
    cron = await make_cron(settings=EngineSettings(batch_size=8, max_concurrent_runs=2))
    cron.engine.set_timer(False)
    await herd_of(cron, 100)
    await step(cron, clock, MIN)
    assert recorder.triggers == []  # the timer is off: nothing is claimed until asked
    cron.engine.claim_for(T0 + MIN)
    await wait_settled(cron.engine)
    assert len(recorder.triggers) == 100
    assert len({t.run_id for t in recorder.triggers}) == 100
    assert herd_order_ok(recorder.names())


async def test_a_stop_while_a_herd_waits_for_room_hands_the_rest_back(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    gate = Gate()
    settings = EngineSettings(batch_size=8, max_concurrent_runs=2)
    cron = await make_cron(runner=gate, settings=settings)
    await herd_of(cron, 100)
    await step(cron, clock, MIN, busy_ok=True)
    assert await cron.store.count_runs() == 32
    await cron.close(grace=0.05)  # returns: the claim's wait for room ends with the stop
    again = await make_cron(settings=settings)  # adopts what was handed back, claims the rest
    await wait_settled(again.engine)
    names = [t.job_name for t in gate.started] + recorder.names()
    assert len(names) == len(set(names)) == 100  # every fire ran once: there, or here
    assert await again.store.count_runs() == 100
    assert await again.store.count_runs(states=[RunState.SUCCEEDED]) == 98  # 2 were cut
