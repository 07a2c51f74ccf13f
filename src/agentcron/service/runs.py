"""Run records: read, list, wait (bounded) for a run to end, and a person's "run now"."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agentcron.domain.runs import Run
from agentcron.domain.states import RunState
from agentcron.runtime.clock import Clock, SystemClock
from agentcron.runtime.waiters import Waiters
from agentcron.service.waiting import wait_for
from agentcron.store.interface import RunRecords


class Runs:
    """Read run records (the engine writes them), and ask for a manual run."""

    def __init__(
        self,
        records: RunRecords,
        waiters: Waiters,
        *,
        stopping: Callable[[], bool],
        clock: Clock | None = None,
        adopt: Callable[[], None] = lambda: None,
    ) -> None:
        self._records = records
        self._waiters = waiters  # notified by the engine when a run ends
        self._stopping = stopping
        self._clock: Clock = clock or SystemClock()
        self._adopt = adopt  # tells this process's engine a fire waits to be adopted

    async def run_now(self, job_id: str) -> Run:
        """Run the job now, once, as a person asked: a manual run through the same path as
        a scheduled fire (adopted by the engine that owns firing, here or in another process
        on the database: its lane, deferral behind an open turn, trigger entry, run record,
        closure and events). The job's schedule is not moved. A paused job runs too (it is a
        person's explicit request). Returns the run as recorded (`claimed`, not started).

        JobNotFoundError: no such job; ManualRunPendingError: its previous manual run has not
        ended yet.
        """
        run = await self._records.insert_manual_run(job_id, self._clock.now())
        self._adopt()  # this process does not hear its own notice
        return run

    async def list(
        self,
        job_id: str | None = None,
        *,
        session_key: str | None = None,
        states: Sequence[RunState] | None = None,
        limit: int | None = 100,
    ) -> list[Run]:
        return await self._records.list_runs(
            job_id=job_id, session_key=session_key, states=states, limit=limit
        )

    async def get(self, run_id: str) -> Run:
        return await self._records.get_run(run_id)

    async def wait(self, run_id: str, seconds: float) -> Run:
        """The run once it is terminal, or as it is after `seconds`."""
        with self._waiters.watch(run_id) as done:
            return await wait_for(
                lambda: self.get(run_id), lambda r: r.state.terminal, done, seconds, self._stopping
            )

    async def get_or_wait(self, run_id: str, wait: float = 0.0) -> Run:
        """`get`, or with `wait` > 0 `wait` (the API's `?wait=` long poll)."""
        return await self.wait(run_id, wait) if wait else await self.get(run_id)
