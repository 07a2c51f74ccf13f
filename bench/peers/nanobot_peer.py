"""nanobot: `nanobot.cron.service.CronService` (a JSON file store), bound `at` jobs as its
cron tool makes them (`delete_after_run=True`, session key `api:s-<i mod sessions>` with its
origin channel and chat id: nanobot disables unbound agent jobs). `on_job` is the no-op body.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

from nanobot.cron.service import CronService
from nanobot.cron.types import CronJob, CronSchedule

from bench.peers.harness import BaseAdapter, Body


def sessions_for(n: int) -> int:
    return min(1_000, max(1, n // 10))


class Adapter(BaseAdapter):
    name = "nanobot"
    version = dist_version("nanobot-ai")

    def __init__(self, workdir: Path, body: Body, **options: Any) -> None:
        super().__init__(workdir, body)
        self.sessions = 1
        self.service = CronService(workdir / "cron" / "jobs.json", on_job=self._on_job)

    async def _on_job(self, job: CronJob) -> None:
        self.body(float(job.payload.message), int(job.name.rpartition("-")[2]))

    async def start(self, n_hint: int) -> None:
        self.sessions = self.fixed_sessions or sessions_for(n_hint)
        await self.service.start()

    def _add(self, i: int, due: float) -> None:
        s = i % self.sessions
        self.service.add_job(
            name=f"j-{i}",
            schedule=CronSchedule(kind="at", at_ms=round(due * 1000)),
            message=repr(due),
            delete_after_run=True,
            session_key=f"api:s-{s}",
            origin_channel="api",
            origin_chat_id=f"s-{s}",
        )

    async def add(self, i: int, due: float) -> None:
        self._add(i, due)

    async def setup(self, items: Sequence[tuple[int, float]], n_hint: int) -> None:
        # Not running, add_job appends to the action log (no store rewrite); start() merges it.
        self.sessions = self.fixed_sessions or sessions_for(n_hint)
        for i, due in items:
            self._add(i, due)
        await self.service.start()

    async def stop(self) -> None:
        self.service.stop()
