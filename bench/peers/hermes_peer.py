"""hermes-agent: `cron.jobs.create_job` (a JSON file store under $HERMES_HOME/cron) and its
built-in in-process ticker (`InProcessCronScheduler`) at a 1 s interval in a daemon thread, as
the gateway runs it (`tick(sync=False)`: due jobs go to its thread pool). The job body is
stubbed: `cron.scheduler.run_job` (the agent call) is replaced by the no-op body; the rest of
a fire (claim, execution records, output file, delivery check, mark_job_run) is hermes' own.
"""

from __future__ import annotations

import copy
import os
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any, ClassVar

from bench.peers.harness import BaseAdapter, Body

TICK_S = 1


def iso(due: float) -> str:
    return datetime.fromtimestamp(due, UTC).isoformat()


class Adapter(BaseAdapter):
    name = "hermes"
    version = dist_version("hermes-agent")
    unsupported: ClassVar[dict[str, str]] = {
        # Each fire runs its own agent session (cron_<job id>_<time>) and delivers the output.
        "herd": "its jobs are not turns of a chat session",
    }

    def __init__(self, workdir: Path, body: Body, **options: Any) -> None:
        super().__init__(workdir, body)
        # hermes resolves its home from $HERMES_HOME (read again on every store access).
        os.environ["HERMES_HOME"] = str(workdir.resolve())
        import cron.jobs as jobs
        import cron.scheduler as scheduler
        from cron.scheduler_provider import InProcessCronScheduler

        self.jobs = jobs

        def run_job(job: dict[str, Any], *, defer_agent_teardown: Any = None):
            body(float(job["prompt"]))
            return True, "ok", "ok", None  # (success, output doc, final response, error)

        scheduler.run_job = run_job
        self.ticker = InProcessCronScheduler()
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None

    async def start(self, n_hint: int) -> None:
        self.thread = threading.Thread(
            target=self.ticker.start,
            args=(self.stop_event,),
            kwargs={"interval": TICK_S},
            daemon=True,
        )
        self.thread.start()

    def _create(self, i: int, due: float) -> dict[str, Any]:
        return self.jobs.create_job(
            prompt=repr(due), schedule=iso(due), name=f"j-{i}", deliver="local"
        )

    async def add(self, i: int, due: float) -> None:
        self._create(i, due)

    async def setup(self, items: Sequence[tuple[int, float]], n_hint: int) -> None:
        # One create_job, then copies of its record with their own id, name and times,
        # written with one save_jobs (create_job rewrites the whole file per job).
        items = list(items)
        if items:
            first = self._create(*items[0])
            records = self.jobs.load_jobs()
            for i, due in items[1:]:
                job = copy.deepcopy(first)
                schedule = self.jobs.parse_schedule(iso(due))
                job.update(
                    id=uuid.uuid4().hex[:12],
                    name=f"j-{i}",
                    prompt=repr(due),
                    schedule=schedule,
                    schedule_display=schedule.get("display"),
                    next_run_at=self.jobs.compute_next_run(schedule),
                )
                records.append(job)
            self.jobs.save_jobs(records)
        await self.start(n_hint)

    async def stop(self) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout=10)
