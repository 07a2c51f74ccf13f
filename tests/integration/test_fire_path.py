"""Edges of the fire -> turn path: fires that end before their turn begins, dead leases."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from agentcron.config import EngineSettings
from agentcron.domain.jobs import Catchup, JobPolicy, Overlap
from agentcron.domain.states import RunState, TurnState
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory
from tests.helpers.store_setup import release_turn_lease, take_turn_lease
from tests.integration.test_session_turns import KEY, ScriptedAgent

MIN = timedelta(minutes=1)


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """Every scenario here runs on SQLite and on PostgreSQL."""
    return str(request.param)


async def test_a_fire_whose_prompt_cannot_render_fails_at_once_with_the_reason(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    agent = ScriptedAgent()
    cron = await make_cron(runner=agent)
    # a session whose zone no longer exists on this machine: the prompt cannot be rendered
    await cron.store.sessions.ensure_session(KEY, clock.now(), tz="Mars/Olympus")
    job = await cron.jobs.create(name="digest", when="in 1m", session_key=KEY)
    clock.advance(MIN)
    await wait_settled(cron.engine)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.FAILED
    assert run.error is not None
    assert "prompt could not be rendered" in run.error
    assert "Mars/Olympus" in run.error
    (turn,) = await cron.sessions.turns(KEY)
    assert turn.state is TurnState.FAILED  # not left queued until a restart
    assert agent.turns == []
    assert await cron.sessions.messages(KEY) == []  # it never began: nothing in the transcript
    assert (await cron.jobs.get(job.id)).last_status is RunState.FAILED


async def test_a_fire_that_waited_past_the_grace_with_catchup_skip_is_missed(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    agent = ScriptedAgent()
    settings = EngineSettings(misfire_grace=timedelta(seconds=30))
    cron = await make_cron(runner=agent, settings=settings)
    job = await cron.jobs.create(name="ping", when="in 1m", session_key=KEY,
                                 catchup=Catchup.SKIP)  # fmt: skip
    agent.hold.clear()
    await cron.sessions.send(KEY, "a long answer")
    await agent.started.wait()
    clock.advance(MIN)
    await wait_settled(cron.engine, busy_ok=True)
    assert (await cron.runs.list(job.id))[0].state is RunState.DEFERRED
    clock.advance(MIN)  # the answer takes long: the fire is now a minute late
    agent.hold.set()
    await wait_settled(cron.engine)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.MISSED
    assert run.error is not None
    assert run.error.startswith("missed:")
    assert len(agent.turns) == 1  # only the user's turn ran


async def test_a_dead_owners_session_lease_is_freed_at_the_next_start(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    agent = ScriptedAgent()
    cron = await make_cron(runner=agent)
    await cron.sessions.create(KEY)
    now = clock.now()
    dead = "somehost-that-is-gone:1:X"
    # a lease taken by a process that died before its turn began (no turn is running)
    assert await take_turn_lease(cron.store, KEY, dead, "t0", now, now + 5 * MIN) is None
    await cron.close()
    cron2 = await make_cron(runner=agent)
    # the owner is not known dead (another host): its lease holds until it expires ...
    turn = await cron2.sessions.send(KEY, "hello?")
    await asyncio.sleep(0.2)
    assert (await cron2.sessions.turn(turn.id)).state is TurnState.QUEUED
    assert agent.turns == []
    await cron2.close(grace=0.2)
    # ... but a process of this host that no longer exists is dead for sure: freed at once
    import os
    import socket

    gone = f"{socket.gethostname()}:{2**22 + os.getpid()}:X"
    await cron2.store.open()
    await release_turn_lease(cron2.store, KEY, dead)
    assert await take_turn_lease(cron2.store, KEY, gone, "t1", now, now + 5 * MIN) is None
    await cron2.store.close()
    cron3 = await make_cron(runner=agent)
    await wait_settled(cron3.engine)
    assert (await cron3.sessions.turn(turn.id)).state is TurnState.SUCCEEDED


async def test_a_failure_outside_the_runner_after_the_start_closes_the_turn_visibly(
    make_cron: CronFactory, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = ScriptedAgent()
    cron = await make_cron(runner=agent)

    async def broken(*args: object, **kwargs: object) -> list[object]:
        raise RuntimeError("the transcript could not be read")

    monkeypatch.setattr(cron.store.sessions, "history", broken)
    job = await cron.jobs.create(name="digest", when="in 1m", session_key=KEY)
    clock.advance(MIN)
    await wait_settled(cron.engine)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.FAILED
    assert run.error == "RuntimeError: the transcript could not be read"
    (turn,) = await cron.sessions.turns(KEY)
    assert turn.state is TurnState.FAILED
    trigger, closing = await cron.sessions.messages(KEY)
    assert trigger.role == "user"
    assert closing.content == (
        "Scheduled automation “digest” failed (RuntimeError). Details are in its run record."
    )
    assert agent.turns == []
    # the session is free again: the next turn runs
    monkeypatch.undo()
    answered = await cron.sessions.send(KEY, "still there?")
    await wait_settled(cron.engine)
    assert (await cron.sessions.turn(answered.id)).state is TurnState.SUCCEEDED


async def test_two_engines_on_one_database_never_run_two_turns_in_one_session(
    make_cron: CronFactory,
) -> None:
    """Two processes (here: two engines) share sessions: the session lease keeps one turn at a
    time in each, and no fire runs twice.
    """
    from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
    from agentcron.domain.jobs import NewJob
    from agentcron.runtime.clock import SystemClock
    from agentcron.schedule import EverySpec

    in_turn: set[str] = set()
    overlaps: list[str] = []
    ran: list[str] = []

    class Careful:
        history_window = 0

        async def run_turn(
            self, session: SessionInfo, turn: TurnInput, events: TurnEvents
        ) -> Outcome:
            if session.key in in_turn:
                overlaps.append(session.key)
            in_turn.add(session.key)
            try:
                await asyncio.sleep(0.03)
            finally:
                in_turn.discard(session.key)
            ran.append(turn.trigger.run_id if turn.trigger else turn.turn_id)
            return Outcome.succeeded("ok")

    clock = SystemClock()
    # One due job per claim: the engines' claims alternate, so both take part.
    one = EngineSettings(batch_size=1)
    a = await make_cron(runner=Careful(), clock=clock, settings=one)
    b = await make_cron(runner=Careful(), clock=clock, settings=one, start=False)
    keys = [f"api:shared-{i}" for i in range(4)]
    now = clock.now()
    await a.jobs.create_many([
        NewJob(name=f"j{i}", session_key=keys[i % 4], spec=EverySpec(seconds=1, anchor=now),
               policy=JobPolicy(overlap=Overlap.DEFER))
        for i in range(12)
    ])  # fmt: skip
    await b.start()  # it reads the schedule as it starts (no cross-process wake-up yet)
    await asyncio.sleep(3.2)
    await asyncio.gather(a.close(grace=5), b.close(grace=5))
    assert overlaps == []
    assert len(ran) == len(set(ran)) > 0
    assert a.status().fires_claimed > 0
    assert b.status().fires_claimed > 0  # both engines took part
    reader = await make_cron(runner=Careful(), clock=clock, start=False)
    await reader.store.open()
    for key in keys:
        session = await reader.sessions.get(key)
        assert session.turn_owner is None  # every lease let go
    await reader.store.close()


async def test_a_bound_fire_claimed_ahead_starts_on_the_dot_never_early(
    make_cron: CronFactory,
) -> None:
    from datetime import UTC, datetime

    from agentcron.agent.runner import Trigger
    from agentcron.domain.jobs import NewJob
    from agentcron.runtime.clock import SystemClock
    from agentcron.schedule import AtSpec

    early: list[float] = []

    async def runner(trigger: Trigger) -> str:
        early.append((datetime.now(UTC) - trigger.fire_at).total_seconds())
        return "ok"

    # claimed 50 ms ahead: the turn must still wait for its fire time
    settings = EngineSettings(claim_ahead=timedelta(milliseconds=50))
    cron = await make_cron(runner=runner, clock=SystemClock(), settings=settings)
    now = datetime.now(UTC)
    await cron.jobs.create_many([
        NewJob(name=f"j{i}", spec=AtSpec(at=now + timedelta(seconds=0.3 + 0.05 * i)),
               session_key=KEY)
        for i in range(8)
    ])  # fmt: skip
    await asyncio.sleep(1.2)
    assert len(early) == 8
    assert min(early) >= 0, f"a turn started {-min(early) * 1000:.1f} ms before its fire"
