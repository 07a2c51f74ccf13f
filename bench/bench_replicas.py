"""`python -m bench replicas`: 1 replica against 3 replicas of agentcron on one PostgreSQL
database (real processes: tests/integration/replica_child.py), with ratios 3 / 1.

Rows: bound and unbound burst fires/s, lateness of fires spread over a span, duplicates and
overlaps (must be 0), takeover time after a kill -9, and the delay from a change made by another
process to its fire. Every figure is the median of the rounds. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from tests.integration.child_process import ChildProcess
from tests.integration.replica_child import Journal, overlaps, read_journals

from agentcron.agent.runner import Trigger
from agentcron.app import AgentCron
from agentcron.config import EngineSettings
from agentcron.domain.jobs import NewJob
from agentcron.domain.runs import Run
from agentcron.domain.states import ACTIVE_STATES, TERMINAL_STATES
from agentcron.schedule import AtSpec

REPO = Path(__file__).resolve().parent.parent
CHILD = REPO / "tests" / "integration" / "replica_child.py"
RESULTS = REPO / "bench" / "results"
DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/agentcron_bench_replicas"
PG_ENV = "AGENTCRON_BENCH_REPLICAS_PG_URL"
READY_TIMEOUT = 60.0
DEFAULT_REAP_S = EngineSettings().reap_interval.total_seconds()


def log(msg: str) -> None:
    print(f"[replicas {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Sizes:
    burst: int  # fires due at once
    burst_sessions: int
    spread: int  # fires spread over `span_s`
    spread_sessions: int
    span_s: float
    kill: int  # bound fires of the kill -9 burst
    kill_sessions: int
    kill_after_calls: int  # the victim is killed after this many runner calls
    limit_s: float  # a burst waits at most this long after its due instant


FULL = Sizes(10_000, 1_000, 1_000, 100, 10.0, 2_000, 200, 100, 120.0)
QUICK = Sizes(1_000, 100, 200, 20, 2.0, 500, 50, 30, 30.0)


async def _never(trigger: Trigger) -> str:  # pragma: no cover - the bench never runs turns
    raise AssertionError("the benchmark process runs no turns")


def facade(url: str) -> AgentCron:
    """Store-only access to the database (never started): the "other process" of the rows."""
    return AgentCron(url=url, runner=_never, settings=EngineSettings(max_jobs=None))


def recreate_pg(url: str) -> None:
    """Drop and create the benchmark's database (its name must contain 'bench')."""
    parsed = sa.make_url(url)
    name = parsed.database or ""
    if "bench" not in name:
        raise SystemExit(f"database name {name!r} lacks 'bench' (it is dropped and re-created)")
    admin = sa.create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    finally:
        admin.dispose()


# -- the replicas ---------------------------------------------------------------------------


@dataclass
class Replicas:
    url: str
    tmp: Path
    children: list[ChildProcess] = field(default_factory=list)

    def start(self, n: int, *, turn_ms: tuple[int, int], reap_s: float) -> float:
        """Start `n` replicas; returns the time.time() the last one was ready."""
        for i in range(n):
            plan = {
                "url": self.url,
                "journal": str(self.tmp / f"journal-{i}.log"),
                "seed": i,
                "turn_ms": list(turn_ms),
                "reap_interval_s": reap_s,
                "stop_timeout_s": 5.0,
            }
            path = self.tmp / f"plan-{i}.json"
            path.write_text(json.dumps(plan))
            self.children.append(
                ChildProcess.start(CHILD, [str(path)], self.tmp / f"replica-{i}.err", f"r{i}")
            )
        for child in self.children:
            child.wait_ready(READY_TIMEOUT)
        return time.time()

    def journal(self) -> Journal:
        return read_journals(sorted(self.tmp.glob("journal-*.log")))

    def stop(self) -> None:
        live = [c for c in self.children if c.proc.poll() is None]
        for child in live:
            os.kill(child.pid, signal.SIGTERM)
        for child in live:
            child.wait_exit(30.0)

    def close(self) -> None:
        for child in self.children:
            child.close()
        self.children = []
        for f in self.tmp.iterdir():
            f.unlink()


