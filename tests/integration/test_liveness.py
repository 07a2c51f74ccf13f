"""Liveness across hosts (fake clock, SQLite and PostgreSQL): an owner whose heartbeat stops is
taken over after `takeover` wherever it ran, and not before; a process settles its own orphans
at each reap; a process declared dead elsewhere stops taking work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path

import pytest

from agentcron.app import AgentCron
from agentcron.config import ConfigError, EngineSettings
from agentcron.domain.jobs import JobPolicy, Overlap
from agentcron.domain.states import RunState, TurnState
from agentcron.store import Transition
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory, Recorder
from tests.helpers.store_setup import insert_jobs, list_owners, record_runs, take_turn_lease
from tests.integration.test_session_turns import KEY, ScriptedAgent
from tests.integration.test_store_contract import armed, planner

SEC = timedelta(seconds=1)
MIN = timedelta(minutes=1)
NOTICE = "This turn was interrupted because agentcron stopped."
# A replica on another host (so no pid check can say it is gone): only its heartbeat tells.
OTHER = "far-away-host:4242:01OTHERREPLICA"


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """Every scenario here runs on SQLite and on PostgreSQL."""
    return str(request.param)


async def eventually(check: Callable[[], Awaitable[bool]], limit: float = 10.0) -> None:
    """Wait until `check()` holds (a condition, not a sleep), failing after `limit` s."""
    async with asyncio.timeout(limit):
        while True:
            if await check():
                return
            await asyncio.sleep(0.005)


async def beat(cron: AgentCron, clock: FakeClock, step: timedelta = SEC) -> None:
    """Move the clock one heartbeat on and wait until the engine's heartbeat has run through
    (its beat, its look for silent owners) and whatever that started has settled.
    """
    seen = cron.engine.stats["heartbeats"]
    clock.advance(step)

    async def beaten() -> bool:
        return cron.engine.stats["heartbeats"] > seen

    await eventually(beaten)
    await wait_settled(cron.engine, busy_ok=True)


async def test_a_silent_replica_on_another_host_is_taken_over_after_takeover_and_not_before(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    agent = ScriptedAgent()
    cron = await make_cron(runner=agent, start=False)
    store, sessions = cron.store, cron.store.sessions
    await store.open()
    settings = cron.settings
    assert (settings.owner_heartbeat, settings.takeover) == (SEC, 10 * SEC)
    job = armed("tick", session_key="websocket:fire", message="tick")  # every minute from T0
    await insert_jobs(store, [job], clock.now())
    clock.advance(MIN)
    now = clock.now()
    # What the other replica holds when it goes silent: a fire claimed but not started, ...
    (fire,) = (
        await store.claim_due(now, owner=OTHER, lease_until=now + MIN, limit=5, planner=planner)
    ).fires
    # ... a turn running in KEY (holding its session lease), a message waiting in another
    await sessions.ensure_session(KEY, now)
    cut = await sessions.open_turn(
        KEY, "user", "half answered", now, state=TurnState.RUNNING, owner=OTHER
    )
    assert await take_turn_lease(cron.store, KEY, OTHER, cut.id, now, now + 5 * MIN) is None
    await sessions.ensure_session("websocket:other", now)
    queued = await sessions.open_turn("websocket:other", "user", "still waiting", now, owner=OTHER)
    await store.register_owner(OTHER, "engine", now)  # its last heartbeat: now
    await cron.start()
    await wait_settled(cron.engine)

    for _ in range(10):  # silent for 1..10 s: alive as far as anyone can tell
        await beat(cron, clock)
        assert (await sessions.get_turn(cut.id)).state is TurnState.RUNNING
        assert (await sessions.get_turn(queued.id)).owner == OTHER
        assert (await store.get_run(fire.run_id)).owner == OTHER
        assert (await sessions.get_session(KEY)).turn_owner == OTHER
        assert OTHER in {o.owner for o in await list_owners(store)}
    assert agent.turns == []

    await beat(cron, clock)  # 11 s: dead, and every piece of its work is taken over at once
    closed = await sessions.get_turn(cut.id)
    assert closed.state is TurnState.INTERRUPTED
    notice = (await cron.sessions.messages(KEY))[-1]
    assert (notice.content, notice.meta["turn_id"]) == (NOTICE, cut.id)
    assert closed.reply_message_id == notice.id
    assert (await sessions.get_turn(queued.id)).state is TurnState.SUCCEEDED
    assert (await store.get_run(fire.run_id)).state is RunState.SUCCEEDED
    fired = [t for t in agent.turns if t.trigger is not None]
    assert [t.trigger.run_id for t in fired if t.trigger] == [fire.run_id]  # once
    assert "half answered" not in [t.prompt for t in agent.turns]  # never re-run
    assert [o.owner for o in await list_owners(store)] == [cron.engine.owner]
    # the session it held answers the next message
    await cron.sessions.send(KEY, "are you back?")
    await wait_settled(cron.engine)
    assert agent.turns[-1].prompt == "are you back?"
    assert (await cron.sessions.messages(KEY))[-1].content == "reply to: are you back?"


async def test_a_clock_jump_makes_no_owner_look_dead(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    """Silence is measured from this engine's own previous beat too: after a jump of the
    clock (a host waking from suspend), a peer that was beating up to the jump is not dead.
    """
    cron = await make_cron()
    await cron.store.register_owner(OTHER, "engine", clock.now())
    await beat(cron, clock, timedelta(hours=1))
    await cron.store.heartbeat_owner(OTHER, clock.now())  # the peer's first beat after it
    for _ in range(3):
        await beat(cron, clock)
        await cron.store.heartbeat_owner(OTHER, clock.now())
    assert OTHER in {o.owner for o in await list_owners(cron.store)}
    for _ in range(11):  # now it stops for good
        await beat(cron, clock)
    assert OTHER not in {o.owner for o in await list_owners(cron.store)}


@pytest.mark.parametrize("left", [RunState.CLAIMED, RunState.RUNNING])
async def test_an_orphan_of_this_process_is_settled_at_the_next_reap_and_unblocks_its_job(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder, left: RunState
) -> None:
    """A run of this owner with no task here (a bug, a cancelled task) would hold its job's
    overlap policy forever: its lease is no longer renewed blindly, and the next reap settles
    it (never started: released and run once; started: interrupted, never re-run).
    """
    settings = EngineSettings(reap_interval=3 * MIN)
    cron = await make_cron(start=False, settings=settings)
    store = cron.store
    await store.open()
    # overlap: buffer_one is blocked by a waiting fire, skip by a running one
    overlap = Overlap.BUFFER_ONE if left is RunState.CLAIMED else Overlap.SKIP
    job = armed("tick", policy=JobPolicy(overlap=overlap), message="tick")
    await insert_jobs(store, [job], clock.now())
    clock.advance(MIN)
    now = clock.now()
    owner = cron.engine.owner
    (orphan,) = (
        await store.claim_due(
            now, owner=owner, lease_until=now + timedelta(hours=1), limit=5, planner=planner
        )
    ).fires
    if left is RunState.RUNNING:
        await record_runs(store, [Transition(orphan.run_id, RunState.RUNNING, now)])
    await cron.start()  # at T0+1m: its first periodic reap is at T0+4m
    await wait_settled(cron.engine)

    clock.advance(MIN)  # T0+2m: the job is due, and blocked by the orphan
    await wait_settled(cron.engine)
    runs = {r.fire_at: r for r in await cron.runs.list(job.id)}
    assert runs[now + MIN].state is RunState.SKIPPED
    assert (await store.get_run(orphan.run_id)).state is left

    clock.advance(2 * MIN)  # T0+4m: the reap settles the orphan, and the fire runs
    await wait_settled(cron.engine)
    clock.advance(MIN)  # T0+5m
    await wait_settled(cron.engine)
    settled = await store.get_run(orphan.run_id)
    if left is RunState.CLAIMED:
        assert settled.state is RunState.SUCCEEDED  # released, adopted, run once
    else:
        assert settled.state is RunState.INTERRUPTED  # never re-run
        assert settled.error is not None
    runs = {r.fire_at: r for r in await cron.runs.list(job.id)}
    assert runs[now + 4 * MIN].state is RunState.SUCCEEDED  # later fires run again
    ran = [t for t in recorder.triggers if t.run_id == orphan.run_id]
    assert len(ran) == (1 if left is RunState.CLAIMED else 0)


async def test_an_own_turn_with_no_task_is_closed_visibly_and_its_session_freed(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    agent = ScriptedAgent()
    cron = await make_cron(runner=agent)
    sessions = cron.store.sessions
    now = clock.now()
    owner = cron.engine.owner
    await sessions.ensure_session(KEY, now)
    stray = await sessions.open_turn(
        KEY, "user", "left behind", now, state=TurnState.RUNNING, owner=owner
    )
    assert await take_turn_lease(cron.store, KEY, owner, stray.id, now, now + 5 * MIN) is None
    clock.advance(cron.settings.reap_interval)
    await wait_settled(cron.engine)
    closed = await sessions.get_turn(stray.id)
    assert closed.state is TurnState.INTERRUPTED
    notice = (await cron.sessions.messages(KEY))[-1]
    assert (notice.content, closed.reply_message_id) == (NOTICE, notice.id)
    assert (await sessions.get_session(KEY)).turn_owner is None
    await cron.sessions.send(KEY, "hello again")
    await wait_settled(cron.engine)
    assert [t.prompt for t in agent.turns] == ["hello again"]


async def test_only_live_work_is_renewed(make_cron: CronFactory, clock: FakeClock) -> None:
    agent = ScriptedAgent()
    cron = await make_cron(runner=agent)
    sessions = cron.store.sessions
    now = clock.now()
    owner = cron.engine.owner
    await sessions.ensure_session("websocket:stray", now)
    stray = await sessions.open_turn(
        "websocket:stray", "user", "x", now, state=TurnState.RUNNING, owner=owner
    )
    stray_until = now + 5 * MIN
    assert (
        await take_turn_lease(cron.store, "websocket:stray", owner, stray.id, now, stray_until)
        is None
    )
    agent.hold.clear()
    await cron.sessions.send(KEY, "think")
    await agent.started.wait()
    for _ in range(21):  # past lease/3 = 20 s
        await beat(cron, clock)
    live = await sessions.get_session(KEY)
    assert live.turn_lease_expires_at is not None
    assert live.turn_lease_expires_at > now + 5 * MIN  # renewed
    assert (await sessions.get_session("websocket:stray")).turn_lease_expires_at == stray_until
    agent.hold.set()
    await wait_settled(cron.engine)


async def test_a_process_declared_dead_elsewhere_stops_taking_work(
    make_cron: CronFactory, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    cron = await make_cron()
    job = await cron.jobs.create(name="tick", when="in 1m", message="tick")
    # another replica found this one silent and took its work over: its row is gone
    assert await cron.store.unregister_owner(cron.engine.owner)
    with caplog.at_level(logging.ERROR, logger="agentcron.engine.scheduler"):
        clock.advance(SEC)  # its next heartbeat finds no row

        async def halted() -> bool:
            return cron.engine.fenced and not cron.running

        await eventually(halted)
    assert any("declared dead by another replica" in r.getMessage() for r in caplog.records)
    clock.advance(2 * MIN)
    for _ in range(20):
        await asyncio.sleep(0.002)
    assert await cron.runs.list(job.id) == []  # it claims nothing any more
    with pytest.raises(RuntimeError, match="stopping"):
        await cron.sessions.send(KEY, "hello?")
    # its row is not recreated: it is gone until a restart, under a new owner
    assert cron.engine.owner not in {o.owner for o in await list_owners(cron.store)}


async def test_a_graceful_stop_unregisters(make_cron: CronFactory, clock: FakeClock) -> None:
    cron = await make_cron()
    owner = cron.engine.owner
    assert owner in {o.owner for o in await list_owners(cron.store)}
    other = await make_cron()
    await cron.close()
    assert owner not in {o.owner for o in await list_owners(other.store)}


def test_takeover_must_be_several_heartbeats(clock: FakeClock, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="three owner heartbeats"):
        AgentCron(
            db=tmp_path / "x.db",
            runner=ScriptedAgent(),
            clock=clock,
            settings=EngineSettings(takeover=2 * SEC),
        )
