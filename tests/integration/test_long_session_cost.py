"""A guard against the cost of a fire or a message growing with its session's past: rows
examined, counted as SQLite's virtual machine instructions (a progress handler called on every
one), never timed.

An instruction count does not depend on how deep a B-tree is (a seek is one instruction), only
on how many index entries and rows a statement visits; so a statement that reads a session's
finished turns, or a job's finished runs, shows up as a count that grows with them.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.states import RunState, TurnState
from agentcron.schedule import EverySpec
from agentcron.store import SqlStore
from agentcron.testing import FakeClock, wait_settled
from tests.conftest import T0
from tests.helpers.store_setup import end_recalls, grow_session

KEY = "api:long"
PAST = 400  # finished turns (and runs of the job) of the long session
EVERY = timedelta(hours=1)
HOURLY = EverySpec(seconds=3600, anchor=T0)


class VmSteps:
    """Counts the instructions SQLite runs on every connection of this process while
    `counting` is entered (the store's writer and readers alike).
    """

    def __init__(self) -> None:
        self._ticks = itertools.count()  # next() is atomic: threads count without a lock
        self._on = False
        self._hooked: set[int] = set()

    def _tick(self) -> int:
        if self._on:
            next(self._ticks)
        return 0  # go on

    def _statement(self, conn: Any, *_: Any) -> None:
        dbapi = conn.connection.dbapi_connection
        if isinstance(dbapi, sqlite3.Connection) and id(dbapi) not in self._hooked:
            self._hooked.add(id(dbapi))
            dbapi.set_progress_handler(self._tick, 1)

    @contextmanager
    def counting(self) -> Iterator[list[int]]:
        """Yields a list that holds the count once the block has ended."""
        out: list[int] = []
        start = next(self._ticks)
        event.listen(Engine, "before_cursor_execute", self._statement)
        self._on = True
        try:
            yield out
        finally:
            self._on = False
            event.remove(Engine, "before_cursor_execute", self._statement)
            out.append(next(self._ticks) - start - 1)


class Echo:
    """A runner that answers every turn, scheduled or not, without looking at its history."""

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        return Outcome.succeeded("ok")


async def fire_and_message(db: Path, past: int, steps: VmSteps) -> tuple[int, int]:
    """Instructions SQLite ran for one bound fire's claim, turn and end, then for one user
    message's turn, in a session with `past` finished turns behind it (runs of the same job).
    """
    clock = FakeClock(T0)
    # A small history window: the history read is bounded by it (test_history_read_...);
    # the prune runs once a day here, not inside the measured fire (it is not the fire's).
    settings = EngineSettings(history_window=4, prune_interval=timedelta(days=1))
    async with AgentCron(db=db, runner=Echo(), clock=clock, settings=settings) as cron:
        await cron.sessions.create(KEY)
        job = await cron.jobs.create(name="hourly", spec=HOURLY, message="check", session_key=KEY)
        await grow_session(cron.store, KEY, job.id, past, T0)
        # Every periodic pass that a move of the clock starts (heartbeat, reap) runs now.
        clock.set(T0 + EVERY - timedelta(seconds=1))
        await wait_settled(cron.engine)
        with steps.counting() as fire:
            clock.set(T0 + EVERY)
            cron.engine.wake()
            await wait_settled(cron.engine)
        (run,) = await cron.store.list_runs(job_id=job.id, states=[RunState.SUCCEEDED], limit=1)
        assert run.fire_at == T0 + EVERY
        with steps.counting() as message:
            turn = await cron.sessions.send(KEY, "how are things?", create=False)
            await wait_settled(cron.engine)
        assert (await cron.sessions.turn(turn.id)).state is TurnState.SUCCEEDED
    return fire[0], message[0]


async def test_a_fire_and_a_message_examine_no_more_rows_on_a_long_session(
    tmp_path: Path,
) -> None:
    steps = VmSteps()
    fresh_fire, fresh_message = await fire_and_message(tmp_path / "fresh.db", 0, steps)
    long_fire, long_message = await fire_and_message(tmp_path / "long.db", PAST, steps)
    assert fresh_fire > 100  # the counter saw the statements
    assert fresh_message > 100
    # Visiting the session's 400 finished turns (the claim's check for an open turn), or the
    # job's 400 finished runs (its check for active fires), costs thousands of instructions;
    # what may differ here is the history read's few entries (the window is 4).
    assert long_fire <= fresh_fire + 300, (fresh_fire, long_fire)
    assert long_message <= fresh_message + 300, (fresh_message, long_message)


async def test_the_prune_by_age_examines_the_expired_runs_and_recalls_not_every_kept_one(
    tmp_path: Path,
) -> None:
    steps = VmSteps()
    counts = []
    for kept in (10, 1000):
        clock = FakeClock(T0)
        settings = EngineSettings(retention_age=timedelta(days=1))
        db = tmp_path / f"prune-{kept}.db"
        async with AgentCron(db=db, runner=Echo(), clock=clock, settings=settings) as cron:
            for key in (KEY, "api:old"):
                await cron.sessions.create(key)
            job = await cron.jobs.create(name="hourly", spec=HOURLY, session_key=KEY)
            # `kept` runs that finished within the day (one a minute), and 5 before it; as
            # many recalls that ended within the day, and 5 before it
            await grow_session(cron.store, KEY, job.id, kept, T0)
            await grow_session(cron.store, "api:old", job.id, 5, T0 - timedelta(days=2))
            await end_recalls(cron.store, KEY, kept, T0 - timedelta(hours=1))
            await end_recalls(cron.store, "api:old", 5, T0 - timedelta(days=2))
            store: SqlStore = cron.store
            with steps.counting() as pruned:
                removed = await store.prune_runs(T0, keep_per_job=10_000, max_age=timedelta(days=1))
            assert removed == 5
            assert len(await store.recall_history(KEY, limit=kept)) == kept
            assert await store.recall_history("api:old") == []
            counts.append(pruned[0])
    few, many = counts
    assert many <= few + 100, counts


async def test_the_prune_per_job_steps_over_the_kept_runs_on_the_index_only(
    tmp_path: Path,
) -> None:
    """The periodic prune of the jobs that fired keeps each job's newest runs: one statement
    for all of them, which finds where a job's older runs begin by stepping over its kept
    ones on the (job_id, fire_at) index (a few instructions each), reading no run row.
    Reading every kept run (as a NOT IN of the kept ids did) costs ~19 each.
    """
    steps = VmSteps()
    counts = []
    for kept in (10, 1000):
        clock = FakeClock(T0)
        async with AgentCron(
            db=tmp_path / f"per-job-{kept}.db", runner=Echo(), clock=clock
        ) as cron:
            await cron.sessions.create(KEY)
            job = await cron.jobs.create(name="hourly", spec=HOURLY, session_key=KEY)
            await grow_session(cron.store, KEY, job.id, kept + 5, T0)  # 5 past the kept ones
            store: SqlStore = cron.store
            with steps.counting() as pruned:
                removed = await store.prune_runs(
                    T0, keep_per_job=kept, max_age=timedelta(days=3650), job_ids=[job.id]
                )
            assert removed == 5
            left = await store.list_runs(job_id=job.id, limit=kept + 5)
            assert len(left) == kept
            oldest_kept = T0 - timedelta(minutes=kept)  # grow_session: one a minute
            assert min(r.fire_at for r in left) >= oldest_kept - timedelta(minutes=1)
            counts.append(pruned[0])
    few, many = counts
    assert few > 50  # the counter saw the statements
    assert (many - few) / (1000 - 10) <= 4, counts


async def test_a_turns_history_read_examines_its_window_not_the_whole_transcript(
    tmp_path: Path,
) -> None:
    steps = VmSteps()
    counts = []
    for past in (150, 1500):
        async with AgentCron(db=tmp_path / f"history-{past}.db", runner=Echo()) as cron:
            await cron.sessions.create(KEY)
            await grow_session(cron.store, KEY, "a-job", past, T0)
            with steps.counting() as read:
                window = await cron.store.sessions.history(KEY, before=2 * past + 1, limit=50)
            assert [m.seq for m in window] == list(range(2 * past - 49, 2 * past + 1))
            counts.append(read[0])
    shorter, longer = counts
    assert longer <= shorter + 50, counts
