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

Journal lines (one O_APPEND write each: a kill -9 loses nothing written before it, and a
reader skips a last line without its newline, one being written or cut by the kill; T is
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
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.events import Event, StreamEnd, StreamStart


class JournalFile:
    """The replica's journal (writing)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, *fields: object) -> None:
        os.write(self.fd, (" ".join(str(f) for f in fields) + "\n").encode())

    def close(self) -> None:
        os.close(self.fd)


class JournalingRunner:
    """Journals each call with the wall time around it, sleeps a little, answers with text."""

    def __init__(
        self, journal: JournalFile, rng: random.Random, turn_ms: tuple[float, float]
    ) -> None:
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
    cron: AgentCron, journal: JournalFile, key: str, tag: str, at: float | None = None
) -> None:
    if at is not None:
        await asyncio.sleep(max(0.0, at - time.time()))
    try:
        turn = await cron.sessions.send(key, f"message {tag}")
    except Exception:
        logging.getLogger("replica").exception("send %s to %s failed", tag, key)
        return
    journal.write("sent", turn.id, key, tag, os.getpid(), f"{time.time():.6f}")


async def scheduled_sends(cron: AgentCron, journal: JournalFile, sends: list[list[Any]]) -> None:
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


async def tail_control(cron: AgentCron, journal: JournalFile, path: Path) -> None:
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
    journal = JournalFile(plan["journal"])
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


# -- reading the journals back (the parents: test_replicas.py, bench/bench_replicas.py) --


@dataclass(frozen=True)
class Call:
    turn_id: str
    key: str
    run_id: str | None
    job_id: str | None
    fire_at: float | None
    pid: int
    t0: float
    t1: float | None  # None: no `done` (killed inside the call)
    began: float | None = None  # its start write was committed (StreamStart seen)
    ended: float | None = None  # its end write was committed (StreamEnd seen)


@dataclass
class Journal:
    """The replicas' journals, read back."""

    calls: list[Call]
    sent: dict[str, tuple[str, str, int]]  # turn id -> (session, tag, pid)

    def started(self, pid: int) -> int:
        return sum(1 for c in self.calls if c.pid == pid)


def read_journals(paths: list[Path]) -> Journal:
    # Imported here: the parents read, the replica itself runs as a script without `tests`.
    from tests.integration.child_process import journal_lines

    starts: list[list[str]] = []
    # by (turn id, pid): a turn that two replicas both ran has a call in each
    done: dict[tuple[str, str], float] = {}
    began: dict[tuple[str, str], float] = {}
    ended: dict[tuple[str, str], float] = {}
    sent: dict[str, tuple[str, str, int]] = {}
    for path in paths:
        for line in journal_lines(path):
            kind, *f = line.split()
            if kind == "start":
                starts.append(f)
            elif kind == "done":
                done[f[0], f[1]] = float(f[2])
            elif kind == "began":
                began[f[0], f[1]] = float(f[2])
            elif kind == "ended":
                ended[f[0], f[1]] = float(f[2])
            elif kind == "sent":
                sent[f[0]] = (f[1], f[2], int(f[3]))
    calls = [
        Call(
            turn_id=f[0],
            key=f[1],
            run_id=None if f[2] == "-" else f[2],
            job_id=None if f[3] == "-" else f[3],
            fire_at=None if f[4] == "-" else float(f[4]),
            pid=int(f[5]),
            t0=float(f[6]),
            t1=done.get((f[0], f[5])),
            began=began.get((f[0], f[5])),
            ended=ended.get((f[0], f[5])),
        )
        for f in starts
    ]
    return Journal(calls, sent)


def overlaps(intervals: list[tuple[float, float | None, str]]) -> list[tuple[int, int]]:
    """Index pairs (i, j) of one session's intervals (start, end, label) where j began before
    i ended: i is the interval, among those begun before j, that ends last (an open end
    counts as never ending).
    """
    order = sorted(range(len(intervals)), key=lambda i: intervals[i][0])
    found = []
    last: int | None = None  # the interval begun so far that ends last
    for j in order:
        if last is not None:
            end = intervals[last][1]
            if end is None or intervals[j][0] < end:
                found.append((last, j))
        if last is None or _ends_after(intervals[j][1], intervals[last][1]):
            last = j
    return found


def _ends_after(a: float | None, b: float | None) -> bool:
    return b is not None and (a is None or a > b)


if __name__ == "__main__":
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    asyncio.run(main(json.loads(Path(sys.argv[1]).read_text())))
