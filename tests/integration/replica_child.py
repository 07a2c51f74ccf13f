"""One replica for test_replicas.py and bench/bench_replicas.py: AgentCron on a shared database.

    python tests/integration/replica_child.py PLAN.json

PLAN.json (written by the parent) holds:

- `url`: the database every replica shares (PostgreSQL);
- `journal`: the file this replica appends its journal lines to;
- `seed`, `turn_ms` ([low, high]: each runner call sleeps that long, uniform; [0, 0] returns at
  once), `reap_interval_s`, `stop_timeout_s`, optional `max_concurrent_runs`;
- `sends`: [[unix time, session key, tag], ...]: user messages this replica submits with
  `cron.sessions.send` at those instants (the parent spreads them over the burst);
- `control`: a file the replica tails (every 20 ms) for lines `send KEY TAG [AT]`: a message
  sent at the unix time AT (at once without it). How the parent sends messages through a
  given replica while the replicas run (during a burst it stored, after a kill).

Journal lines (one O_APPEND write each: a kill -9 loses nothing written before it; T is
time.time(), the same wall clock the stored `started_at`/`finished_at` come from):

    start TURN KEY RUN JOB FIRE_AT PID T0   the runner was called (FIRE_AT a unix time, or -)
    done TURN PID T1                        ... and is returning (T1 after its sleep)
    sent TURN KEY TAG PID T                 send() accepted a message (its turn id)
    began TURN PID T                        with `marks`: StreamStart, the turn's start write
                                            is committed (published right after the commit)
    ended TURN PID T                        with `marks`: StreamEnd, its end write is committed

Prints `ready PID` once the engine is started, and `stopped ...` after a graceful stop
(SIGTERM). A SIGKILL at any moment is the point of the kill tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.events import Event, StreamEnd, StreamStart


class Journal:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, *fields: object) -> None:
        os.write(self.fd, (" ".join(str(f) for f in fields) + "\n").encode())

    def close(self) -> None:
        os.close(self.fd)


class JournalingRunner:
    """Journals each call with the wall time around it, sleeps a little, answers with text."""

    def __init__(self, journal: Journal, rng: random.Random, turn_ms: tuple[float, float]) -> None:
        self.journal, self.rng, self.turn_ms = journal, rng, turn_ms
        self.pid = os.getpid()

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        t = turn.trigger
        self.journal.write(
            "start", turn.turn_id, session.key,
            t.run_id if t else "-", t.job_id if t else "-",
            f"{t.fire_at.timestamp():.6f}" if t else "-", self.pid, f"{time.time():.6f}",
        )  # fmt: skip
        low, high = self.turn_ms
        if high > 0:
            await asyncio.sleep(self.rng.uniform(low, high) / 1000)
        self.journal.write("done", turn.turn_id, self.pid, f"{time.time():.6f}")
        return Outcome.succeeded(f"answer to {turn.turn_id}")


async def send(
    cron: AgentCron, journal: Journal, key: str, tag: str, at: float | None = None
) -> None:
    if at is not None:
        await asyncio.sleep(max(0.0, at - time.time()))
    try:
        turn = await cron.sessions.send(key, f"message {tag}")
    except Exception:
        logging.getLogger("replica").exception("send %s to %s failed", tag, key)
        return
    journal.write("sent", turn.id, key, tag, os.getpid(), f"{time.time():.6f}")


async def scheduled_sends(cron: AgentCron, journal: Journal, sends: list[list[Any]]) -> None:
    tasks = []
    for at, key, tag in sorted(sends):
        await asyncio.sleep(max(0.0, float(at) - time.time()))
        tasks.append(asyncio.create_task(send(cron, journal, str(key), str(tag))))
    await asyncio.gather(*tasks)


def read_from(path: Path, offset: int) -> bytes:
    """What the file holds after `offset` (nothing while it does not exist); small and local."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read()
    except FileNotFoundError:
        return b""


async def tail_control(cron: AgentCron, journal: Journal, path: Path) -> None:
    offset = 0
    tasks: set[asyncio.Task[None]] = set()
    while True:
        await asyncio.sleep(0.02)
        data = read_from(path, offset)
        end = data.rfind(b"\n") + 1  # whole lines only
        offset += end
        for line in data[:end].decode().splitlines():
            verb, key, tag, *at = line.split()
            if verb == "send":
                when = float(at[0]) if at else None
                task = asyncio.create_task(send(cron, journal, key, tag, when))
                tasks.add(task)
                task.add_done_callback(tasks.discard)


async def main(plan: dict[str, Any]) -> None:
    journal = Journal(plan["journal"])
    low, high = plan.get("turn_ms", [5, 40])
    runner = JournalingRunner(journal, random.Random(plan.get("seed", 0)), (low, high))
    settings = EngineSettings(
        reap_interval=timedelta(seconds=plan.get("reap_interval_s", 60)),
        stop_timeout=plan.get("stop_timeout_s", 5.0),
        max_concurrent_runs=plan.get("max_concurrent_runs", 16),
        max_jobs=None,
    )
    cron = AgentCron(url=plan["url"], runner=runner, settings=settings)
    if plan.get("marks"):
        pid = os.getpid()

        def mark(event: Event) -> None:
            kind = "began" if isinstance(event, StreamStart) else "ended"
            journal.write(kind, getattr(event, "turn_id", "-"), pid, f"{time.time():.6f}")

        cron.subscribe(mark, [StreamStart, StreamEnd])
    helpers: list[asyncio.Task[None]] = []
    try:
        await cron.start()
        print(f"ready {os.getpid()}", flush=True)
        helpers.append(asyncio.create_task(scheduled_sends(cron, journal, plan.get("sends", []))))
        if plan.get("control"):
            helpers.append(asyncio.create_task(tail_control(cron, journal, Path(plan["control"]))))
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
    finally:
        for task in helpers:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        t0 = time.monotonic()
        await cron.close()
        journal.close()
    print(f"stopped in {time.monotonic() - t0:.2f}s {dict(cron.engine.stats)}", flush=True)


if __name__ == "__main__":
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    asyncio.run(main(json.loads(Path(sys.argv[1]).read_text())))
