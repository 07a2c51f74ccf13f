"""The group commit: concurrent writes share a transaction; a failing write fails alone; an
outage is waited out (a real one, through a proxy that cuts PostgreSQL)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

import agentcron.runtime.journal as journal_module
from agentcron.config import EngineSettings
from agentcron.domain.jobs import JobKind, NewJob
from agentcron.engine.policies import arm, finish_job
from agentcron.runtime.backoff import Backoff
from agentcron.runtime.journal import Journal
from agentcron.schedule import AtSpec
from agentcron.store import ArmedJob, ConflictError, SqlStore
from agentcron.store.errors import StoreUnavailableError
from agentcron.store.ids import new_id
from agentcron.store.writes import InsertJobs, JobsInserted
from tests.conftest import PG_ADMIN_URL, T0, _scratch_pg_database
from tests.faultproxy import FaultProxy


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


# -- an outage (a real one: PostgreSQL through tests.faultproxy) ----------------------------


@pytest.fixture
def cut_store_url() -> Iterator[tuple[str, FaultProxy]]:
    """A scratch PostgreSQL database, and a proxy in front of it (the URL points at it)."""
    host, port = PG_ADMIN_URL.split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)
    for url in _scratch_pg_database():
        with FaultProxy(host, int(port)) as proxy:
            yield proxy.url_for(url), proxy


@pytest.mark.postgres
async def test_writes_wait_out_an_outage_and_land_together(
    cut_store_url: tuple[str, FaultProxy],
) -> None:
    url, proxy = cut_store_url
    store = SqlStore(url)
    await store.open()
    settings = EngineSettings()
    j = Journal(
        store, lambda job, outcome: finish_job(job, outcome, settings), backoff=Backoff(0.05, 0.2)
    )
    j.start()
    try:
        await j.write(InsertJobs([armed("r1", kind=JobKind.RECALL)], T0))
        proxy.set_mode("refuse")
        writes = [
            asyncio.ensure_future(j.write(InsertJobs([armed(f"j{i}")], T0))) for i in range(30)
        ]
        done, _ = await asyncio.wait(writes, timeout=1.0)
        assert done == set()  # nothing fails, nothing is dropped: they wait
        assert j.pending
        counts, listener = count_commits()
        try:
            proxy.set_mode("pass")
            async with asyncio.timeout(10):
                results = await asyncio.gather(*writes)
        finally:
            event.remove(Engine, "commit", listener)
        assert all(isinstance(r, JobsInserted) and len(r.jobs) == 1 for r in results)
        assert await store.count_jobs() == 31
        # Retried as a batch: one transaction (two if the first try raced the restore), not
        # 30 one by one against a dead database.
        assert counts["commits"] <= 2

        # A refusal is still the caller's answer, outage or not: a second pending recall in
        # the same session.
        proxy.set_mode("refuse")
        refused = asyncio.ensure_future(j.write(InsertJobs([armed("r2", kind=JobKind.RECALL)], T0)))
        fine = asyncio.ensure_future(j.write(InsertJobs([armed("after")], T0)))
        done, _ = await asyncio.wait([refused, fine], timeout=0.5)
        assert done == set()
        proxy.set_mode("pass")
        async with asyncio.timeout(10):
            with pytest.raises(ConflictError):
                await refused
            assert isinstance(await fine, JobsInserted)
        assert await store.count_jobs() == 32
    finally:
        await j.close()
        await store.close()


@pytest.mark.postgres
async def test_a_stop_gives_up_on_an_unreachable_database(
    cut_store_url: tuple[str, FaultProxy], caplog: pytest.LogCaptureFixture
) -> None:
    url, proxy = cut_store_url
    store = SqlStore(url)
    await store.open()
    settings = EngineSettings()
    j = Journal(store, lambda job, outcome: finish_job(job, outcome, settings))
    j.start()
    try:
        proxy.set_mode("refuse")
        waiting = j.submit(InsertJobs([armed("never")], T0))
        j.post(InsertJobs([armed("posted")], T0))
        done, _ = await asyncio.wait([waiting], timeout=0.5)
        assert done == set()
        j.begin_stop(0.5)
        async with asyncio.timeout(5):
            with pytest.raises(StoreUnavailableError):
                await waiting
            await j.close()
        assert "writes not recorded" in caplog.text
    finally:
        await j.close()
        proxy.set_mode("pass")
        await store.close()
