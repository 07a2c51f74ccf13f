"""Real-process crash test for BOUND jobs: kill -9 mid-turn must leave no session wedged.

A child process (crash_sessions_child.py) runs AgentCron on a SQLite file and the real clock:
SESSIONS sessions, each with a bound job every INTERVAL_S seconds, and user messages posted
into random sessions through `cron.sessions.send`. Its runner journals (fsync'd) every turn it
runs, then sleeps 50-300 ms so that kills land mid-turn. It is killed with SIGKILL again and
again and restarted each time: in some cycles by the parent at a random moment, in others by
itself, from a bus subscriber (`cron.subscribe`), at the next event of a given kind (a fire
about to start, a fire's turn announced started, a turn's trigger entry or reply committed):
so kills land at those moments every time, not once in a while (each kind once, CRASH_PLAN;
with AGENTCRON_LONG_TESTS=1 a longer plan with repeats). Then it runs once more (posting a
probe message into every session) until every session ran a fire and answered its probe, is
stopped gracefully, and a last engine drains what was released.

The regression: after a kill the restarted process settled the dead process's turn but left
the session's turn lease held by the dead owner, so the session was wedged until the lease
expired (5 min): every fire of its job piled up `queued`, and user messages got no answer.
When it was finally freed, its backlog ran as a burst of stale turns.

What is checked (all problems are reported together, the wedge first):

(c) no session wedged: in the final run every session ran a fire of its job and answered its
    probe; after the drain every accepted user message (every user turn in the store) has an
    answer: a `succeeded` turn with its reply in the transcript, or, if a kill cut it off
    while it ran, an `interrupted` turn closed by the visible interrupted notice.
(d) no burst of stale turns: in the final run each job ran at most the fires that came due
    since the last kill (catch-up inside misfire_grace legitimately runs those) + BURST_SLACK
    (fires the killed process had claimed but not started).
(a) no turn ran twice, no fire ran twice (by run id and by (job, fire_at)).
(b) end states. After the graceful stop: nothing `running` (turns finish within the stop
    timeout), no session lease held, and an active run or open turn may only be one that
    never started, released (owner NULL) for the next engine to adopt. After the drain: every
    run is terminal (succeeded, or interrupted when a kill cut its turn; skipped/missed only
    by policy), every turn is terminal, no lease is held, and the journal agrees: a turn
    begun by a graceful engine succeeded, a succeeded fire ran exactly once.

Replay a failure with AGENTCRON_CRASH_SEED=<seed printed in the failure message>.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentcron.agent.runner import Trigger
from agentcron.app import AgentCron
from agentcron.domain.jobs import Job
from agentcron.domain.runs import Run
from agentcron.domain.sessions import Message, Session, Turn
from agentcron.domain.states import ACTIVE_STATES, RunState, TurnState
from agentcron.schedule import EverySpec, next_fire
from tests.helpers.long import long_tests_on
from tests.integration.child_process import ChildProcess, OneAhead, journal_lines

SEED = int(os.environ.get("AGENTCRON_CRASH_SEED", "20261123"))
CHILD = Path(__file__).with_name("crash_sessions_child.py")
SESSIONS = 10
INTERVAL_S = 1
# One kill per cycle: "random" = the parent kills at a random moment KILL_AFTER after ready;
# any other = the child kills itself at that event (see crash_sessions_child.py), or the parent
# does after SELF_KILL_WAIT if none came.
# By default each kind once; with AGENTCRON_LONG_TESTS=1 the longer plan, with repeats.
CRASH_PLAN = ["random", "fired", "stream_start", "fire_started", "stream_end"]
LONG_CRASH_PLAN = [
    "random", "fired", "random", "stream_start", "fire_started", "random", "stream_end", "fired",
]  # fmt: skip
KILL_AFTER = (0.4, 1.8)
SELF_KILL_WAIT = 3.0
FINAL_RUN_S = 5.0  # the final run ends once every session ran a fire and answered its probe
BURST_SLACK = 3  # fires per job the final run may run beyond those due since the last kill
READY_TIMEOUT = 15.0
EXIT_TIMEOUT = 15.0
INTERRUPTED_NOTICE = "This turn was interrupted because agentcron stopped."

pytestmark = pytest.mark.slow


# -- the child process -------------------------------------------------------------------


# -- the database, through the public facade ---------------------------------------------


async def _never(trigger: Trigger) -> str:  # pragma: no cover - the parent never runs turns
    raise AssertionError("the parent does not run turns")


async def create_sessions_and_jobs(db: Path, rng: random.Random) -> tuple[list[str], list[Job]]:
    """SESSIONS sessions, each with one bound job every INTERVAL_S (default policies)."""
    cron = AgentCron(db=db, runner=_never)
    await cron.store.open()
    try:
        now = cron.clock.now()
        keys = [f"crash:s{i}" for i in range(SESSIONS)]
        jobs = []
        for i, key in enumerate(keys):
            await cron.sessions.create(key, title=f"session {i}")
            jobs.append(
                await cron.jobs.create(
                    name=f"tick-{i}",
                    spec=EverySpec(
                        seconds=INTERVAL_S, anchor=now + timedelta(seconds=rng.uniform(0.3, 1.3))
                    ),
                    message=f"tick {i}",
                    session_key=key,
                )
            )
        return keys, jobs
    finally:
        await cron.store.close()


@dataclass
class Snapshot:
    jobs: list[Job]
    runs: list[Run]
    sessions: dict[str, Session]
    turns: dict[str, list[Turn]]
    messages: dict[str, list[Message]]

    @property
    def all_turns(self) -> list[Turn]:
        return [t for ts in self.turns.values() for t in ts]


async def read_db(db: Path, keys: list[str]) -> Snapshot:
    cron = AgentCron(db=db, runner=_never)
    await cron.store.open()
    try:
        return Snapshot(
            jobs=await cron.jobs.list(),
            runs=await cron.runs.list(limit=None),
            sessions={k: await cron.sessions.get(k) for k in keys},
            turns={k: await cron.sessions.turns(k) for k in keys},
            messages={k: await cron.sessions.messages(k) for k in keys},
        )
    finally:
        await cron.store.close()


# -- the journal ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    turn_id: str
    session: str
    source: str
    run_id: str | None
    job_id: str | None
    fire_at: str | None
    pid: int
    at: float


@dataclass
class Journal:
    starts: list[Start] = field(default_factory=list)
    done: set[str] = field(default_factory=set)
    sent: dict[str, tuple[str, int]] = field(default_factory=dict)  # turn id -> (session, pid)
    probes: dict[str, str] = field(default_factory=dict)  # session -> probe turn id (final run)
    crashes: dict[int, tuple[str, str]] = field(default_factory=dict)  # pid -> (point, session)


def read_journal(path: Path, final_pid: int | None) -> Journal:
    j = Journal()
    if not path.exists():
        return j
    for n, line in enumerate(journal_lines(path), 1):
        p = line.split()
        if p[:1] == ["start"] and len(p) == 9:
            opt = [None if x == "-" else x for x in p[4:7]]
            j.starts.append(Start(p[1], p[2], p[3], *opt, int(p[7]), float(p[8])))
        elif p[:1] == ["done"] and len(p) == 2:
            j.done.add(p[1])
        elif p[:1] == ["crash"] and len(p) == 5:
            j.crashes[int(p[3])] = (p[1], p[2])
        elif p[:1] in (["sent"], ["probe"]) and len(p) == 5:
            j.sent[p[1]] = (p[2], int(p[3]))
            if p[0] == "probe" and int(p[3]) == final_pid:
                j.probes[p[2]] = p[1]
        else:
            raise AssertionError(f"journal line {n} is malformed: {line!r}")
    return j


def all_served(jr: Journal, keys: list[str], pid: int) -> bool:
    """Every session ran a fire in process `pid`, and its probe's turn ran to the end."""
    fired = {s.session for s in jr.starts if s.pid == pid and s.run_id is not None}
    return set(keys) <= fired and all(
        (probe := jr.probes.get(key)) is not None and probe in jr.done for key in keys
    )


