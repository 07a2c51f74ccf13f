"""Turns outlive their process: waiting ones are run by the next one, cut-off ones are closed."""

from __future__ import annotations

import asyncio
import socket
from datetime import timedelta

import pytest

from agentcron.domain.events import MessagePosted
from agentcron.domain.states import RunState, TurnState
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory
from tests.helpers.store_setup import take_turn_lease
from tests.integration.test_session_turns import KEY, ScriptedAgent, close_as_the_turn_ends

MIN = timedelta(minutes=1)
# A pid that cannot exist (above the kernel's pid_max), on this host: certainly dead.
DEAD_OWNER = f"{socket.gethostname()}:4194305:01DEAD"


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """Every scenario here runs on SQLite and on PostgreSQL."""
    return str(request.param)


async def test_a_waiting_user_message_survives_a_graceful_stop(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    agent = ScriptedAgent()
    cron = await make_cron(runner=agent)
    agent.hold.clear()
    first = await cron.sessions.send(KEY, "a long question")
    await agent.started.wait()
    waiting = await cron.sessions.send(KEY, "and a second one")

    await close_as_the_turn_ends(cron, agent)
    again = ScriptedAgent()
    cron2 = await make_cron(runner=again, start=False)
    await cron2.store.open()
    assert (await cron2.sessions.turn(first.id)).state is TurnState.SUCCEEDED
    released = await cron2.sessions.turn(waiting.id)
    assert (released.state, released.owner) == (TurnState.QUEUED, None)
    await cron2.engine.start()
    await wait_settled(cron2.engine)
    assert [t.prompt for t in again.turns] == ["and a second one"]
    done = await cron2.sessions.turn(waiting.id)  # the same turn record, now answered
    assert done.state is TurnState.SUCCEEDED
    assert [m.content for m in await cron2.sessions.messages(KEY)][-1] == (
        "reply to: and a second one"
    )


async def test_turns_of_a_dead_process_are_adopted_or_closed_visibly(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    agent = ScriptedAgent()
    cron = await make_cron(runner=agent)
    sessions = cron.store.sessions
    now = clock.now()
    await sessions.ensure_session(KEY, now)
    await sessions.ensure_session("websocket:other", now)
    # what a process killed mid-turn leaves behind: a running turn holding the session ...
    cut = await sessions.open_turn(
        KEY, "user", "half answered", now, state=TurnState.RUNNING, owner=DEAD_OWNER
    )
    assert await take_turn_lease(cron.store, KEY, DEAD_OWNER, cut.id, now, now + 5 * MIN) is None
    # ... and a message still waiting in another session
    queued = await sessions.open_turn("websocket:other", "user", "still waiting", now,
                                      owner=DEAD_OWNER)  # fmt: skip
    await cron.close()

    cron2 = await make_cron(runner=agent, start=False)
    events: list[MessagePosted] = []
    cron2.subscribe(events.append, types=[MessagePosted])
    await cron2.start()
    await wait_settled(cron2.engine)
    closed = await cron2.sessions.turn(cut.id)
    assert closed.state is TurnState.INTERRUPTED
    notice = (await cron2.sessions.messages(KEY))[-1]
    assert notice.content == "This turn was interrupted because agentcron stopped."
    assert notice.meta["turn_id"] == cut.id
    assert closed.reply_message_id == notice.id
    # published like a message outside a turn, so the chat's channel sends the closure too
    assert (KEY, notice.id) in [(e.session_key, e.message.id) for e in events]
    assert [t.prompt for t in agent.turns] == ["still waiting"]  # never the cut-off one
    assert (await cron2.sessions.turn(queued.id)).state is TurnState.SUCCEEDED
    # the dead owner's session lease does not block the next turn there
    await cron2.sessions.send(KEY, "are you back?")
    await wait_settled(cron2.engine)
    assert agent.turns[-1].prompt == "are you back?"


async def test_a_running_turn_of_a_live_process_is_left_alone(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    agent = ScriptedAgent()
    cron = await make_cron(runner=agent)
    agent.hold.clear()
    turn = await cron.sessions.send(KEY, "busy")
    await agent.started.wait()
    other = await make_cron(runner=ScriptedAgent())  # a second engine on the same database
    await other.lanes.recover(lambda owner: False)
    assert (await cron.sessions.turn(turn.id)).state is TurnState.RUNNING
    agent.hold.set()
    await wait_settled(cron.engine)
    assert (await cron.sessions.turn(turn.id)).state is TurnState.SUCCEEDED


async def test_a_deferred_fire_keeps_one_turn_record_across_a_restart(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    agent = ScriptedAgent()
    cron = await make_cron(runner=agent)
    job = await cron.jobs.create(name="ping", when="in 1m", message="ping", session_key=KEY)
    agent.hold.clear()
    await cron.sessions.send(KEY, "long answer")
    await agent.started.wait()
    clock.advance(MIN)
    await wait_settled(cron.engine, busy_ok=True)

    await close_as_the_turn_ends(cron, agent)
    cron2 = await make_cron(runner=ScriptedAgent())
    await wait_settled(cron2.engine)
    (run,) = await cron2.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    turns = await cron2.store.sessions.list_turns(KEY)
    fire_turns = [t for t in turns if t.run_id == run.id]
    assert len(fire_turns) == 1
    assert fire_turns[0].state is TurnState.SUCCEEDED


async def test_the_session_lease_is_renewed_while_a_long_turn_runs(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    agent = ScriptedAgent()
    cron = await make_cron(runner=agent)
    agent.hold.clear()
    await cron.sessions.send(KEY, "think for a long time")
    await agent.started.wait()
    first = (await cron.sessions.get(KEY)).turn_lease_expires_at
    assert first is not None
    held = first
    for _ in range(4):  # 20 minutes, four times the 5-minute lease
        clock.advance(5 * MIN)
        # The heartbeat renews it (a condition with a deadline, not a guess at how long)
        async with asyncio.timeout(10):
            while held is None or held <= clock.now():
                await asyncio.sleep(0.002)
                held = (await cron.sessions.get(KEY)).turn_lease_expires_at
    assert held is not None
    assert held > first + 15 * MIN
    agent.hold.set()
    await wait_settled(cron.engine)
    assert (await cron.sessions.get(KEY)).turn_owner is None
