"""The group commit: concurrent writes share a transaction; a failing write fails alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

import agentcron.engine.journal as journal_module
from agentcron.config import EngineSettings
from agentcron.engine.journal import Journal
from agentcron.engine.policies import arm, finish_job
from agentcron.schedule import AtSpec
from agentcron.store import ArmedJob, ConflictError, JobKind, NewJob, SqlStore
from agentcron.store.ids import new_id
from agentcron.store.writes import InsertJobs, JobsInserted
from tests.conftest import T0


def armed(name: str, *, session_key: str = "api:j", kind: JobKind = JobKind.AGENT_TURN) -> ArmedJob:
    spec = AtSpec(at=T0 + timedelta(hours=1))
    new = NewJob(name=name, spec=spec, session_key=session_key, kind=kind)
    job_id = new_id()
    fire, due = arm(spec, new.policy, job_id, T0)
    return ArmedJob(job_id, new, fire, due)


@pytest.fixture
async def journal(store: SqlStore) -> AsyncIterator[Journal]:
    settings = EngineSettings()
    j = Journal(store, lambda job, outcome: finish_job(job, outcome, settings))
    j.start()
    try:
        yield j
    finally:
        await j.close()


def count_commits() -> tuple[dict[str, int], Any]:
    counts = {"commits": 0}

    def on_commit(*_: Any) -> None:
        counts["commits"] += 1

    event.listen(Engine, "commit", on_commit)
    return counts, on_commit


async def test_concurrent_writes_share_transactions(journal: Journal, store: SqlStore) -> None:
    counts, listener = count_commits()
    try:
        results = await asyncio.gather(
            *(journal.write(InsertJobs([armed(f"j{i}")], T0)) for i in range(40))
        )
    finally:
        event.remove(Engine, "commit", listener)
    assert all(isinstance(r, JobsInserted) and len(r.jobs) == 1 for r in results)
    assert await store.count_jobs() == 40
    assert counts["commits"] <= 3  # the first write alone, the rest gathered behind it


async def test_a_failing_write_fails_alone(journal: Journal, store: SqlStore) -> None:
    await journal.write(InsertJobs([armed("r1", kind=JobKind.RECALL)], T0))
    writes = [
        journal.write(InsertJobs([armed("a")], T0)),
        # a second pending recall in the same session: the store refuses it
        journal.write(InsertJobs([armed("r2", kind=JobKind.RECALL)], T0)),
        journal.write(InsertJobs([armed("b")], T0)),
    ]
    a, refused, b = await asyncio.gather(*writes, return_exceptions=True)
    assert isinstance(refused, ConflictError)
    assert isinstance(a, JobsInserted)
    assert isinstance(b, JobsInserted)
    assert sorted(j.name for j in await store.list_jobs()) == ["a", "b", "r1"]


async def test_a_posted_write_that_keeps_failing_is_logged_and_drain_ends(
    journal: Journal, store: SqlStore, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    monkeypatch.setattr(journal_module, "_RETRY_S", 0.01)
    await journal.write(InsertJobs([armed("r1", kind=JobKind.RECALL)], T0))
    journal.post(InsertJobs([armed("r2", kind=JobKind.RECALL)], T0))  # refused every time
    async with asyncio.timeout(10):
        await journal.drain()
    assert "failed for good" in caplog.text
    assert [j.name for j in await store.list_jobs()] == ["r1"]


async def test_writes_before_the_journal_starts_are_applied_at_once(store: SqlStore) -> None:
    settings = EngineSettings()
    j = Journal(store, lambda job, outcome: finish_job(job, outcome, settings))
    result = await j.write(InsertJobs([armed("early")], T0))  # no flusher running
    assert isinstance(result, JobsInserted)
    assert [job.name for job in await store.list_jobs()] == ["early"]