async def store_jobs(
    url: str, n: int, sessions: int, due: Callable[[int], datetime], *, bound: bool = True
) -> list[str]:
    """Sessions (bound) and `n` one-shot jobs, job i due at due(i), bound to session i mod S."""
    cron = facade(url)
    await cron.store.open()
    try:
        keys = [f"api:s-{i}" for i in range(sessions)] if bound else []
        for key in keys:
            await cron.sessions.create(key)
        for start in range(0, n, 1000):
            await cron.jobs.create_many(
                [
                    NewJob(
                        name=f"j{i}",
                        spec=AtSpec(at=due(i)),
                        message=f"fire {i}",
                        session_key=keys[i % sessions] if bound else None,
                    )
                    for i in range(start, min(n, start + 1000))
                ]
            )
        return keys
    finally:
        await cron.store.close()


async def wait_terminal(url: str, n: int, until: float) -> bool:
    """Wait (polling every 200 ms) until `n` runs are terminal; False at `until`."""
    cron = facade(url)
    await cron.store.open()
    try:
        while await cron.store.count_runs(states=TERMINAL_STATES) < n:
            if time.time() > until:
                return False
            await asyncio.sleep(0.2)
        return True
    finally:
        await cron.store.close()


async def all_runs(url: str) -> list[Run]:
    cron = facade(url)
    await cron.store.open()
    try:
        return await cron.runs.list(limit=None)
    finally:
        await cron.store.close()


def integrity(runs: list[Run], jr: Journal, killed: int | None = None) -> dict[str, int]:
    """Duplicates (a fire with two runs, a run or turn given to the runner twice) and overlaps
    (two runner calls of one session at once; stored turn times are reported by the tests).
    """
    fires = Counter((r.job_id, r.fire_at) for r in runs)
    per_run = Counter(c.run_id for c in jr.calls if c.run_id)
    per_turn = Counter(c.turn_id for c in jr.calls)
    by_key: dict[str, list[tuple[float, float | None, str]]] = defaultdict(list)
    kill_at = max((c.t0 for c in jr.calls if c.pid == killed), default=None)
    for c in jr.calls:
        if c.key.startswith("api:"):  # bound turns (isolated runs have their own sessions)
            end = kill_at if c.t1 is None and c.pid == killed else c.t1
            by_key[c.key].append((c.t0, end, c.turn_id))
    return {
        "duplicates": sum(n - 1 for n in fires.values() if n > 1)
        + sum(n - 1 for n in per_run.values() if n > 1)
        + sum(n - 1 for n in per_turn.values() if n > 1),
        "overlaps": sum(len(overlaps(iv)) for iv in by_key.values()),
    }


