"""`python -m bench calls`: its counts come from the burst only, and its floor replays the
writer's statements faithfully (the replayed database ends where the real one did).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from bench import bench_engine
from bench.bench_engine import SqlCounter, Where, fake_clock_burst
from bench.calls import _calls, _profiled, _recorded, _replay, main

TABLES = {
    "runs": "SELECT id, state, job_id FROM runs ORDER BY id",
    "turns": "SELECT id, state, session_key FROM turns ORDER BY id",
    "messages": "SELECT id, session_key, seq, role FROM messages ORDER BY session_key, seq",
    "jobs": "SELECT id, next_fire_at, version FROM jobs ORDER BY id",
}


def state(db: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(db) as conn:
        out = {name: conn.execute(query).fetchall() for name, query in TABLES.items()}
    conn.close()
    return out


async def test_the_replay_ends_where_the_burst_did(tmp_path: Path) -> None:
    where = Where("SQLite", tmp_path)
    db = tmp_path / "replayed.db"
    with _recorded(db) as seen:
        burst = await fake_clock_burst(where, "replayed", 60, sessions=6, limit=60, count_sql=True)
    assert burst.done == 60
    assert seen.snapshot is not None
    assert bench_engine.SqlCounter is SqlCounter  # put back
    before = state(seen.snapshot)
    after = state(db)
    assert len(after["runs"]) == len(before["runs"]) + 60
    _, _, replayed = _replay(seen.snapshot, seen.steps, 1)
    assert state(replayed) == after
    # 60 bound fires bind more than a row each (a run, a turn, transcript entries, ...)
    assert seen.rows > 60 * 4


async def test_the_profiles_hold_the_burst_only(tmp_path: Path) -> None:
    with _profiled() as profiles:
        await fake_clock_burst(
            Where("SQLite", tmp_path), "p", 40, sessions=4, limit=60, count_sql=True
        )
    writer, rows = _calls(profiles.writer)
    loop, _ = _calls(profiles.loop)
    assert writer > 40
    assert loop > 40
    # the set-up's creates (jobs.create_many) are not in the writer's profile
    assert not any("_insert_jobs" in name for _, name in rows)


def test_the_command_prints_a_row_per_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--fires", "30", "--sessions", "3", "0", "--floor", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith("| 30 ")]
    assert [r.split(" (")[0] for r in rows] == ["| 30 bound over 3", "| 30 unbound"]
    for row in rows:  # both floors are figures
        assert all(c.strip().replace(",", "").isdigit() for c in row.strip(" |").split("|")[-2:])
