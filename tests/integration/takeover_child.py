"""Child process for test_crash_takeover.py: one engine replica on a shared PostgreSQL database.

    python takeover_child.py URL JOURNAL WORKDIR MODE KEY [KEY ...]

Both replicas use small liveness settings (SETTINGS: heartbeat 0.2 s, takeover 1.5 s) and the
real clock. MODE:

- `victim`: pretends to run on another host (its owner names `victim-host`, so no pid check on
  this host can tell it died: only its silent heartbeat can). Sends one message into each KEY;
  its runner never returns, so every session holds a running turn (and every slot is taken).
  Then creates one bound job per KEY and one unbound job, due a moment later: the bound fires
  are claimed and deferred behind the running turns, the unbound one is claimed and waits for
  a slot. Prints `ready PID` when all of that is in the database, then waits to be killed.
- `survivor`: a replica whose runner answers at once. Prints `ready PID`; when WORKDIR/probe
  appears, sends one message into each KEY (journaled `probe`); stops gracefully on SIGTERM.

Journal lines (one O_APPEND write each, fsync'd): `start TURN_ID RUN_ID PID` when a runner
begins a turn or run (`-` for no run), `probe TURN_ID KEY PID` for each probe message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.states import RunState, TurnState

SETTINGS = EngineSettings(
    owner_heartbeat=timedelta(seconds=0.2),
    takeover=timedelta(seconds=1.5),
    stop_timeout=3.0,
)
VICTIM_HOST = "victim-host"
POLL_S = 0.02


class Journal:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, *fields: object) -> None:
        os.write(self.fd, (" ".join(str(f) for f in fields) + "\n").encode())
        os.fsync(self.fd)


class Runner:
    """Journals every turn or run it begins; the victim's never return."""

    def __init__(self, journal: Journal, *, hang: bool) -> None:
        self.journal, self.hang = journal, hang

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        run_id = turn.trigger.run_id if turn.trigger else "-"
        self.journal.write("start", turn.turn_id, run_id, os.getpid())
        if self.hang:
            await asyncio.Event().wait()
        return Outcome.succeeded(f"answer to {turn.turn_id}")


async def wait_for(check: Callable[[], Awaitable[bool]], limit: float = 20.0) -> None:
    """Poll an async condition (a database read) until it holds."""
    async with asyncio.timeout(limit):
        while True:
            if await check():
                return
            await asyncio.sleep(POLL_S)


async def victim(cron: AgentCron, keys: list[str]) -> None:
    turns = [await cron.sessions.send(key, f"a long question in {key}") for key in keys]

    async def all_running() -> bool:
        states = [(await cron.sessions.turn(t.id)).state for t in turns]
        return all(s is TurnState.RUNNING for s in states)

    await wait_for(all_running)
    jobs = [
        await cron.jobs.create(name=f"fire-{i}", when="in 1s", message="tick", session_key=key)
        for i, key in enumerate(keys)
    ]
    jobs.append(await cron.jobs.create(name="isolated", when="in 1s", message="report"))

    async def all_claimed() -> bool:
        for job in jobs:
            runs = await cron.runs.list(job.id)
            if len(runs) != 1 or runs[0].state not in (RunState.DEFERRED, RunState.QUEUED):
                return False
        return True

    await wait_for(all_claimed)
    print(f"ready {os.getpid()}", flush=True)
    await asyncio.Event().wait()  # until the kill


async def survivor(cron: AgentCron, journal: Journal, workdir: Path, keys: list[str]) -> None:
    print(f"ready {os.getpid()}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    probe = workdir / "probe"
    while not stop.is_set():
        if probe.exists():
            probe.unlink()
            for key in keys:
                turn = await cron.sessions.send(key, f"probe into {key}")
                journal.write("probe", turn.id, key, os.getpid())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), POLL_S)


async def main(url: str, journal_path: str, workdir: str, mode: str, keys: list[str]) -> None:
    journal = Journal(journal_path)
    if mode == "victim":
        socket.gethostname = lambda: VICTIM_HOST  # type: ignore[assignment]
    runner = Runner(journal, hang=mode == "victim")
    settings = SETTINGS
    if mode == "victim":  # every slot held by a running turn: the unbound fire has to wait
        settings = replace(SETTINGS, max_concurrent_runs=len(keys))
    cron = AgentCron(url=url, runner=runner, settings=settings)
    await cron.start()
    try:
        if mode == "victim":
            await victim(cron, keys)
        else:
            await survivor(cron, journal, Path(workdir), keys)
    finally:
        await cron.close()
    print(f"stopped {dict(cron.engine.stats)}", flush=True)


if __name__ == "__main__":
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    url_arg, journal_arg, workdir_arg, mode_arg, *key_args = sys.argv[1:]
    asyncio.run(main(url_arg, journal_arg, workdir_arg, mode_arg, key_args))
