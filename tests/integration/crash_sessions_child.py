"""Child process for test_crash_sessions.py: bound jobs and chat messages on the real clock.

    python crash_sessions_child.py DB JOURNAL SEED MODE KEY [KEY ...]

Runs AgentCron (SQLite file, real clock) whose runner journals every turn it runs. MODE:

- `run`: serve until SIGTERM (then stop gracefully; SIGKILL at any moment is the point) while
  posting user messages into random sessions through `cron.sessions.send`;
- `run:POINT`: as `run`, but after a random delay the child SIGKILLs itself at the next
  event of kind POINT on the bus (`cron.subscribe`), so a kill lands exactly at that moment of
  a turn's life: `fire_started` (a fire is about to become a turn), `fired` (JobEvent FIRED:
  the fire's turn is announced started), `deferred` (a fire waits behind a turn),
  `stream_start` (a turn's trigger entry is committed, the runner is next), `stream_end` (a
  turn's reply is committed, its run's outcome not necessarily yet);
- `final`: as `run`, and first posts one probe message into every session;
- `drain`: pause every job before the engine starts, post nothing, let the engine finish what
  is still open (released fires and turns), then stop; gives up after DRAIN_S.

Journal lines (one O_APPEND write each, fsync'd, so the journal is the ground truth):

    start TURN_ID SESSION SOURCE RUN_ID JOB_ID FIRE_AT PID T   the runner began a turn
    done TURN_ID                                               ... and returned
    sent TURN_ID SESSION PID T                                 send() accepted a message
    probe TURN_ID SESSION PID T                                the same, for a probe
    crash POINT SESSION PID T                                  killing itself at POINT

(`-` for a field a user turn has not; T is time.time().) Prints `ready PID` once the engine is
started and `stopped ...` after a graceful stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import sys
import time

from agentcron.agent.runner import Outcome, SessionInfo, TurnEvents, TurnInput
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.events import Event, FireStarted, JobAction, JobEvent, StreamEnd, StreamStart
from agentcron.domain.states import ACTIVE_STATES

TURN_S = (0.05, 0.3)  # each turn sleeps this long: the window a kill lands inside a turn
POST_EVERY_S = (0.05, 0.3)  # a user message into a random session this often
ARM_AFTER_S = (0.2, 1.2)  # `run:POINT`: the self-kill is armed this long after ready
DRAIN_S = 6.0
# Turns last < 0.3 s: a graceful stop never needs the default 30 s (and must not hide a hang).
SETTINGS = EngineSettings(stop_timeout=3.0)


class Journal:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, *fields: object) -> None:
        os.write(self.fd, (" ".join(str(f) for f in fields) + "\n").encode())
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


class JournalingRunner:
    """Runs every turn (user or scheduled) by journaling it and sleeping a little."""

    def __init__(self, journal: Journal, rng: random.Random) -> None:
        self.journal, self.rng = journal, rng

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        t = turn.trigger
        self.journal.write(
            "start", turn.turn_id, session.key, turn.source.value,
            t.run_id if t else "-", t.job_id if t else "-",
            t.fire_at.isoformat() if t else "-", os.getpid(), f"{time.time():.3f}",
        )  # fmt: skip
        await asyncio.sleep(self.rng.uniform(*TURN_S))
        self.journal.write("done", turn.turn_id)
        return Outcome.succeeded(f"answer to {turn.turn_id}")


async def post_messages(
    cron: AgentCron, journal: Journal, keys: list[str], rng: random.Random
) -> None:
    n = 0
    while True:
        await asyncio.sleep(rng.uniform(*POST_EVERY_S))
        key = rng.choice(keys)
        n += 1
        turn = await cron.sessions.send(key, f"message {n} from {os.getpid()}")
        journal.write("sent", turn.id, key, os.getpid(), f"{time.time():.3f}")


def crash_point(event: Event) -> str | None:
    if isinstance(event, JobEvent):
        return {JobAction.FIRED: "fired", JobAction.DEFERRED: "deferred"}.get(event.action)
    if isinstance(event, FireStarted):
        return "fire_started"
    if isinstance(event, StreamStart):
        return "stream_start"
    if isinstance(event, StreamEnd):
        return "stream_end"
    return None


def arm_self_kill(
    cron: AgentCron, journal: Journal, point: str, rng: random.Random
) -> asyncio.TimerHandle:
    """After a random delay, SIGKILL this process inside the callback of the next `point`
    event: the engine is stopped dead exactly where it announced that event.
    """
    armed = False

    def arm() -> None:
        nonlocal armed
        armed = True

    def on_event(event: Event) -> None:
        if armed and crash_point(event) == point:
            journal.write("crash", point, event.session_key, os.getpid(), f"{time.time():.3f}")
            os.kill(os.getpid(), signal.SIGKILL)

    cron.subscribe(on_event)
    # At f76bbb0 the engine makes a bus of its own (`bus or EventBus()`, and an EventBus with
    # no subscribers is falsy), so `cron.subscribe` never sees engine events; listen there too.
    engine_bus = getattr(cron.engine, "bus", cron.events)
    if engine_bus is not cron.events:
        engine_bus.subscribe(on_event)
    return asyncio.get_running_loop().call_later(rng.uniform(*ARM_AFTER_S), arm)


async def open_work(cron: AgentCron, keys: list[str]) -> int:
    """Fires and turns not yet ended (read through the facade)."""
    count = len(await cron.runs.list(states=list(ACTIVE_STATES), limit=None))
    for key in keys:
        count += sum(1 for t in await cron.sessions.turns(key) if not t.state.terminal)
    return count


async def main(db: str, journal_path: str, seed: int, mode: str, keys: list[str]) -> None:
    rng = random.Random(seed)
    journal = Journal(journal_path)
    cron = AgentCron(db=db, runner=JournalingRunner(journal, rng), settings=SETTINGS)
    poster: asyncio.Task[None] | None = None
    try:
        if mode == "drain":
            await cron.store.open()
            for job in await cron.jobs.list():
                if job.enabled:
                    await cron.jobs.pause(job.id, reason="crash test: drain")
        await cron.start()
        if mode == "final":
            for key in keys:
                turn = await cron.sessions.send(key, f"probe from {os.getpid()}")
                journal.write("probe", turn.id, key, os.getpid(), f"{time.time():.3f}")
        print(f"ready {os.getpid()}", flush=True)
        if mode == "drain":
            deadline = time.monotonic() + DRAIN_S
            while left := await open_work(cron, keys):
                if time.monotonic() > deadline:
                    print(
                        f"drain-timeout {left} runs/turns still open after {DRAIN_S}s", flush=True
                    )
                    break
                await asyncio.sleep(0.05)
        else:
            if mode.startswith("run:"):
                arm_self_kill(cron, journal, mode.partition(":")[2], rng)
            poster = asyncio.create_task(post_messages(cron, journal, keys, rng))
            stop = asyncio.Event()
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
            await stop.wait()
    finally:
        if poster is not None:
            poster.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poster
        t0 = time.monotonic()
        await cron.close()
        journal.close()
    print(f"stopped in {time.monotonic() - t0:.2f}s {dict(cron.engine.stats)}", flush=True)


if __name__ == "__main__":
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    db_arg, journal_arg, seed_arg, mode_arg, *key_args = sys.argv[1:]
    asyncio.run(main(db_arg, journal_arg, int(seed_arg), mode_arg, key_args))
