"""The explicit job categories: bound user jobs, legacy unbound jobs and system jobs (seed 001)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agentcron.agent.runner import Outcome, SessionInfo, Trigger, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.domain.jobs import Job, JobKind, NewJob
from agentcron.domain.states import RunState
from agentcron.engine.isolated import Evaluation, evaluate_response
from agentcron.schedule import EverySpec, parse_when
from agentcron.store import ProtectedJobError
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import T0, CronFactory

MIN = timedelta(minutes=1)


class Isolated:
    """A runner that records the session each turn ran in and answers with a scripted text."""

    def __init__(self, answer: str | None = "build is green") -> None:
        self.answer = answer
        self.sessions: list[SessionInfo] = []
        self.turns: list[TurnInput] = []

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        self.sessions.append(session)
        self.turns.append(turn)
        if self.answer is None:
            raise RuntimeError("model endpoint down")
        return Outcome.succeeded(self.answer) if self.answer else Outcome.empty()


def legacy(name: str = "nightly", **kw: Any) -> NewJob:
    kw.setdefault("deliver", True)
    kw.setdefault("channel", "telegram")
    kw.setdefault("to", "42")
    return NewJob(name=name, spec=parse_when("in 1m", T0, "UTC"), message="check the build", **kw)


async def fire_once(cron: AgentCron, clock: FakeClock) -> None:
    clock.advance(MIN)
    await wait_settled(cron.engine)


async def test_a_legacy_job_runs_isolated_and_delivers_to_its_target(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    runner = Isolated()
    cron = await make_cron(runner=runner)
    (job,) = await cron.jobs.create_many([legacy(channel_meta={"thread": 9})])
    await fire_once(cron, clock)
    (session,) = runner.sessions
    # the old behaviour: an isolated run, its execution context from the legacy fields
    assert (session.key, session.channel, session.chat_id) == (f"cron:{job.id}", "telegram", "42")
    assert session.channel_meta == {"thread": 9}
    assert runner.turns[0].history == ()
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    (delivered,) = await cron.sessions.messages("telegram:42")
    assert delivered.role == "assistant"
    assert delivered.content == "build is green"
    assert delivered.meta["_legacy_delivery"] is True
    assert delivered.meta["automation_run_id"] == run.id
    assert run.message_id == delivered.id
    assert run.delivery == {
        "evaluated": {"deliver": True, "reason": "a result for the job's target"},
        "target": {"channel": "telegram", "to": "42"},
        "delivered": True,
        "session_key": "telegram:42",
        "message_id": delivered.id,
    }
    target = await cron.sessions.get("telegram:42")
    assert (target.channel, target.chat_id, target.channel_meta) == (
        "telegram",
        "42",
        {"thread": 9},
    )
    # a legacy run is not a session turn (no turn record anywhere); its own session
    # `cron:{job_id}` keeps its memory (seed 001): the prompt and the result
    memory = await cron.sessions.messages(f"cron:{job.id}")
    assert [(m.role, m.content) for m in memory] == [
        ("user", "check the build"),
        ("assistant", "build is green"),
    ]
    assert await cron.sessions.turns(f"cron:{job.id}") == []


@pytest.mark.parametrize(
    ("answer", "fields", "reason"),
    [
        ("Nothing to report.", {}, "the result says there is nothing to report"),
        ("HEARTBEAT_OK", {}, "the result says there is nothing to report"),
        ("", {}, "the run had no result"),
        (None, {}, "the run failed; the error is in the run record"),
        ("build is red", {"deliver": False}, "delivery is off for this job"),
        ("build is red", {"to": None}, "the job has no legacy target (channel and to)"),
    ],
)
async def test_the_evaluate_step_holds_back_what_is_not_worth_delivering(
    make_cron: CronFactory,
    clock: FakeClock,
    answer: str | None,
    fields: dict[str, Any],
    reason: str,
) -> None:
    cron = await make_cron(runner=Isolated(answer))
    (job,) = await cron.jobs.create_many([legacy(**fields)])
    await fire_once(cron, clock)
    (run,) = await cron.runs.list(job.id)
    assert run.delivery is not None
    assert run.delivery["evaluated"] == {"deliver": False, "reason": reason}
    assert run.delivery["delivered"] is False
    assert run.message_id is None
    with pytest.raises(LookupError):
        await cron.sessions.get("telegram:42")


async def test_a_custom_evaluator_decides_and_bound_jobs_never_reach_it(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    seen: list[str] = []

    async def strict(job: Job, outcome: Outcome) -> Evaluation:
        seen.append(job.name)
        if "red" in (outcome.text or ""):
            return evaluate_response(job, outcome)
        return Evaluation(False, "only failures are news")

    cron = await make_cron(runner=Isolated("build is green"), evaluator=strict)
    (job,) = await cron.jobs.create_many([legacy()])
    bound = await cron.jobs.create(
        name="bound", when="in 1m", message="x", session_key="websocket:a"
    )
    await fire_once(cron, clock)
    assert seen == ["nightly"]  # bound replies skip the evaluate step
    (run,) = await cron.runs.list(job.id)
    assert run.delivery is not None
    assert run.delivery["evaluated"]["reason"] == "only failures are news"
    (bound_run,) = await cron.runs.list(bound.id)
    assert bound_run.delivery is None
    assert bound_run.state is RunState.SUCCEEDED


async def test_a_failing_evaluator_does_not_fail_the_run(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    def broken(job: Job, outcome: Outcome) -> Evaluation:
        raise ValueError("no verdict")

    cron = await make_cron(runner=Isolated(), evaluator=broken)
    (job,) = await cron.jobs.create_many([legacy()])
    await fire_once(cron, clock)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    assert run.delivery is not None
    assert run.delivery["evaluated"] == {
        "deliver": False,
        "reason": "the evaluate step failed: ValueError: no verdict",
    }


async def test_a_bound_job_with_legacy_fields_keeps_the_legacy_path(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    runner = Isolated()
    cron = await make_cron(runner=runner)
    (job,) = await cron.jobs.create_many([legacy(session_key="websocket:a")])
    await fire_once(cron, clock)
    assert runner.sessions[0].key == f"cron:{job.id}"
    assert await cron.sessions.messages("websocket:a") == []
    assert len(await cron.sessions.messages("telegram:42")) == 1


async def test_system_jobs_run_through_their_handler_and_are_protected(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    runner = Isolated()
    cron = await make_cron(runner=runner)
    beats: list[Trigger] = []

    async def heartbeat(trigger: Trigger) -> str:
        beats.append(trigger)
        return "alive"

    job = await cron.system.ensure("heartbeat", "every 30m", handler=heartbeat)
    assert (job.kind, job.session_key, job.created_by.value) == (
        JobKind.SYSTEM_EVENT,
        None,
        "system",
    )
    again = await cron.system.ensure("heartbeat", "every 30m")
    assert again.id == job.id  # idempotent across restarts
    assert [j.id for j in await cron.system.list()] == [job.id]
    moved = await cron.system.ensure("heartbeat", "every 15m")
    assert moved.id == job.id
    assert isinstance(moved.spec, EverySpec)
    assert moved.spec.seconds == 900

    clock.advance(15 * MIN)
    await wait_settled(cron.engine)
    assert [b.job_name for b in beats] == ["heartbeat"]
    assert runner.sessions == []  # its own path: not the runner, not a session
    (run,) = await cron.runs.list(job.id)
    assert (run.state, run.output, run.delivery) == (RunState.SUCCEEDED, "alive", None)
    with pytest.raises(ProtectedJobError, match="system job"):
        await cron.jobs.delete(job.id)
    assert (await cron.jobs.get(job.id)).enabled


async def test_a_system_job_without_a_handler_runs_isolated_on_the_runner(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    runner = Isolated("dreamt")
    cron = await make_cron(runner=runner)
    job = await cron.system.ensure("dream", "every 1h", message="consolidate memory")
    clock.advance(timedelta(hours=1))
    await wait_settled(cron.engine)
    assert [s.key for s in runner.sessions] == ["system:dream"]
    assert runner.turns[0].prompt == "consolidate memory"
    (run,) = await cron.runs.list(job.id)
    assert (run.state, run.output, run.delivery) == (RunState.SUCCEEDED, "dreamt", None)