def fires_between(spec: EverySpec, since: datetime, until: datetime) -> int:
    """How many fires of `spec` fall in (since, until]."""
    n, fire = 0, next_fire(spec, since)
    while fire is not None and fire <= until:
        n, fire = n + 1, next_fire(spec, fire)
    return n


def brief_run(r: Run) -> str:
    return (
        f"  run {r.id} {r.session_key} fire {r.fire_at:%H:%M:%S.%f} {r.state.value} owner {r.owner}"
    )


def brief_turn(t: Turn) -> str:
    return (
        f"  turn {t.id} {t.session_key} {t.source} {t.state.value} owner {t.owner} "
        f"run {t.run_id} {t.content!r}"
    )


def pid_of(owner: str | None) -> int | None:
    try:
        return int(str(owner).split(":")[1])
    except (IndexError, ValueError):
        return None


# -- the test ----------------------------------------------------------------------------


@pytest.mark.timeout(120)  # ~20 s when it passes; a wedged run also waits out stop timeouts
def test_kill_9_mid_bound_turns_leaves_no_session_wedged(tmp_path: Path) -> None:
    seed = SEED
    print(f"session crash test seed={seed} (replay with AGENTCRON_CRASH_SEED={seed})")
    try:
        _scenario(tmp_path, seed)
    except AssertionError as exc:
        raise AssertionError(f"[AGENTCRON_CRASH_SEED={seed}] {exc}") from exc


