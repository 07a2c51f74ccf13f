"""agentcron, driven like bench/bench_engine.py: `AgentCron` with a no-op runner, `at` jobs,
one `cron.jobs.create(...)` per job (create_many for the setup of the other workloads).

Modes: `unbound` (no session key: the isolated-run path), `bound` (every fire is a turn of
session `api:s-<i mod sessions>`, sessions created first; SQLite) and `pg` (bound, on
PostgreSQL at $AGENTCRON_BENCH_PG_URL or postgres@127.0.0.1:5432).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

import agentcron
from agentcron.agent.runner import Trigger
from agentcron.app import AgentCron
from agentcron.domain.jobs import NewJob
from agentcron.schedule import AtSpec
from agentcron.testing import wait_settled
from bench.bench_engine import DEFAULT_PG_URL, PG_ENV, UNLIMITED
from bench.peers.harness import BaseAdapter, Body

PG_PREFIX = "agentcron_bench_p_"  # databases this benchmark creates (and drops at the end)


def sessions_for(n: int) -> int:
    """Sessions the bound jobs are spread over: n/10, between 1 and 1,000 (as bench_engine:
    1,000 jobs over 100 sessions, 10,000 over 1,000).
    """
    return min(1_000, max(1, n // 10))


def pg_admin(url: str) -> sa.Engine:
    return sa.create_engine(sa.make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")


def pg_exec(url: str, *statements: str) -> None:
    admin = pg_admin(url)
    try:
        with admin.connect() as conn:
            for statement in statements:
                conn.exec_driver_sql(statement)
    finally:
        admin.dispose()


class Adapter(BaseAdapter):
    name = "agentcron"
    version = agentcron.__version__ if hasattr(agentcron, "__version__") else "dev"

    def __init__(self, workdir: Path, body: Body, *, mode: str) -> None:
        super().__init__(workdir, body)
        self.mode = mode
        self.bound = mode in ("bound", "pg")
        self.sessions = 1
        self.cron: AgentCron | None = None

    # -- the store ---------------------------------------------------------------------------

    def _kwargs(self) -> tuple[dict[str, Any], bool]:
        """AgentCron's store argument, and whether the store is new."""
        if self.mode != "pg":
            path = self.workdir / "agentcron.db"
            return {"db": path}, not path.exists()
        marker = self.workdir / "pg.url"
        if marker.exists():
            return {"url": marker.read_text().strip()}, False
        url = self._pg_url_for(self.workdir)
        name = sa.make_url(url).database
        pg_exec(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
        marker.write_text(url)
        return {"url": url}, True

    @staticmethod
    def _pg_url_for(workdir: Path) -> str:
        base = os.environ.get(PG_ENV, DEFAULT_PG_URL)
        digest = hashlib.sha1(str(workdir.resolve()).encode()).hexdigest()[:10]
        return (
            sa.make_url(base).set(database=PG_PREFIX + digest).render_as_string(hide_password=False)
        )

    @classmethod
    def clone_store(cls, src: Path, dst: Path) -> None:
        marker = src / "pg.url"
        if not marker.exists():
            return BaseAdapter.clone_store(src, dst)
        src_name = sa.make_url(marker.read_text().strip()).database
        dst.mkdir(parents=True, exist_ok=True)
        url = cls._pg_url_for(dst)
        name = sa.make_url(url).database
        pg_exec(
            url,
            f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
            f'CREATE DATABASE "{name}" TEMPLATE "{src_name}"',
        )
        (dst / "pg.url").write_text(url)
        return None

    # -- the adapter -------------------------------------------------------------------------

    async def _runner(self, trigger: Trigger) -> str:
        self.body(float(trigger.message), int(trigger.job_name.rpartition("-")[2]))
        return "ok"  # non-empty: the run is `succeeded`

    def _key(self, i: int) -> str | None:
        return f"api:s-{i % self.sessions}" if self.bound else None

    async def start(self, n_hint: int) -> None:
        kwargs, new = self._kwargs()
        self.sessions = self.fixed_sessions or sessions_for(n_hint)
        self.cron = AgentCron(**kwargs, runner=self._runner, settings=UNLIMITED)
        await self.cron.start()
        if self.bound and new:
            for s in range(self.sessions):
                await self.cron.sessions.create(f"api:s-{s}")

    async def add(self, i: int, due: float) -> None:
        assert self.cron is not None
        await self.cron.jobs.create(
            name=f"j-{i}",
            spec=AtSpec(at=datetime.fromtimestamp(due, UTC)),
            message=repr(due),
            session_key=self._key(i),
        )

    async def setup(self, items: Sequence[tuple[int, float]], n_hint: int) -> None:
        await self.start(n_hint)
        assert self.cron is not None
        jobs = [
            NewJob(
                name=f"j-{i}",
                spec=AtSpec(at=datetime.fromtimestamp(due, UTC)),
                message=repr(due),
                session_key=self._key(i),
            )
            for i, due in items
        ]
        for k in range(0, len(jobs), 5_000):
            await self.cron.jobs.create_many(jobs[k : k + 5_000])

    async def settle(self) -> None:
        assert self.cron is not None
        await wait_settled(self.cron.engine, limit=120)

    async def stop(self) -> None:
        if self.cron is not None:
            await self.cron.close()
            self.cron = None
