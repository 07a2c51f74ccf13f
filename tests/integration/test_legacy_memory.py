"""A legacy unbound job's memory (seed 001): its own session `cron:{job_id}`.

Its isolated run reads its history from there and saves the exchange (prompt as the user's
entry, result as the assistant's) there, in the run's end write. A runner that keeps no history
(a plain callable) makes the run read and write nothing of it.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from agentcron.agent.builtin import BuiltinRunner
from agentcron.agent.offline import OfflineModel
from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.domain.jobs import NewJob
from agentcron.domain.states import RunState
from agentcron.schedule import AtSpec, parse_when
from agentcron.store import SessionNotFoundError
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import BACKENDS, T0, CronFactory, Recorder

MIN = timedelta(minutes=1)
QUESTION = "what did I just say"


@pytest.fixture(params=BACKENDS)
def cron_backend(request: pytest.FixtureRequest) -> str:
    """Every scenario here runs on SQLite and on PostgreSQL."""
    return str(request.param)


class Spy:
    """The built-in runner (offline model), with each turn's input kept for the test."""

    def __init__(self) -> None:
        self.inner = BuiltinRunner(OfflineModel(0))
        self.turns: list[tuple[SessionInfo, TurnInput]] = []

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        self.turns.append((session, turn))
        return await self.inner.run_turn(session, turn, events)


def unbound(message: str = QUESTION, when: str = "every 1 minute") -> NewJob:
    return NewJob(name="legacy", spec=parse_when(when, T0, "UTC"), message=message)


async def test_a_legacy_job_reads_and_saves_its_memory_under_cron_job_id(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    spy = Spy()
    cron = await make_cron(runner=spy)
    (job,) = await cron.jobs.create_many([unbound()])
    assert job.session_key is None  # legacy unbound
    key = f"cron:{job.id}"
    for _ in range(2):
        clock.advance(MIN)
        await wait_settled(cron.engine)
    runs = sorted(await cron.runs.list(job.id), key=lambda r: r.fire_at)
    assert [r.state for r in runs] == [RunState.SUCCEEDED, RunState.SUCCEEDED]
    (first_session, first), (_, second) = spy.turns
    assert first_session.key == key
    assert first.history == ()
    first_reply = runs[0].output or ""
    assert [(h.role, h.content) for h in second.history] == [
        ("user", QUESTION),
        ("assistant", first_reply),
    ]
    # the offline model answered the second run from that history
    assert runs[1].output == f'(offline model) Before this you said: "{QUESTION}"'
    memory = await cron.sessions.messages(key)
    assert [(m.role, m.content) for m in memory] == [
        ("user", QUESTION), ("assistant", first_reply),
        ("user", QUESTION), ("assistant", runs[1].output),
    ]  # fmt: skip
    assert {m.meta["automation_run_id"] for m in memory[2:]} == {runs[1].id}
    session = await cron.sessions.get(key)
    assert (session.channel, session.chat_id) == ("cron", job.id)
    assert await cron.sessions.turns(key) == []  # memory, not turns
    # Deleting the job leaves its memory as an ordinary session (seed 001 keeps the legacy
    # behaviour and asks for no cleanup of it): readable, deletable on its own.
    await cron.jobs.delete(job.id)
    assert len(await cron.sessions.messages(key)) == 4
    assert (await cron.sessions.delete(key)).deleted is True
    with pytest.raises(SessionNotFoundError):
        await cron.sessions.get(key)


async def test_a_failed_legacy_run_saves_no_exchange(
    make_cron: CronFactory, clock: FakeClock
) -> None:
    class Down:
        async def run_turn(self, s: SessionInfo, t: TurnInput, e: TurnEvents) -> Outcome:
            raise RuntimeError("model endpoint down")

    cron = await make_cron(runner=Down())
    (job,) = await cron.jobs.create_many([unbound(when="in 1 minute")])
    clock.advance(MIN)
    await wait_settled(cron.engine)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.FAILED
    assert await cron.sessions.messages(f"cron:{job.id}") == []


async def test_a_callable_runner_keeps_no_legacy_memory(
    make_cron: CronFactory, clock: FakeClock, recorder: Recorder
) -> None:
    cron = await make_cron(runner=recorder)
    assert cron.engine.isolated.memory is None  # nothing to read, nothing to save
    (job,) = await cron.jobs.create_many([unbound(when="in 1 minute")])
    clock.advance(MIN)
    await wait_settled(cron.engine)
    (run,) = await cron.runs.list(job.id)
    assert run.state is RunState.SUCCEEDED
    with pytest.raises(SessionNotFoundError):
        await cron.sessions.get(f"cron:{job.id}")


# -- what it costs ----------------------------------------------------------------------------

FIRES = 200


class Answer:
    """A runner that keeps history (no `history_window` of its own: the setting's 200)."""

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        return Outcome.succeeded("done")


async def noop(trigger: object) -> str:
    return "ok"


async def unbound_burst(tmp_path: Path, runner: Any) -> list[list[str]]:
    """The write statements of each committed transaction of a burst of unbound fires."""
    clock = FakeClock(T0)
    cron = AgentCron(db=tmp_path / "burst.db", runner=runner, clock=clock)
    transactions: list[list[str]] = []
    current: list[str] = []

    def on_statement(_c: Any, _cur: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            current.append(" ".join(statement.split()).upper())

    def on_commit(*_: Any) -> None:
        transactions.append(list(current))
        current.clear()

    async with cron:
        due = T0 + MIN
        await cron.jobs.create_many(
            [NewJob(name=f"j{i}", spec=AtSpec(at=due), message=f"task {i}") for i in range(FIRES)]
        )
        await wait_settled(cron.engine)
        event.listen(Engine, "before_cursor_execute", on_statement)
        event.listen(Engine, "commit", on_commit)
        try:
            clock.set(due)
            cron.engine.wake()
            await wait_settled(cron.engine, limit=60)
        finally:
            event.remove(Engine, "before_cursor_execute", on_statement)
            event.remove(Engine, "commit", on_commit)
        assert await cron.store.count_runs(states=[RunState.SUCCEEDED]) == FIRES
    return transactions


async def test_legacy_memory_costs_a_callable_nothing_and_rides_on_the_run_end(
    tmp_path: Path,
) -> None:
    (tmp_path / "plain").mkdir()
    plain = await unbound_burst(tmp_path / "plain", noop)
    touched = [s for t in plain for s in t if "MESSAGES" in s or "SESSIONS" in s]
    assert touched == []  # a plain callable: no memory read or written
    (tmp_path / "kept").mkdir()
    kept = await unbound_burst(tmp_path / "kept", Answer())
    saving = [t for t in kept if any(s.startswith("INSERT INTO MESSAGES") for s in t)]
    assert saving  # the exchanges were saved ...
    # ... only in transactions that end runs: never a write of their own
    assert all(any(s.startswith("UPDATE RUNS") for s in t) for t in saving)
    # no transaction of its own per fire: the saves share the group commits of run ends
    writes = [t for t in kept if t]
    assert len(writes) < FIRES / 2, f"{len(writes)} write transactions for {FIRES} fires"