def _scenario(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    db = tmp_path / "crash.db"
    journal_path = tmp_path / "journal.txt"
    began = time.monotonic()

    keys, jobs = asyncio.run(create_sessions_and_jobs(db, rng))
    job_by_id = {j.id: j for j in jobs}

    killed: list[int] = []
    problems: list[str] = []
    plan = LONG_CRASH_PLAN if long_tests_on() else CRASH_PLAN

    def start(cycle: int, mode: str) -> ChildProcess:
        args = [str(db), str(journal_path), str(seed * 1000 + cycle), mode, *keys]
        log_path = tmp_path / f"child-{cycle}-{mode.replace(':', '-')}.log"
        return ChildProcess.start(CHILD, args, log_path, mode, held=True)

    modes = ["run" if p == "random" else f"run:{p}" for p in plan] + ["final", "drain"]
    cycles = OneAhead(start, modes)

    def launch(cycle: int, mode: str) -> ChildProcess:
        return cycles.launch(cycle, mode, READY_TIMEOUT)

    try:
        # 1. kill -9 again and again, restarting each time (each run posts user messages)
        last_kill = time.time()
        for cycle, point in enumerate(plan):
            if point == "random":
                child = launch(cycle, "run")
                time.sleep(rng.uniform(*KILL_AFTER))
                child.kill9()
            else:
                child = launch(cycle, f"run:{point}")
                try:
                    code = child.proc.wait(timeout=SELF_KILL_WAIT)
                except subprocess.TimeoutExpired:
                    child.kill9()  # no such event came: an ordinary kill then
                else:
                    assert code == -signal.SIGKILL, (
                        f"child {child.pid} exited {code}\n{child.stderr_tail()}"
                    )
            last_kill = time.time()
            killed.append(child.pid)

        # 2. a last run (a probe message into every session), stopped gracefully once every
        # session ran a fire and answered its probe (or after FINAL_RUN_S: then (c) says which)
        final = launch(len(plan), "final")
        final_ready = time.time()
        deadline = time.monotonic() + FINAL_RUN_S
        while not all_served(read_journal(journal_path, final.pid), keys, final.pid):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        final_term = time.time()
        final.proc.send_signal(signal.SIGTERM)
        final_out = final.wait_exit(EXIT_TIMEOUT)
        after_stop = asyncio.run(read_db(db, keys))

        # 3. drain: pause every job, let one more engine finish whatever was released
        drain = launch(len(plan) + 1, "drain")
        drain_out = drain.wait_exit(EXIT_TIMEOUT)
        for c in (final, drain):
            if (tb := c.tracebacks()) is not None:
                problems.append(f"the {c.label} engine {c.pid} logged an error:\n{tb}")
    finally:
        cycles.close()

    graceful = {final.pid, drain.pid}
    end = asyncio.run(read_db(db, keys))
    jr = read_journal(journal_path, final.pid)
    runs_by_id = {r.id: r for r in end.runs}
    turns_by_id = {t.id: t for t in end.all_turns}
    fire_starts = [s for s in jr.starts if s.run_id is not None]

    def who(pid: int | None) -> str:
        if pid in killed:
            how = "by the parent"
            if pid in jr.crashes:
                point, key = jr.crashes[pid]
                how = f"by itself at {point} in {key}"
            return f"pid {pid}, killed {how} in cycle {killed.index(pid)}"
        return {final.pid: f"pid {pid}, the final run", drain.pid: f"pid {pid}, the drain"}.get(
            pid, f"pid {pid}"
        )

    # (c) no session wedged in the final run ---------------------------------------------
    wedged: list[str] = []
    for key in keys:
        fired = [s for s in fire_starts if s.session == key and s.pid == final.pid]
        probe_id = jr.probes.get(key)
        probe = next((t for t in after_stop.turns[key] if t.id == probe_id), None)
        answered = probe is not None and probe.state is TurnState.SUCCEEDED
        if fired and answered:
            continue
        s = after_stop.sessions[key]
        held = turns_by_id.get(s.turn_id or "")
        open_turns = Counter(t.state.value for t in after_stop.turns[key] if not t.state.terminal)
        open_runs = Counter(
            r.state.value
            for r in after_stop.runs
            if r.session_key == key and r.state in ACTIVE_STATES
        )
        wedged.append(
            f"  {key}: fires run in the final run={len(fired)}, probe "
            f"{'answered' if answered else 'UNANSWERED (' + (probe.state.value if probe else 'missing') + ')'}"
            f"; turn lease held by {s.turn_owner!r} ({who(pid_of(s.turn_owner))}) until "
            f"{s.turn_lease_expires_at} for turn {s.turn_id} "
            f"({held.source + ' ' + held.state.value if held else '-'}); "
            f"open turns {dict(open_turns)}, active runs {dict(open_runs)}"
        )
    if wedged:
        problems.append(
            f"{len(wedged)} of {len(keys)} sessions wedged after the last restart (no fire ran "
            f"and/or the probe message got no answer within {FINAL_RUN_S}s):\n" + "\n".join(wedged)
        )

    # (c) every accepted user message answered (after the drain) ---------------------------
    user_turns = [t for t in end.all_turns if t.source == "user"]
    missing_sent = sorted(set(jr.sent) - {t.id for t in user_turns})
    if missing_sent:
        problems.append(f"messages accepted by send() but not in the store: {missing_sent}")
    unanswered: list[str] = []
    for t in user_turns:
        msgs = {m.id: m for m in end.messages[t.session_key]}
        reply = msgs.get(t.reply_message_id or "")
        ok = reply is not None and reply.role == "assistant" and reply.meta.get("turn_id") == t.id
        if t.state is TurnState.SUCCEEDED:
            ok = ok and reply is not None and reply.content == f"answer to {t.id}"
        elif t.state is TurnState.INTERRUPTED:
            starter = next((s.pid for s in jr.starts if s.turn_id == t.id), None)
            ok = ok and reply is not None and reply.content == INTERRUPTED_NOTICE
            ok = ok and starter not in graceful
        else:
            ok = False
        if not ok:
            unanswered.append(
                f"  {t.session_key} turn {t.id} ({t.content!r}): state {t.state.value}, "
                f"owner {t.owner!r}, reply {reply.content if reply else None!r}"
            )
    if unanswered:
        problems.append(
            f"{len(unanswered)} of {len(user_turns)} accepted user messages never answered "
            "(neither a reply nor a visible interrupted closure):\n" + "\n".join(unanswered[:30])
        )

    # (d) no burst of stale turns in the final run -----------------------------------------
    # Allowed: the job's fires due since the last kill (the restart catches those up inside
    # misfire_grace) and a few claimed but not started when it was killed.
    since = datetime.fromtimestamp(last_kill, UTC)
    until = datetime.fromtimestamp(final_term, UTC)
    for job in jobs:
        assert isinstance(job.spec, EverySpec)
        due = fires_between(job.spec, since, until)
        bound = due + BURST_SLACK
        ran = [s for s in fire_starts if s.job_id == job.id and s.pid == final.pid]
        if len(ran) > bound:
            stale = max(s.at - datetime.fromisoformat(s.fire_at or "").timestamp() for s in ran)
            problems.append(
                f"burst: {job.name} ran {len(ran)} fires in the final run, more than {bound} "
                f"({due} came due since the last kill, + {BURST_SLACK}); the stalest started "
                f"{stale:.1f}s after its fire time"
            )

    # (a) nothing ran twice --------------------------------------------------------------
    for what, ids in (
        ("turn ids", [s.turn_id for s in jr.starts]),
        ("run ids", [s.run_id for s in fire_starts]),
        ("fires (job, fire_at)", [(s.job_id, s.fire_at) for s in fire_starts]),
    ):
        dups = [k for k, n in Counter(ids).items() if n > 1]
        if dups:
            problems.append(f"{what} started twice: {dups}")

    # (b) after the graceful stop: only never-started work left, released -------------------
    started_turns = {s.turn_id for s in jr.starts}
    started_runs = {s.run_id for s in fire_starts}
    before_drain = [s for s in jr.starts if s.pid != drain.pid]
    bad = [
        brief_run(r)
        for r in after_stop.runs
        if r.state in ACTIVE_STATES
        and (
            r.state is RunState.RUNNING
            or r.owner is not None
            or r.id in {s.run_id for s in before_drain}
        )
    ]
    if bad:
        problems.append(
            f"the graceful stop left {len(bad)} runs active that it had not released:\n"
            + "\n".join(bad[:10])
        )
    bad = [
        brief_turn(t)
        for t in after_stop.all_turns
        if not t.state.terminal
        and (
            t.state is TurnState.RUNNING
            or t.owner is not None
            or t.id in {s.turn_id for s in before_drain}
        )
    ]
    if bad:
        problems.append(
            f"the graceful stop left {len(bad)} turns open that it had not released:\n"
            + "\n".join(bad[:10])
        )
    held = {k: s.turn_owner for k, s in after_stop.sessions.items() if s.turn_owner is not None}
    if held:
        problems.append(f"session turn leases still held after the graceful stop: {held}")

    # (b) after the drain: everything terminal, and the journal agrees ----------------------
    active = [r for r in end.runs if r.state in ACTIVE_STATES]
    if active:
        problems.append(
            f"{len(active)} runs still active after the drain: {Counter(r.state.value for r in active)}"
        )
    states = Counter(r.state for r in end.runs)
    unexpected = set(states) - {
        RunState.SUCCEEDED,
        RunState.INTERRUPTED,
        RunState.SKIPPED,
        RunState.MISSED,
    }
    if unexpected:
        problems.append(f"unexpected run states {states}")
    open_turns = [t for t in end.all_turns if not t.state.terminal]
    if open_turns:
        problems.append(
            f"{len(open_turns)} turns still open after the drain: "
            f"{Counter((t.source, t.state.value) for t in open_turns)}"
        )
    held = {k: s.turn_owner for k, s in end.sessions.items() if s.turn_owner is not None}
    if held:
        problems.append(f"session turn leases still held after the drain: {held}")
    if len({(r.job_id, r.fire_at) for r in end.runs}) != len(end.runs):
        problems.append("(job_id, fire_at) not unique in runs")
    turns_of_run = defaultdict(list)
    for t in end.all_turns:
        if t.run_id is not None:
            turns_of_run[t.run_id].append(t)
    for s in fire_starts:
        run = runs_by_id.get(s.run_id or "")
        if run is None:
            problems.append(f"journaled fire {s} has no run record")
            continue
        if (run.job_id, run.fire_at.isoformat()) != (s.job_id, s.fire_at):
            problems.append(f"journaled fire {s} ran as {brief_run(run)}")
        if s.pid in graceful and run.state is not RunState.SUCCEEDED:
            problems.append(f"a graceful engine's fire did not succeed: {brief_run(run)}")
    starter = {s.turn_id: s.pid for s in jr.starts}
    # A kill after a fire's turn committed its reply but before the run's outcome was recorded
    # leaves the turn `succeeded` and the run `interrupted` (never re-run): allowed, counted.
    unrecorded = 0
    for run in end.runs:
        fire_turns = turns_of_run.get(run.id, [])
        shown = f"{brief_run(run)}; turns: {[brief_turn(t) for t in fire_turns]}"
        if len(fire_turns) > 1:
            problems.append(f"a run with {len(fire_turns)} turns: {shown}")
        if run.state is RunState.SUCCEEDED:
            if run.id not in started_runs or not any(
                t.id in jr.done and t.state is TurnState.SUCCEEDED for t in fire_turns
            ):
                problems.append(f"succeeded, but its turn never ran to the end: {shown}")
        elif run.state is RunState.INTERRUPTED:
            owner = (run.error_details or {}).get("owner")
            if pid_of(owner) not in killed:
                problems.append(f"interrupted, but not by a kill: {shown}")
            for t in fire_turns:
                if t.state is TurnState.SUCCEEDED and t.id in jr.done and starter[t.id] in killed:
                    unrecorded += 1
                elif t.state not in (TurnState.INTERRUPTED, TurnState.CANCELLED):
                    problems.append(f"interrupted run with a turn in another state: {shown}")
    for t in end.all_turns:
        if t.id in started_turns and t.state is TurnState.CANCELLED:
            problems.append(f"a turn that ran was recorded cancelled: {brief_turn(t)}")

    # the scenario really crashed turns mid-way
    cut = [t for t in end.all_turns if t.state is TurnState.INTERRUPTED and t.id in started_turns]
    if not cut:
        problems.append("no kill landed inside a turn: widen KILL_AFTER or lengthen the turns")

    final_fires = Counter(
        job_by_id[s.job_id].name for s in fire_starts if s.pid == final.pid and s.job_id
    )
    summary = (
        f"{time.monotonic() - began:.1f}s, kills={len(killed)} (self-kills at "
        f"{sorted(p for p, _ in jr.crashes.values())}), runs={len(end.runs)} "
        f"{ {k.value: v for k, v in states.items()} }, turns={len(end.all_turns)} "
        f"{dict(Counter(t.state.value for t in end.all_turns))}, user messages={len(user_turns)}, "
        f"cut mid-turn={len(cut)}, fire turns finished but run unrecorded={unrecorded}, final run: {final_ready - last_kill:.1f}s after the last kill, "
        f"fires per job {dict(sorted(final_fires.items()))}\n"
        f"final: {final_out.strip()}\ndrain: {drain_out.strip()}"
    )
    assert not problems, "\n\n".join([*problems, summary])
    print(f"session crash test: {summary}")
