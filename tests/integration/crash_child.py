"""Child process for test_crash.py: run an agentcron engine on the real clock until killed.

    python crash_child.py DB JOURNAL SEED MODE

MODE is `run` (serve until SIGTERM, then stop gracefully; SIGKILL at any moment is the point)
or `drain` (pause every job before the engine starts, let it finish whatever is still active,
then stop). The runner appends `start RUN_ID JOB_ID FIRE_AT` to JOURNAL (fsync'd) before it does
anything, and `done RUN_ID` after, so the journal is the ground truth of which turns began.
Prints `ready PID` once the engine is started and `stopped STATS_JSON` after a graceful stop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import signal
import sys
import time

from agentcron.agent.runner import Trigger
from agentcron.app import AgentCron
from agentcron.domain.states import ACTIVE_STATES

TURN_MAX_S = 0.2  # each turn sleeps up to this long: the window a kill lands inside a turn


def _append(fd: int, line: str) -> None:
    os.write(fd, line.encode())  # one O_APPEND write per line: never interleaved or torn
    os.fsync(fd)


async def main(db: str, journal: str, seed: int, mode: str) -> None:
    rng = random.Random(seed)
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    async def runner(trigger: Trigger) -> str:
        fire_at = trigger.fire_at.isoformat()
        _append(fd, f"start {trigger.run_id} {trigger.job_id} {fire_at} {os.getpid()}\n")
        await asyncio.sleep(rng.uniform(0.0, TURN_MAX_S))
        _append(fd, f"done {trigger.run_id}\n")
        return f"ran {trigger.job_name} for {fire_at}"

    cron = AgentCron(db=db, runner=runner)
    try:
        if mode == "drain":
            await cron.store.open()
            for job in await cron.jobs.list():
                if job.enabled:
                    await cron.jobs.pause(job.id, reason="crash test: drain")
        await cron.start()
        print(f"ready {os.getpid()}", flush=True)
        if mode == "drain":
            deadline = time.monotonic() + 20
            while await cron.store.count_runs(states=ACTIVE_STATES):
                if time.monotonic() > deadline:
                    raise SystemExit("drain: runs still active after 20 s")
                await asyncio.sleep(0.05)
        else:
            stop = asyncio.Event()
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
            await stop.wait()
    finally:
        await cron.close()
        os.close(fd)
    status = cron.status()
    counts = {"claimed": status.fires_claimed,
              **{state.value: n for state, n in status.runs_finished.items()}}  # fmt: skip
    print(f"stopped {json.dumps(counts, sort_keys=True)}", flush=True)


if __name__ == "__main__":
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s: %(message)s %(run_id)s",
            defaults={"run_id": ""},
        )
    )
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    db_arg, journal_arg, seed_arg, mode_arg = sys.argv[1:5]
    asyncio.run(main(db_arg, journal_arg, int(seed_arg), mode_arg))
