"""The workloads, run inside one child process per (system, workload), in that system's own
virtual environment. Standard library only: the peers' environments do not have agentcron.

A child is started as `python -m bench.peers.harness <system> <workload> <params-json>
<workdir>` (cwd = the repository, so `bench` is importable) and prints one JSON line last.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import math
import os
import resource
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

# A job that exists but does not come due during a benchmark: about a year ahead.
FAR_S = 365 * 86_400.0
# The modules under bench/peers/ that hold each system's adapter (class `Adapter`).
SYSTEMS = {
    "agentcron-unbound": ("bench.peers.agentcron_peer", {"mode": "unbound"}),
    "agentcron-bound": ("bench.peers.agentcron_peer", {"mode": "bound"}),
    "agentcron-pg": ("bench.peers.agentcron_peer", {"mode": "pg"}),
    "apscheduler": ("bench.peers.apscheduler_peer", {}),
    "nanobot": ("bench.peers.nanobot_peer", {}),
    "hermes": ("bench.peers.hermes_peer", {}),
}


def log(msg: str) -> None:
    print(f"[child] {msg}", file=sys.stderr, flush=True)


class Body:
    """The no-op job body every adapter calls with the job's due instant (epoch seconds):
    it records when it started and how late that was, and, when the adapter says, which job
    it was for (the herd's checks).
    """

    def __init__(self) -> None:
        self.started: list[float] = []  # time.time() at each call
        self.late_ms: list[float] = []
        self.jobs: list[int] = []  # the job index of each call, when the adapter gives it

    def __call__(self, due: float, job: int | None = None) -> None:
        now = time.time()
        self.started.append(now)
        self.late_ms.append((now - due) * 1_000)
        if job is not None:
            self.jobs.append(job)

    @property
    def count(self) -> int:
        return len(self.started)


class BaseAdapter:
    """What a system provides. `items` are (index, due epoch seconds) pairs; the index gives
    names and, for session-bound systems, the session key `api:s-<i mod sessions>`.
    """

    name = "?"
    version = "?"
    # Workloads this system cannot run, and why (the cell says n/a with the reason).
    unsupported: ClassVar[dict[str, str]] = {}

    def __init__(self, workdir: Path, body: Body, **options: Any) -> None:
        self.workdir = workdir
        self.body = body
        self.options = options
        # Sessions the bound jobs are spread over, when a workload fixes it (the herd); else
        # the adapter's own rule from the job count.
        self.fixed_sessions: int | None = None

    async def start(self, n_hint: int) -> None:
        """Open the (maybe existing) store and start the scheduler; `n_hint` = jobs the
        workload will create (the bound adapters create their sessions for it).
        """
        raise NotImplementedError

    async def add(self, i: int, due: float) -> None:
        """Create one job through the system's ordinary one-job API, scheduler running."""
        raise NotImplementedError

    async def setup(self, items: Sequence[tuple[int, float]], n_hint: int) -> None:
        """Store many jobs the fastest supported way and return with the scheduler running
        (the default: start, then `add` one by one). Not timed as "create".
        """
        await self.start(n_hint)
        for i, due in items:
            await self.add(i, due)

    async def settle(self) -> None:
        """Wait until the scheduler is idle after a start."""
        await asyncio.sleep(3.0)

    async def stop(self) -> None:
        raise NotImplementedError

    @staticmethod
    def clone_store(src: Path, dst: Path) -> None:
        """Copy a store built by the `build` phase (for the idle workloads)."""
        shutil.copytree(src, dst)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an already sorted list."""
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def vm_hwm_mb() -> float | None:
    """Peak RSS of this process (/proc VmHWM; unlike ru_maxrss, not inherited across exec)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def reset_peak_rss() -> bool:
    """Start VmHWM again from the RSS of now (Linux: 5 > /proc/self/clear_refs), so that the
    peak of what follows is not the setup's. False where that is not possible.
    """
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def vm_rss_mb() -> float | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def cpu_seconds() -> float:
    """CPU of this process (all threads) and of any children it waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


async def wait_count(body: Body, n: int, deadline: float, poll: float = 0.01) -> None:
    # Polling, not an Event: hermes calls the body from its worker threads.
    while body.count < n and time.time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(poll)


# -- workloads -------------------------------------------------------------------------------


async def w_create(make: Callable[[Path, Body], BaseAdapter], p: dict[str, Any], wd: Path):
    """`n` jobs created one per call while the scheduler runs (due about a year ahead)."""
    n, limit = p["n"], p["limit_s"]
    body = Body()
    adapter = make(wd / "create", body)
    await adapter.start(n)
    base = time.time() + FAR_S
    done = 0
    start = time.perf_counter()
    try:
        for i in range(n):
            await adapter.add(i, base + i)
            done += 1
            if time.perf_counter() - start > limit:
                break
        seconds = time.perf_counter() - start
    finally:
        await adapter.stop()
    return {
        "n": n,
        "done": done,
        "seconds": seconds,
        "rate": done / seconds,
        "complete": done == n,
        "limit_s": limit,
    }


async def stored_before(make, p: dict[str, Any], wd: Path, dues: Callable[[float], list[float]]):
    """Store the jobs with `setup` so that the first is due `lead` seconds after setup began;
    when setup ends less than `margin_s` before that, start again with a longer lead.
    Returns (adapter, body, first due instant, setup seconds).
    """
    n = p["n"]
    lead = p["lead_s"]
    for attempt in range(4):
        body = Body()
        adapter = make(wd / f"try{attempt}", body)
        t0 = time.time()
        first = t0 + lead
        items = list(enumerate(dues(first)))
        await adapter.setup(items, n)
        setup_s = time.time() - t0
        if time.time() <= first - p["margin_s"] and body.count == 0:
            return adapter, body, first, setup_s
        await adapter.stop()
        log(f"setup took {setup_s:.1f} s, lead {lead:.1f} s too short; retrying")
        lead = 1.5 * setup_s + p["margin_s"] + 1
    raise RuntimeError("setup never finished before the due instant")


async def w_burst(make, p: dict[str, Any], wd: Path):
    """`n` jobs due at the same instant: rate over due instant -> last body call, and when
    the first body started (ms after the due instant).
    """
    n, limit = p["n"], p["limit_s"]
    adapter, body, due, setup_s = await stored_before(make, p, wd, lambda t: [t] * n)
    try:
        await wait_count(body, n, due + limit)
        waited_to = time.time()
    finally:
        await adapter.stop()
    done = body.count
    starts = sorted(body.started)
    out = {"n": n, "done": done, "complete": done == n, "limit_s": limit, "setup_s": setup_s}
    if done:
        span = max(starts[-1] - due, 1e-6)
        out |= {
            "first_ms": (starts[0] - due) * 1_000,
            "last_ms": (starts[-1] - due) * 1_000,
            # incomplete: the fires that started within the limit, over the limit
            "rate": done / span if done == n else done / (waited_to - due),
        }
    return out


async def w_lateness(make, p: dict[str, Any], wd: Path):
    """`n` jobs evenly over `span_s`: lateness of each body call after its due instant."""
    n, span, limit = p["n"], p["span_s"], p["limit_s"]
    step = span / n
    adapter, body, first, setup_s = await stored_before(
        make, p, wd, lambda t: [t + step * i for i in range(n)]
    )
    try:
        await wait_count(body, n, first + span + limit)
    finally:
        await adapter.stop()
    late = sorted(body.late_ms)
    out = {
        "n": n,
        "done": len(late),
        "complete": len(late) == n,
        "limit_s": limit,
        "setup_s": setup_s,
    }
    if late:
        out |= {"p50_ms": percentile(late, 50), "p99_ms": percentile(late, 99), "max_ms": late[-1]}
    return out


async def w_build(make, p: dict[str, Any], wd: Path):
    """Phase 1 of `idle`: store `n` jobs due a year ahead in `wd/store`, then stop."""
    n = p["n"]
    body = Body()
    adapter = make(wd / "store", body)
    base = time.time() + FAR_S
    start = time.perf_counter()
    await adapter.setup([(i, base + i) for i in range(n)], n)
    await adapter.stop()
    return {"n": n, "build_s": time.perf_counter() - start}


async def w_idle(make, p: dict[str, Any], wd: Path):
    """Phase 2 of `idle`, a fresh process: start on a copy of the built store, wait until the
    scheduler is idle, then CPU over `idle_s` of doing nothing; peak RSS of the process.
    """
    n, idle_s = p["n"], p["idle_s"]
    body = Body()
    adapter = make(Path(p["store"]), body)
    start = time.perf_counter()
    await adapter.start(n)
    await adapter.settle()
    ready_s = time.perf_counter() - start
    gc.collect()
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    await asyncio.sleep(idle_s)
    cpu = cpu_seconds() - cpu0
    wall = time.perf_counter() - wall0
    rss = vm_hwm_mb()
    await adapter.stop()
    return {
        "n": n,
        "cpu_s": cpu,
        "wall_s": wall,
        "rss_mb": rss,
        "ready_s": ready_s,
        "fired": body.count,
    }


async def w_herd(make, p: dict[str, Any], wd: Path):
    """The 9 o'clock herd: `n` bound jobs over `sessions` sessions (job i in session i mod
    sessions), all due at one instant: when the first and the last body started, the peak RSS
    during the herd (VmHWM started again after the setup), and from the body calls: jobs that
    never ran, jobs run twice, and a session's fires run against the order they were created
    in. A system without sessions runs them as plain jobs.
    """
    n, sessions, limit = p["n"], p["sessions"], p["limit_s"]

    def make_fixed(workdir: Path, body: Body) -> BaseAdapter:
        adapter = make(workdir, body)
        adapter.fixed_sessions = sessions
        return adapter

    adapter, body, due, setup_s = await stored_before(make_fixed, p, wd, lambda t: [t] * n)
    gc.collect()
    rss_setup = vm_rss_mb()
    reset = reset_peak_rss()
    try:
        await wait_count(body, n, due + limit, poll=0.05)
        done = body.count  # what ran within the limit (a stop may still run a few)
        rss = vm_hwm_mb() if reset else None
    finally:
        await adapter.stop()
    out: dict[str, Any] = {
        "n": n,
        "sessions": sessions,
        "done": done,
        "complete": done == n,
        "limit_s": limit,
        "setup_s": setup_s,
        "rss_mb": rss,
        "rss_setup_mb": rss_setup,
    }
    if done:
        starts = sorted(body.started[:done])
        out |= {"first_ms": (starts[0] - due) * 1_000, "all_s": starts[-1] - due}
    if body.jobs and done == n:  # before the end, a fire not run yet is not lost
        out |= herd_checks(body.jobs[:done], n, sessions)
    return out


def herd_checks(jobs: Sequence[int], n: int, sessions: int) -> dict[str, int]:
    """From the job index of each body call, in call order: jobs never run, jobs run twice,
    and calls that ran a session's job before an earlier-created one of that session.
    """
    calls = [0] * n
    last = [-1] * sessions
    against = 0
    for i in jobs:
        calls[i] += 1
        s = i % sessions
        against += i < last[s]
        last[s] = max(last[s], i)
    unrun, twice = sum(1 for c in calls if c == 0), sum(1 for c in calls if c > 1)
    return {
        "unrun": unrun,
        "twice": twice,
        "lost_or_twice": unrun + twice,
        "against_order": against,
    }


WORKLOADS = {
    "create": w_create,
    "burst": w_burst,
    "lateness": w_lateness,
    "build": w_build,
    "idle": w_idle,
    "herd": w_herd,
}


def adapter_factory(system: str) -> tuple[type[BaseAdapter], Callable[[Path, Body], BaseAdapter]]:
    module_name, options = SYSTEMS[system]
    cls = importlib.import_module(module_name).Adapter

    def make(workdir: Path, body: Body) -> BaseAdapter:
        workdir.mkdir(parents=True, exist_ok=True)
        return cls(workdir, body, **options)

    return cls, make


def main(argv: Sequence[str]) -> int:
    system, workload, params, workdir = argv
    p = json.loads(params)
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    cls, make = adapter_factory(system)
    if workload == "clone":
        cls.clone_store(Path(p["src"]), Path(p["dst"]))
        result: dict[str, Any] = {}
    elif workload in cls.unsupported:
        result = {"na": cls.unsupported[workload]}
    else:
        result = asyncio.run(WORKLOADS[workload](make, p, wd))
    result["version"] = cls.version if isinstance(cls.version, str) else "?"
    print(json.dumps(result), flush=True)
    sys.stderr.flush()
    # Exit now: a peer's worker threads may still be draining queued fires (hermes' pool is
    # joined at interpreter exit), which would bill the next measurement's time.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
