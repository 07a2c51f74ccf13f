"""A fire's outcome through its job's notify policy, against a real store's run records: the
sentinel stripped, a bare one made empty, `changes` compared with the last delivered outcome
(the latest to end), `always` leaving the run record as it was.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentcron.agent.runner import Outcome, OutcomeStatus
from agentcron.domain.jobs import Job, JobPolicy, NewJob
from agentcron.domain.notify import Held, Notify
from agentcron.domain.runs import ClaimedFire
from agentcron.domain.states import RunState
from agentcron.runtime.notify import notify_outcome
from agentcron.schedule import EverySpec
from agentcron.store import SqlStore, Transition
from agentcron.store.writes import ArmedJob
from tests.helpers.store_setup import insert_jobs, record_runs

T0 = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


async def a_job(store: SqlStore, notify: Notify) -> Job:
    new = NewJob(
        name="watch",
        spec=EverySpec(seconds=3600, anchor=T0),
        message="look",
        policy=JobPolicy(notify=notify),
    )
    (job,) = await insert_jobs(store, [ArmedJob(f"job-{notify.value}", new, None, None)], T0)
    return job


async def ended(store: SqlStore, job: Job, output: str, delivery: dict[str, object]) -> None:
    """One run of the job, ended succeeded with `output` and `delivery` a minute later."""
    run = await store.insert_manual_run(job.id, T0)
    at = run.fire_at + timedelta(minutes=1)
    await record_runs(
        store, [Transition(run.id, RunState.SUCCEEDED, at, output=output, delivery=delivery)]
    )


def fire(job: Job) -> ClaimedFire:
    return ClaimedFire(run_id="current", job=job, fire_at=T0)


async def test_always_leaves_the_outcome_and_the_run_record_as_they_were(
    store: SqlStore,
) -> None:
    job = await a_job(store, Notify.ALWAYS)
    outcome = Outcome(OutcomeStatus.SUCCEEDED, "hello")
    assert await notify_outcome(store, fire(job), outcome) == (outcome, None, None)
    silent, held, record = await notify_outcome(
        store, fire(job), Outcome(OutcomeStatus.SUCCEEDED, "[SILENT]")
    )
    assert (silent.status, silent.text, held) == (OutcomeStatus.EMPTY, None, Held.SILENT)
    assert record == {"notify": "always", "delivered": False, "held": "silent"}


async def test_changes_compares_with_the_last_delivered_outcome_in_the_store(
    store: SqlStore,
) -> None:
    job = await a_job(store, Notify.CHANGES)
    same = Outcome(OutcomeStatus.SUCCEEDED, "3 open")
    # Nothing delivered yet: it goes out.
    assert (await notify_outcome(store, fire(job), same))[1] is None
    await ended(store, job, "3 open", {"notify": "changes", "delivered": True})
    await ended(store, job, "quiet", {"notify": "changes", "delivered": False, "held": "silent"})
    _, held, record = await notify_outcome(store, fire(job), same)
    assert held is Held.UNCHANGED
    assert record == {"notify": "changes", "delivered": False, "held": "unchanged"}
    changed = Outcome(OutcomeStatus.SUCCEEDED, "[SILENT] 4 open")
    stripped, held, _ = await notify_outcome(store, fire(job), changed)
    assert (stripped.text, stripped.status, held) == (
        "4 open",
        OutcomeStatus.SUCCEEDED,
        Held.SILENT,
    )
    failed = Outcome.failed("boom")
    assert (await notify_outcome(store, fire(job), failed))[1] is None  # always goes out
