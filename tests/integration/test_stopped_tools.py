"""Tool calls outlive a turn that is stopped, times out or is cut by a shutdown after a tool ran:
the transcript and the run record keep them (the built-in agent, the offline model, a real
AgentCron on SQLite and PostgreSQL).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentcron.agent.offline import OfflineModel
from agentcron.agent.runner import NO_RESULT
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.states import RunState, TurnState
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, CronFactory

KEY = "websocket:chat-1"
PROMPT = "use lookup with q=tide"
STOPPED = "This turn was stopped."


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """Every scenario here runs on SQLite and on PostgreSQL."""
    return str(request.param)


def lookup(q: str) -> str:
    """Look a word up.

    Args:
        q: the word
    """
    return f"found {q}"


class HeldReply:
    """The offline model's pace: its reply after the tool's answer streams its first word,
    then waits here until the turn is stopped, times out or is cut.
    """

    def __init__(self) -> None:
        self.reached = asyncio.Event()

    async def __call__(self, delay: float) -> None:
        self.reached.set()
        await asyncio.Event().wait()


@pytest.fixture
def held() -> HeldReply:
    return HeldReply()


async def offline(
    make_cron: CronFactory, held: HeldReply, tools: list[Any], **kw: Any
) -> AgentCron:
    return await make_cron(runner=None, model=OfflineModel(1, sleep=held), tools=tools, **kw)


def looked_up(entry: Any) -> tuple[Any, ...]:
    """A saved tool entry as (name, args, result, ok)."""
    return entry.meta["name"], entry.meta["args"], entry.content, entry.meta["ok"]


async def test_a_stopped_turn_after_a_tool_ran_keeps_the_call(
    make_cron: CronFactory, held: HeldReply
) -> None:
    cron = await offline(make_cron, held, [lookup])
    turn = await cron.sessions.send(KEY, PROMPT)
    await held.reached.wait()  # the tool answered; the reply is on its way
    assert await cron.sessions.stop(KEY) is True
    await wait_settled(cron.engine)
    assert (await cron.sessions.turn(turn.id)).state is TurnState.CANCELLED
    messages = [m for m in await cron.sessions.messages(KEY) if m.meta.get("turn_id") == turn.id]
    assert [m.role for m in messages] == ["user", "tool", "assistant"]
    assert looked_up(messages[1]) == ("lookup", {"q": "tide"}, "found tide", True)
    assert isinstance(messages[1].meta["duration_ms"], int)
    assert messages[2].content == STOPPED


async def test_a_call_still_running_when_the_turn_is_stopped_is_kept_without_a_result(
    make_cron: CronFactory, held: HeldReply
) -> None:
    running = asyncio.Event()

    async def deploy(service: str) -> str:
        """Deploy a service.

        Args:
            service: its name
        """
        running.set()
        await asyncio.Event().wait()
        return "never"

    cron = await offline(make_cron, held, [deploy])
    turn = await cron.sessions.send(KEY, "use deploy with service=web")
    await running.wait()
    assert await cron.sessions.stop(KEY) is True
    await wait_settled(cron.engine)
    (call,) = [m for m in await cron.sessions.messages(KEY) if m.role == "tool"]
    assert looked_up(call) == ("deploy", {"service": "web"}, NO_RESULT, False)
    assert call.meta["turn_id"] == turn.id


async def test_a_stopped_scheduled_turn_keeps_the_call_on_its_run_record(
    make_cron: CronFactory, clock: FakeClock, held: HeldReply
) -> None:
    cron = await offline(make_cron, held, [lookup])
    await cron.sessions.create(KEY)
    job = await cron.jobs.create(name="tide", when="in 1m", message=PROMPT, session_key=KEY)
    clock.advance(job.next_fire_at - clock.now())  # type: ignore[operator]
    await held.reached.wait()
    assert await cron.sessions.stop(KEY) is True
    await wait_settled(cron.engine)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.CANCELLED
    assert [(c["name"], c["args"], c["result"], c["ok"]) for c in run.tool_calls or []] == [
        ("lookup", {"q": "tide"}, "found tide", True)
    ]
    *_, call, closing = await cron.sessions.messages(KEY)
    assert looked_up(call) == ("lookup", {"q": "tide"}, "found tide", True)
    assert closing.content == "Scheduled automation “tide” was stopped."


async def test_a_timed_out_turn_after_a_tool_ran_keeps_the_call(
    make_cron: CronFactory, held: HeldReply
) -> None:
    # Real seconds (the guard times the runner on the event loop's clock): far past the
    # tool's answer, which comes at once; the held reply then runs into it.
    settings = EngineSettings(turn_timeout=3.0)
    cron = await offline(make_cron, held, [lookup], settings=settings)
    turn = await cron.sessions.send(KEY, PROMPT)
    await held.reached.wait()
    done = await cron.sessions.wait_turn(turn.id, 30)
    assert (done.state, done.error) == (
        TurnState.FAILED,
        "TimeoutError: the turn ran longer than 3 s",
    )
    *_, call, closing = await cron.sessions.messages(KEY)
    assert looked_up(call) == ("lookup", {"q": "tide"}, "found tide", True)
    assert closing.content == "This turn failed (TimeoutError)."


async def test_a_turn_cut_by_a_shutdown_after_a_tool_ran_keeps_the_call(
    make_cron: CronFactory, clock: FakeClock, held: HeldReply
) -> None:
    cron = await offline(make_cron, held, [lookup])
    await cron.sessions.create(KEY)
    job = await cron.jobs.create(name="tide", when="in 1m", message=PROMPT, session_key=KEY)
    clock.advance(job.next_fire_at - clock.now())  # type: ignore[operator]
    await held.reached.wait()
    await cron.close(grace=0)
    after = await make_cron()  # the store again, in a new process
    (run,) = await after.runs.list(job.id)
    assert run.state is RunState.INTERRUPTED
    assert [(c["name"], c["result"], c["ok"]) for c in run.tool_calls or []] == [
        ("lookup", "found tide", True)
    ]
    *_, call, closing = await after.sessions.messages(KEY)
    assert looked_up(call) == ("lookup", {"q": "tide"}, "found tide", True)
    assert closing.meta["status"] == "interrupted"


async def test_an_isolated_run_that_timed_out_after_a_tool_ran_keeps_the_call(
    make_cron: CronFactory, clock: FakeClock, held: HeldReply
) -> None:
    settings = EngineSettings(turn_timeout=3.0)
    cron = await offline(make_cron, held, [lookup], settings=settings)
    job = await cron.jobs.create(name="tide", when="in 1m", message=PROMPT)
    clock.advance(job.next_fire_at - clock.now())  # type: ignore[operator]
    await held.reached.wait()
    (started,) = await cron.runs.list(job.id)
    run = await cron.runs.wait(started.id, 30)
    assert (run.state, run.error) == (
        RunState.FAILED,
        "TimeoutError: the turn ran longer than 3 s",
    )
    assert [(c["name"], c["result"], c["ok"]) for c in run.tool_calls or []] == [
        ("lookup", "found tide", True)
    ]


async def test_an_isolated_run_cut_by_a_shutdown_after_a_tool_ran_keeps_the_call(
    make_cron: CronFactory, clock: FakeClock, held: HeldReply
) -> None:
    cron = await offline(make_cron, held, [lookup])
    job = await cron.jobs.create(name="tide", when="in 1m", message=PROMPT)
    clock.advance(job.next_fire_at - clock.now())  # type: ignore[operator]
    await held.reached.wait()
    await cron.close(grace=0)
    after = await make_cron()  # the store again, in a new process
    (run,) = await after.runs.list(job.id)
    assert run.state is RunState.INTERRUPTED
    assert [(c["name"], c["result"], c["ok"]) for c in run.tool_calls or []] == [
        ("lookup", "found tide", True)
    ]
