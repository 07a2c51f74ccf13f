"""bench/bench_engine.py: the herd's checks (order of the turns, the records read back) and its
moved clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from bench.bench_engine import HERD_DUE, HerdRunner, ShiftedClock, herd_order, herd_records

from agentcron.store.schema import metadata, runs, turns

T = datetime(2030, 1, 1, 13, 0, tzinfo=UTC)


def runner_with(calls: list[tuple[float, int]], n: int) -> HerdRunner:
    """A HerdRunner as if its runner had been called for these (seconds after, job index)."""
    runner = HerdRunner(ShiftedClock(HERD_DUE), HERD_DUE, n)
    for late, i in calls:
        runner.late_s.append(late)
        runner.index.append(i)
        runner.calls[i] += 1
    return runner


def test_turns_in_creation_order_show_no_inversion_and_no_displacement() -> None:
    # 6 jobs over 3 sessions: job i in session i mod 3
    order = herd_order(runner_with([(0.1 * i, i) for i in range(6)], 6), 3)
    assert order["inversions"] == order["displacement_max"] == order["early"] == 0
    assert order["first_wave_s"] == 0.2  # session 2's first turn, the third call
    assert order["duplicate_calls"] == 0


def test_a_session_turn_against_creation_order_an_early_turn_and_a_repeat_are_counted() -> None:
    # session 0 runs job 3 before job 0; job 1 starts before the instant; job 2 runs twice
    calls = [(-0.01, 1), (0.1, 3), (0.2, 0), (0.3, 2), (0.4, 2), (0.5, 4), (0.6, 5)]
    order = herd_order(runner_with(calls, 6), 3)
    assert order["inversions"] == 1
    assert order["early"] == 1
    assert order["duplicate_calls"] == 1
    assert order["displacement_max"] == 2  # job 0 started third, job 3 second


def test_the_records_read_back_find_lost_duplicated_and_overlapping_turns(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'herd.db'}"
    engine = sa.create_engine(url)
    metadata.create_all(engine)
    s = timedelta(seconds=1)

    def run(rid: str, job: str, late: int = 0) -> dict[str, object]:
        return {"id": rid, "job_id": job, "fire_at": T + late * s, "state": "succeeded"}

    def turn(tid: str, rid: str, key: str, start: int, end: int) -> dict[str, object]:
        return {"id": tid, "run_id": rid, "session_key": key, "source": "automation",
                "state": "succeeded", "content": "x", "created_at": T,
                "started_at": T + start * s, "finished_at": T + end * s}  # fmt: skip

    with engine.begin() as conn:
        # 4 jobs: j0 fired twice, j3 never; r3 has no turn; r1 has two; s-1's turns overlap
        conn.execute(runs.insert(), [run("r0", "j0"), run("r1", "j0", 1), run("r2", "j1"),
                                     run("r3", "j2")])  # fmt: skip
        conn.execute(turns.insert(), [turn("t0", "r0", "s-0", 0, 1), turn("t1", "r1", "s-0", 1, 2),
                                      turn("t2", "r1", "s-1", 0, 5), turn("t3", "r2", "s-1", 4, 6)])  # fmt: skip
    engine.dispose()
    found = herd_records(url, 4)
    assert found["jobs_unfired"] == 1
    assert found["jobs_fired_twice"] == 1
    assert found["runs_without_turn"] == 1
    assert found["runs_with_two_turns"] == 1
    assert found["overlapping_turns"] == 1  # t3 starts at 4 s, t2 ends at 5 s; s-0 touches only


def test_the_moved_clock_reads_the_instant_it_was_moved_to_and_time_flows() -> None:
    clock = ShiftedClock(T - timedelta(hours=1))
    assert abs((clock.now() - (T - timedelta(hours=1))).total_seconds()) < 1
    clock.jump_to(T)
    first = clock.now()
    assert abs((first - T).total_seconds()) < 1
    assert clock.now() >= first