def pct(xs: list[float], p: float) -> float:
    """Nearest rank."""
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, -(-len(s) * int(p) // 100) - 1))]


# -- the measurements -----------------------------------------------------------------------


@dataclass
class Bench:
    url: str
    tmp: Path
    sizes: Sizes
    reap_s: float

    async def _fresh(self) -> Replicas:
        await asyncio.to_thread(recreate_pg, self.url)
        return Replicas(self.url, self.tmp)

    async def burst(self, n_replicas: int, *, bound: bool) -> dict[str, Any]:
        """N fires due at one instant, stored before the replicas start: fires/s from the due
        instant to the last run's end (its stored finished_at).
        """
        sz = self.sizes
        lead = 4.0 + 2.5 * n_replicas
        for _attempt in range(3):
            reps = await self._fresh()
            due = datetime.now(UTC) + timedelta(seconds=lead + (5.0 if bound else 1.0))
            await store_jobs(
                self.url, sz.burst, sz.burst_sessions, lambda i, due=due: due, bound=bound
            )
            try:
                ready = reps.start(n_replicas, turn_ms=(0, 0), reap_s=self.reap_s)
                if ready > due.timestamp() - 0.3:
                    log(f"replicas ready {ready - due.timestamp():+.1f}s after the due instant")
                    lead *= 2
                    continue
                done = await wait_terminal(self.url, sz.burst, due.timestamp() + sz.limit_s)
                jr = reps.journal()
                reps.stop()
            finally:
                reps.close()
            runs = await all_runs(self.url)
            ended = [r.finished_at for r in runs if r.finished_at is not None]
            last = max(ended).timestamp() if ended else time.time()
            late = [(r.started_at - r.fire_at).total_seconds() for r in runs if r.started_at]
            out: dict[str, Any] = {
                "fires_per_s": len(ended) / max(last - due.timestamp(), 1e-6),
                "complete": done,
                "ended": len(ended),
                "lateness_p99_s": pct(late, 99) if late else None,
                **integrity(runs, jr),
            }
            return out
        raise RuntimeError("the replicas never started before the due instant")

    async def spread(self, n_replicas: int) -> dict[str, Any]:
        """N bound fires evenly over span_s: the runner's lateness (its call - fire_at)."""
        sz = self.sizes
        lead = 4.0 + 2.5 * n_replicas
        for _attempt in range(3):
            reps = await self._fresh()
            t0 = datetime.now(UTC) + timedelta(seconds=lead + 2.0)
            step = sz.span_s / sz.spread

            def due(i: int, t0: datetime = t0, step: float = step) -> datetime:
                return t0 + timedelta(seconds=i * step)

            await store_jobs(self.url, sz.spread, sz.spread_sessions, due)
            try:
                ready = reps.start(n_replicas, turn_ms=(0, 0), reap_s=self.reap_s)
                if ready > t0.timestamp() - 0.3:
                    log(f"replicas ready {ready - t0.timestamp():+.1f}s after the first due")
                    lead *= 2
                    continue
                until = t0.timestamp() + sz.span_s + sz.limit_s
                done = await wait_terminal(self.url, sz.spread, until)
                jr = reps.journal()
                reps.stop()
            finally:
                reps.close()
            runs = await all_runs(self.url)
            late = [c.t0 - c.fire_at for c in jr.calls if c.fire_at is not None]
            return {
                "p50_ms": pct(late, 50) * 1000 if late else None,
                "p99_ms": pct(late, 99) * 1000 if late else None,
                "complete": done,
                **integrity(runs, jr),
            }
        raise RuntimeError("the replicas never started before the first due instant")

    async def takeover(self, n_replicas: int) -> dict[str, Any] | None:
        """A bound burst (runner 5-40 ms); replica 0 is killed -9 after kill_after_calls
        calls: the time until every fire it held is terminal (and until it holds nothing).
        """
        if n_replicas < 2:
            return None
        sz = self.sizes
        reps = await self._fresh()
        due = datetime.now(UTC) + timedelta(seconds=6.0 + 2.5 * n_replicas)
        await store_jobs(self.url, sz.kill, sz.kill_sessions, lambda i: due)
        try:
            ready = reps.start(n_replicas, turn_ms=(5, 40), reap_s=self.reap_s)
            if ready > due.timestamp():
                log(f"replicas ready {ready - due.timestamp():+.1f}s after the due instant")
            victim = reps.children[0]
            deadline = due.timestamp() + sz.limit_s
            while reps.journal().started(victim.pid) < sz.kill_after_calls:
                if time.time() > deadline:
                    raise RuntimeError("the victim never ran its share of the burst")
                await asyncio.sleep(0.01)
            victim.kill9()
            killed = time.time()
            tag = f":{victim.pid}:"
            held = {r.id for r in await self._active() if tag in (r.owner or "")}
            released = settled = None
            limit = killed + self.reap_s + sz.limit_s
            while time.time() < limit and settled is None:
                active = await self._active()
                if released is None and not any(tag in (r.owner or "") for r in active):
                    released = time.time() - killed
                if not held & {r.id for r in active}:
                    settled = time.time() - killed
                await asyncio.sleep(0.1)
            await wait_terminal(self.url, sz.kill, limit)
            jr = reps.journal()
            reps.stop()
        finally:
            reps.close()
        runs = await all_runs(self.url)
        return {
            "settled_s": settled,
            "released_s": released,
            "held": len(held),
            "interrupted": sum(1 for r in runs if r.state.value == "interrupted"),
            **integrity(runs, jr, killed=victim.pid),
        }

    async def _active(self) -> list[Run]:
        cron = facade(self.url)
        await cron.store.open()
        try:
            return await cron.runs.list(states=list(ACTIVE_STATES), limit=None)
        finally:
            await cron.store.close()

    async def effect(self, n_replicas: int) -> dict[str, Any]:
        """Replicas idle; another process creates a bound job due now, and moves an existing
        job (due in a year) to now: the delay until each one's runner call starts.
        """
        reps = await self._fresh()
        cron = facade(self.url)
        await cron.store.open()
        try:
            await cron.sessions.create("api:effect")
            later = await cron.jobs.create(
                name="later",
                spec=AtSpec(at=datetime.now(UTC) + timedelta(days=365)),
                message="moved",
                session_key="api:effect-2",
            )
            reps.start(n_replicas, turn_ms=(0, 0), reap_s=self.reap_s)
            await asyncio.sleep(1.0)  # let every engine go idle (asleep until its next reap)
            changed = time.time()
            # "Now": an `at` must lie after its creation, so 50 ms ahead.
            now = datetime.now(UTC) + timedelta(milliseconds=50)
            created = await cron.jobs.create(
                name="now", spec=AtSpec(at=now), message="now", session_key="api:effect"
            )
            await cron.jobs.update(later.id, spec=AtSpec(at=now))
            got: dict[str, float] = {}
            limit = changed + self.reap_s + 30.0
            while len(got) < 2 and time.time() < limit:
                for c in reps.journal().calls:
                    for name, job in (("create", created.id), ("update", later.id)):
                        if name not in got and c.job_id == job:
                            got[name] = c.t0 - changed
                await asyncio.sleep(0.05)
            reps.stop()
        finally:
            reps.close()
            await cron.store.close()
        return {"create_s": got.get("create"), "update_s": got.get("update")}


# -- the table ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    label: str
    workload: str  # burst_bound, burst_unbound, spread, takeover, effect
    key: str
    unit: str
    higher_better: bool | None  # None: must be 0 (integrity)


ROWS = [
    Row("bound burst", "burst_bound", "fires_per_s", "fires/s", True),
    Row("unbound burst", "burst_unbound", "fires_per_s", "fires/s", True),
    Row("bound burst lateness p99 (stored)", "burst_bound", "lateness_p99_s", "s", False),
    Row("lateness p50", "spread", "p50_ms", "ms", False),
    Row("lateness p99", "spread", "p99_ms", "ms", False),
    Row("takeover: kill -9 -> victim's fires terminal", "takeover", "settled_s", "s", False),
    Row("takeover: kill -9 -> victim holds nothing", "takeover", "released_s", "s", False),
    Row("change-to-effect: job created elsewhere, due now", "effect", "create_s", "s", False),
    Row("change-to-effect: job moved elsewhere to now", "effect", "update_s", "s", False),
]


def median(values: list[Any]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def show(v: float | None, unit: str) -> str:
    if v is None:
        return "n/a"
    if unit in ("fires/s", "ms"):
        return f"{v:,.0f} {unit}"
    return f"{v:.2f} {unit}"


def render(data: dict[str, Any]) -> str:
    res = data["results"]  # workload -> replicas ("1"/"3") -> list of round dicts
    sz = data["sizes"]
    lines = [
        f"## agentcron replicas on PostgreSQL: 1 vs 3 ({data['profile']}, {data['rounds']} "
        f"round(s), medians; reap_interval {data['reap_s']:g} s)",
        "",
        "| metric | 1 replica | 3 replicas | ratio 3/1 |",
        "| --- | --- | --- | --- |",
    ]
    for row in ROWS:
        one = median([r.get(row.key) for r in res.get(row.workload, {}).get("1", []) if r])
        three = median([r.get(row.key) for r in res.get(row.workload, {}).get("3", []) if r])
        ratio = f"{three / one:.2f}" if one and three is not None else "n/a"
        lines.append(f"| {row.label} | {show(one, row.unit)} | {show(three, row.unit)} | {ratio} |")
    dup = dict.fromkeys(("1", "3"), 0)
    ovl = dict.fromkeys(("1", "3"), 0)
    for per in res.values():
        for n, rounds in per.items():
            for r in rounds:
                if r:
                    dup[n] += r.get("duplicates", 0)
                    ovl[n] += r.get("overlaps", 0)
    lines.append(f"| duplicates, all rows and rounds (must be 0) | {dup['1']} | {dup['3']} | |")
    lines.append(
        f"| runner calls of one session overlapping (must be 0) | {ovl['1']} | {ovl['3']} | |"
    )
    incomplete = [
        f"{w} x{n} round {i + 1}"
        for w, per in res.items()
        for n, rounds in per.items()
        for i, r in enumerate(rounds)
        if r and r.get("complete") is False
    ]
    lines += [
        "",
        f"Sizes: bursts {sz['burst']:,} fires due at once (bound: over {sz['burst_sessions']:,} "
        f"sessions); lateness {sz['spread']:,} bound fires over {sz['span_s']:g} s "
        f"({sz['spread_sessions']} sessions); takeover {sz['kill']:,} bound fires over "
        f"{sz['kill_sessions']} sessions, runner 5-40 ms, replica 0 killed after "
        f"{sz['kill_after_calls']} calls. Runner returns at once elsewhere.",
        f"agentcron from {data['agentcron']} ({data['commit']}); {data['when']}.",
    ]
    if incomplete:
        lines.append(f"Not complete within the limit: {', '.join(incomplete)}.")
    return "\n".join(lines)


def git_commit(path: Path) -> str:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


WORKLOADS = ("burst_bound", "burst_unbound", "spread", "takeover", "effect")


async def run(args: argparse.Namespace, tmp: Path, src: Path) -> dict[str, Any]:
    sizes = QUICK if args.quick else FULL
    only = args.only.split(",") if args.only else list(WORKLOADS)
    bench = Bench(args.pg_url, tmp, sizes, args.reap)
    data: dict[str, Any] = {
        "profile": "quick" if args.quick else "full",
        "rounds": args.rounds,
        "reap_s": args.reap,
        "sizes": sizes.__dict__,
        "agentcron": str(src),
        "commit": git_commit(src),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "results": {w: {"1": [], "3": []} for w in only},
    }
    jobs: dict[str, Callable[[int], Any]] = {
        "burst_bound": lambda n: bench.burst(n, bound=True),
        "burst_unbound": lambda n: bench.burst(n, bound=False),
        "spread": bench.spread,
        "takeover": bench.takeover,
        "effect": bench.effect,
    }
    for i in range(args.rounds):
        for w in only:
            # Alternate the order within a round: 1 first, then 3 first.
            for n in (1, 3) if i % 2 == 0 else (3, 1):
                if w == "takeover" and n == 1:
                    continue  # no survivor to take over
                log(f"round {i + 1}/{args.rounds}: {w}, {n} replica(s)")
                try:
                    result = await jobs[w](n)
                except Exception as exc:
                    log(f"{w} x{n} failed: {type(exc).__name__}: {exc}")
                    result = {"error": f"{type(exc).__name__}: {exc}"}
                log(f"  {result}")
                data["results"][w][str(n)].append(result)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench replicas", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help=f"comma list of {', '.join(WORKLOADS)}")
    parser.add_argument(
        "--reap",
        type=float,
        default=DEFAULT_REAP_S,
        help="the replicas' reap_interval in seconds (default: the engine's)",
    )
    parser.add_argument(
        "--pg-url",
        default=os.environ.get(PG_ENV, DEFAULT_PG_URL),
        help="the database, dropped and re-created for each measurement (name must contain "
        f"'bench'; default {DEFAULT_PG_URL})",
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "replicas-latest.json")
    args = parser.parse_args(argv)
    import agentcron

    tmp = Path(tempfile.mkdtemp(prefix="agentcron-replicas-"))
    try:
        data = asyncio.run(run(args, tmp, Path(agentcron.__file__).resolve().parent))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(data, indent=2) + "\n")
    print(render(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
