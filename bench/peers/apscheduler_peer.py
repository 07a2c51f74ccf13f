"""APScheduler 3.x: `AsyncIOScheduler` with a `SQLAlchemyJobStore` on SQLite (WAL,
synchronous=NORMAL, the settings agentcron's store uses), `date` triggers,
`misfire_grace_time=None` (a late job still runs). The job body is a coroutine, so the default
`AsyncIOExecutor` runs it on the event loop. APScheduler has no sessions: the herd's jobs are
plain jobs there (nothing keeps two fires of one session apart).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apscheduler
import sqlalchemy as sa
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from bench.peers.harness import BaseAdapter, Body

_BODY: Body | None = None


async def job_body(due: float, job: int | None = None) -> None:
    """The job target: module level, so the job store can pickle a reference to it."""
    assert _BODY is not None
    _BODY(due, job)


class Adapter(BaseAdapter):
    name = "APScheduler"
    version = apscheduler.__version__

    def __init__(self, workdir: Path, body: Body, **options: Any) -> None:
        super().__init__(workdir, body)
        global _BODY
        _BODY = body
        self.engine = sa.create_engine(f"sqlite:///{workdir / 'jobs.sqlite'}")

        @sa.event.listens_for(self.engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.close()

        self.scheduler = AsyncIOScheduler(
            jobstores={"default": SQLAlchemyJobStore(engine=self.engine)},
            job_defaults={"misfire_grace_time": None},
            timezone=UTC,
        )

    async def start(self, n_hint: int) -> None:
        self.scheduler.start()

    def _add(self, i: int, due: float) -> None:
        self.scheduler.add_job(
            job_body,
            "date",
            run_date=datetime.fromtimestamp(due, UTC),
            args=[due, i],
            id=f"j-{i}",
            replace_existing=True,
        )

    async def add(self, i: int, due: float) -> None:
        self._add(i, due)

    async def setup(self, items: Sequence[tuple[int, float]], n_hint: int) -> None:
        # add_job before start() queues the jobs; start() writes them to the store.
        for i, due in items:
            self._add(i, due)
        self.scheduler.start()

    async def stop(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        self.engine.dispose()
