"""The alert sweep's store reads (`AlertLedger`, store/alert_store.py) on SQLite and PostgreSQL:
each returns the candidates only, from an index (SQLite's plan searches an index, it never
scans the jobs or runs table), and the marks are compare-and-sets.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from agentcron.domain.jobs import JobPolicy
from agentcron.schedule import EverySpec
from agentcron.store import SqlStore
from tests.conftest import T0
from tests.helpers.store_setup import insert_jobs
from tests.integration.test_store_contract import armed, claim

MIN = timedelta(minutes=1)


async def _jobs(store: SqlStore, **rows: dict[str, Any]) -> dict[str, str]:
    """Insert one job per name, then set its columns as given; name -> id."""
    made = await insert_jobs(store, [armed(name) for name in rows], T0)
    ids = {job.name: job.id for job in made}
    for job in made:
        if rows[job.name]:
            await store.update_job(job.id, rows[job.name], T0, expected_version=job.version)
    return ids


async def test_each_read_returns_its_candidates_only(store: SqlStore) -> None:
    ids = await _jobs(
        store,
        late={"next_run_at": T0 - 10 * MIN},
        paused_late={"next_run_at": T0 - 10 * MIN, "enabled": False},
        on_time={"next_run_at": T0 + MIN},
        failing={"consecutive_failures": 3},
        failing_announced={"consecutive_failures": 5, "failing_since": T0},
        recovered={"consecutive_failures": 0},
        ends_soon={"policy": JobPolicy(end_at=T0 + 2 * MIN)},
        ends_later={"policy": JobPolicy(end_at=T0 + timedelta(days=9))},
        last_run={"remaining_runs": 1},
        runs_left={"remaining_runs": 5},
        warned={"remaining_runs": 1, "ending_warned_at": T0},
        done={"remaining_runs": 0, "finished_at": T0, "enabled": False},
        overdue={"overdue_since": T0, "next_run_at": T0 + MIN},
    )
    found = await store.overdue_candidates(due_before=T0 - 5 * MIN, open_before=None, limit=100)
    assert [c.job.id for c in found] == [ids["late"]]
    failing = await store.failing_candidates(threshold=3, limit=100)
    assert [j.id for j in failing] == [ids["failing"]]
    ending = await store.ending_candidates(
        end_before=T0 + timedelta(days=1), runs_left=1, limit=100
    )
    assert sorted(j.id for j in ending) == sorted([ids["ends_soon"], ids["last_run"]])
    alerted = await store.alerted_jobs(limit=100)
    assert sorted(j.id for j in alerted) == sorted([ids["failing_announced"], ids["overdue"]])
    assert [j.id for j in await store.overdue_jobs(limit=100)] == [ids["overdue"]]


async def test_open_runs_older_than_the_limit_name_their_job(store: SqlStore) -> None:
    spec = EverySpec(seconds=600, anchor=T0)
    old, fresh = await insert_jobs(store, [armed("old", spec), armed("fresh", spec)], T0)
    fired = T0 + 10 * MIN
    assert len(await claim(store, fired)) == 2  # both fire and stay open (claimed)
    found = await store.overdue_candidates(due_before=T0, open_before=fired + MIN, limit=100)
    assert sorted(c.job.name for c in found) == ["fresh", "old"]
    assert all(c.open_since == fired and c.open_run_id for c in found)
    # Not older than the limit: none; their next fire (T0 + 20 min) is not late either.
    none = await store.overdue_candidates(due_before=fired, open_before=fired, limit=100)
    assert none == []
    assert {old.id, fresh.id} == {c.job.id for c in found}


async def test_a_mark_is_a_compare_and_set(store: SqlStore) -> None:
    ids = await _jobs(store, one={})
    job_id = ids["one"]
    first = await store.mark_alert(job_id, "overdue_since", T0, expected=None)
    assert first is not None
    assert first.overdue_since == T0
    assert await store.mark_alert(job_id, "overdue_since", T0 + MIN, expected=None) is None
    version = (await store.get_job(job_id)).version
    cleared = await store.mark_alert(job_id, "overdue_since", None, expected=T0)
    assert cleared is not None
    assert cleared.overdue_since is None
    assert cleared.version == version  # the schedule's compare-and-set is not disturbed
    assert await store.mark_alert(job_id, "overdue_since", None, expected=T0) is None
    assert await store.mark_alert("nope", "failing_since", T0, expected=None) is None
    with pytest.raises(ValueError, match="not an alert column"):
        await store.mark_alert(job_id, "enabled", T0, expected=None)  # type: ignore[arg-type]


@contextmanager
def statements() -> Iterator[list[tuple[str, Any]]]:
    seen: list[tuple[str, Any]] = []

    def on_statement(conn: Any, cursor: Any, sql: str, params: Any, *rest: Any) -> None:
        if sql.lstrip().upper().startswith("SELECT"):
            seen.append((sql, params))

    event.listen(Engine, "before_cursor_execute", on_statement)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", on_statement)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
async def test_the_reads_search_an_index_and_never_scan_a_table(
    store: SqlStore, store_url: str
) -> None:
    await _jobs(store, **{f"job{i}": {} for i in range(20)})
    with statements() as seen:
        await store.overdue_candidates(due_before=T0, open_before=T0, limit=10)
        await store.failing_candidates(threshold=3, limit=10)
        await store.ending_candidates(end_before=T0, runs_left=1, limit=10)
        await store.alerted_jobs(limit=10)
        await store.overdue_jobs(limit=10)
    assert len(seen) == 7  # one a question; open runs and the two episodes: two
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            for sql, params in seen:
                plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params).all()
                steps = " | ".join(str(row[-1]) for row in plan)
                assert "INDEX" in steps, (sql, steps)
                assert "SCAN jobs" not in steps, (sql, steps)
                assert "SCAN runs" not in steps, (sql, steps)
    finally:
        engine.dispose()
