"""A guard against the fire -> turn path growing back: writes and statements per bound fire.

Counted, not timed: an event listener on SQLAlchemy's engines counts committed transactions
(every write transaction commits; reads never do) and statements (an executemany is one),
while a burst of bound fires over many sessions runs on a fake clock.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from agentcron.app import AgentCron
from agentcron.domain.events import StreamEnd, StreamStart
from agentcron.domain.jobs import NewJob
from agentcron.domain.states import RunState, TurnState
from agentcron.schedule import AtSpec
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import T0

FIRES = 400
SESSIONS = 40
MAX_WRITES_PER_FIRE = 1.0  # issue target: <= 1 write transaction per bound fire at burst load
MAX_STATEMENTS_PER_FIRE = 8.0


@contextmanager
def counting() -> Iterator[dict[str, int]]:
    """Committed transactions, statements, and the transactions that wrote transcript
    entries (a turn's start or end writes one: `transcript`).
    """
    counts = {"commits": 0, "statements": 0, "transcript": 0}
    entries = False  # the transaction under way wrote transcript entries

    def on_commit(*_: Any) -> None:
        nonlocal entries
        counts["commits"] += 1
        counts["transcript"] += entries
        entries = False

    def on_statement(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        nonlocal entries
        counts["statements"] += 1
        entries = entries or statement.startswith("INSERT INTO messages")

    event.listen(Engine, "commit", on_commit)
    event.listen(Engine, "before_cursor_execute", on_statement)
    try:
        yield counts
    finally:
        event.remove(Engine, "commit", on_commit)
        event.remove(Engine, "before_cursor_execute", on_statement)


async def noop(trigger: object) -> str:
    return "ok"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_burst_of_bound_fires_costs_less_than_one_transaction_each(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    clock = FakeClock(T0)
    if backend == "sqlite":
        cron = AgentCron(db=tmp_path / "cost.db", runner=noop, clock=clock)
    else:
        url = request.getfixturevalue("pg_url")
        cron = AgentCron(url=url, runner=noop, clock=clock)
    async with cron:
        keys = [f"api:s-{i}" for i in range(SESSIONS)]
        for key in keys:
            await cron.sessions.create(key)
        due = T0 + timedelta(minutes=1)
        await cron.jobs.create_many(
            [NewJob(name=f"j{i}", spec=AtSpec(at=due), session_key=keys[i % SESSIONS])
             for i in range(FIRES)]
        )  # fmt: skip
        await wait_settled(cron.engine)
        with counting() as counts:
            clock.set(due)
            cron.engine.wake()
            await wait_settled(cron.engine, limit=60)
        assert await cron.store.count_runs(states=[RunState.SUCCEEDED]) == FIRES
        # every fire was a real turn of its session: trigger entry, closure, turn record
        turns = await cron.sessions.turns(keys[0])
        assert len(turns) == FIRES // SESSIONS
        assert all(t.state is TurnState.SUCCEEDED for t in turns)
        assert len(await cron.sessions.messages(keys[0])) == 2 * FIRES // SESSIONS
    writes, statements = counts["commits"] / FIRES, counts["statements"] / FIRES
    assert writes <= MAX_WRITES_PER_FIRE, f"{writes:.2f} write transactions per bound fire"
    assert statements <= MAX_STATEMENTS_PER_FIRE, f"{statements:.2f} statements per bound fire"


@pytest.fixture
def pg_url() -> Iterator[str]:
    from tests.conftest import _scratch_pg_database

    yield from _scratch_pg_database()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_back_to_back_turns_of_one_session_share_one_commit_between_them(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Ten fires of one session due at once, slots free: each turn's end and the next turn's
    start are one transaction (about one commit per turn, not two), and nothing else changes:
    every turn ends in order, never overlapping, its events before the next turn's.
    """
    n = 10
    clock = FakeClock(T0)
    if backend == "sqlite":
        cron = AgentCron(db=tmp_path / "b2b.db", runner=noop, clock=clock)
    else:
        cron = AgentCron(url=request.getfixturevalue("pg_url"), runner=noop, clock=clock)
    seen: list[tuple[str, str]] = []

    async def record(event: object) -> None:
        if isinstance(event, StreamStart | StreamEnd):
            seen.append((type(event).__name__, event.turn_id))

    async with cron:
        key = "api:b2b"
        await cron.sessions.create(key)
        due = T0 + timedelta(minutes=1)
        await cron.jobs.create_many(
            [NewJob(name=f"j{i}", spec=AtSpec(at=due), session_key=key) for i in range(n)]
        )
        await wait_settled(cron.engine)
        cron.events.subscribe(record)
        with counting() as counts:
            clock.set(due)
            cron.engine.wake()
            await wait_settled(cron.engine, limit=60)
        assert await cron.store.count_runs(states=[RunState.SUCCEEDED]) == n
        turns = sorted(await cron.sessions.turns(key), key=lambda t: t.started_at or T0)
        messages = await cron.sessions.messages(key)
    assert [t.state for t in turns] == [TurnState.SUCCEEDED] * n
    assert [m.role.value for m in messages] == ["user", "assistant"] * n
    for before, after in itertools.pairwise(turns):
        assert before.finished_at is not None
        assert after.started_at is not None
        assert before.finished_at <= after.started_at
    # each turn's stream ends before the next one's starts
    assert seen == [(kind, t.id) for t in turns for kind in ("StreamStart", "StreamEnd")]
    # the first start, then one transaction per turn: its end with the next turn's start (the
    # engine's own passes on the moved clock, the heartbeat and reaping, are not counted)
    assert counts["transcript"] == n + 1, f"{counts['transcript']} for {n} back-to-back turns"
