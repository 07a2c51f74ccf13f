"""Soak: `agentcron serve` as a real subprocess under recurring bound fires, chat posts over REST
and WebSocket subscribers that come and go; then consistency checks through the API.

Run on demand (not part of the test suite):

    .venv/bin/python bench/soak.py              # 10 minutes, 1,000 jobs over 200 sessions
    .venv/bin/python bench/soak.py --quick      # 1 minute, 100 jobs over 20 sessions
    .venv/bin/python bench/soak.py --grow 130   # each session starts with 130 turns behind it

The report is printed as markdown and written to `bench/results/soak-<timestamp>.json` and
`bench/results/soak-latest.md`. Progress goes to stderr. Exit status 0 when every check holds,
1 when a check found an inconsistency (the report says which), 2 when the soak could not run.
See bench/README.md, "Soak", for what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

PAGE = 200  # the API's largest page of a list (runs, messages): longer lists are read on

RESULTS = Path(__file__).resolve().parent / "results"
TERMINAL = {"succeeded", "failed", "empty", "missed", "skipped", "interrupted", "cancelled"}
TURN_TERMINAL = {"succeeded", "failed", "empty", "interrupted", "cancelled"}
T0 = time.monotonic()


def log(text: str) -> None:
    print(f"[soak {time.monotonic() - T0:7.1f}s] {text}", file=sys.stderr, flush=True)


def parse_ts(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def pct(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def bucket_quantiles(m: dict[str, float]) -> dict[str, Any]:
    """p50 / p99 of the /metrics lateness histogram, as the upper bound of their bucket."""
    buckets = sorted(
        (float(k.split('le="')[1].rstrip('"}')), v)
        for k, v in m.items()
        if k.startswith("agentcron_fire_lateness_seconds_bucket")
    )
    total = m.get("agentcron_fire_lateness_seconds_count", 0)
    out: dict[str, Any] = {"n": int(total), "buckets": dict(buckets)}
    for q in (50, 99):
        out[f"p{q}_le_s"] = next((le for le, n in buckets if total and n >= total * q / 100), None)
    return out


def lateness_buckets(m: dict[str, float]) -> dict[float, float]:
    """The /metrics lateness histogram: bucket upper bound (s) -> cumulative count."""
    return {
        float(k.split('le="')[1].rstrip('"}')): v
        for k, v in m.items()
        if k.startswith("agentcron_fire_lateness_seconds_bucket")
    }


def engine_lateness_windows(
    snaps: list[tuple[float, dict[float, float]]], start: float, end: float, width: float
) -> list[dict[str, Any]]:
    """The engine's lateness in windows of `width` seconds of the firing [start, end]: the
    fires counted between the histogram read nearest each window's edges, with p50 / p99 as
    the upper bound of their bucket.
    """

    def at(t: float) -> dict[float, float]:
        return min(snaps, key=lambda s: abs(s[0] - t))[1] if snaps else {}

    out = []
    t = start
    while t + width / 2 < end:
        lo, hi = at(t), at(min(t + width, end))
        delta = sorted((le, hi[le] - lo.get(le, 0.0)) for le in hi)
        total = delta[-1][1] if delta else 0
        row: dict[str, Any] = {"from_min": round((t - start) / 60), "n": int(total)}
        for q in (50, 99):
            reached = (le for le, n in delta if total and n >= total * q / 100)
            row[f"p{q}_le_s"] = next(reached, None)
        out.append(row)
        t += width
    return out


def slope_per_minute(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, per minute."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    sxx = sum((t - mx) ** 2 for t, _ in points)
    if sxx == 0:
        return None
    sxy = sum((t - mx) * (v - my) for t, v in points)
    return sxy / sxx * 60


@dataclass
class Plan:
    minutes: float
    jobs: int
    sessions: int
    min_interval: int
    max_interval: int
    post_rate: float  # user messages per second, all sessions together
    ws_clients: int  # WebSocket clients connected at any time (each reconnects after a while)
    ws_life: tuple[float, float]  # seconds a WebSocket connection lives
    ws_subscribe: int  # sessions each connection subscribes to
    rss_every: float  # seconds between RSS samples
    warmup: float  # seconds of firing left out of the RSS slope
    quiesce_limit: float  # seconds to wait for the server to become idle after the pause
    tracemalloc: int = 0  # frames per traceback; 0 = off
    grow: int = 0  # finished turns stored in each session before the firing starts


@dataclass
class Stats:
    http: Counter[str] = field(default_factory=Counter)  # "METHOD route status" -> count
    http_errors: list[str] = field(default_factory=list)  # first few non-2xx / exceptions
    ws: Counter[str] = field(default_factory=Counter)  # frame types and connection outcomes
    ws_errors: list[str] = field(default_factory=list)
    ws_stream_end: dict[str, str] = field(default_factory=dict)  # turn id -> status seen
    ws_conflicts: list[str] = field(default_factory=list)
    ws_start_seen: dict[str, datetime] = field(default_factory=dict)  # turn id -> first seen
    posted: dict[str, str] = field(default_factory=dict)  # turn id -> session key
    rss: list[dict[str, float]] = field(default_factory=list)
    # The engine's lateness histogram (`/metrics`) as read at each progress line: (wall time,
    # {bucket bound: cumulative count}); windows of the firing are told apart by difference.
    lateness_snaps: list[tuple[float, dict[float, float]]] = field(default_factory=list)

    def http_bad(self) -> int:
        return sum(n for k, n in self.http.items() if not k.split()[-1].startswith("2"))


class Api:
    """httpx with a tally of every answer (non-2xx and transport errors are the soak's errors)."""

    def __init__(self, base: str, token: str, stats: Stats, connections: int) -> None:
        self.stats = stats
        self.client = httpx.AsyncClient(
            base_url=base,
            headers={"Authorization": f"Bearer {token}"},
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            timeout=60,
            trust_env=False,  # loopback only
        )

    async def call(self, method: str, path: str, route: str, **kw: Any) -> httpx.Response | None:
        try:
            answer = await self.client.request(method, path, **kw)
        except httpx.HTTPError as exc:
            self.stats.http[f"{method} {route} {type(exc).__name__}"] += 1
            if len(self.stats.http_errors) < 20:
                self.stats.http_errors.append(f"{method} {path}: {type(exc).__name__}: {exc}")
            return None
        self.stats.http[f"{method} {route} {answer.status_code}"] += 1
        if not answer.is_success:
            if len(self.stats.http_errors) < 20:
                self.stats.http_errors.append(
                    f"{method} {path}: {answer.status_code} {answer.text[:200]}"
                )
            return None
        return answer

    async def json(self, method: str, path: str, route: str, **kw: Any) -> Any:
        answer = await self.call(method, path, route, **kw)
        return None if answer is None else answer.json()

    async def close(self) -> None:
        await self.client.aclose()


# `--tracemalloc`: the server starts tracing allocations at the first SIGUSR1 (the end of the
# warm-up; tracing from the start makes start-up take minutes) and writes a snapshot at each
# (the second once the server is quiescent after the pause): what the second holds was
# allocated after the warm-up and is still alive with no turn in flight.
TRACEMALLOC_PRELUDE = """
import os, signal, tracemalloc
_n = [0]
def _dump(signum, frame):
    if not tracemalloc.is_tracing():
        tracemalloc.start({frames})
    _n[0] += 1
    tracemalloc.take_snapshot().dump(os.path.join({out!r}, f"snap-{{_n[0]}}.bin"))
signal.signal(signal.SIGUSR1, _dump)
"""


def tracemalloc_growth(tmp: Path, top: int = 15) -> dict[str, Any]:
    """What Python allocated after the warm-up and still holds, by the line that allocated it."""
    import tracemalloc

    first = tracemalloc.Snapshot.load(str(tmp / "snap-1.bin"))
    second = tracemalloc.Snapshot.load(str(tmp / "snap-2.bin"))
    stats = second.compare_to(first, "traceback")
    return {
        "traced_mb_at_warmup": round(sum(s.size for s in first.statistics("filename")) / 2**20, 2),
        "traced_mb_at_end": round(sum(s.size for s in second.statistics("filename")) / 2**20, 2),
        "note": "tracing starts at the warm-up's end; at_end = allocated since, alive when idle",
        "top_growth": [
            {
                "kb": round(st.size_diff / 1024, 1),
                "count": st.count_diff,
                "where": [
                    f"{f.filename.split('site-packages/')[-1]}:{f.lineno}" for f in st.traceback
                ],
            }
            for st in stats[:top]
        ],
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def read_proc(pid: int) -> tuple[float, float] | None:
    """(VmRSS in MB, user+system CPU seconds) of `pid`."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    if match is None:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    return int(match.group(1)) / 1024, cpu


async def gather_limited(n: int, coros: list[Any]) -> list[Any]:
    gate = asyncio.Semaphore(n)

    async def one(c: Any) -> Any:
        async with gate:
            return await c

    return await asyncio.gather(*(one(c) for c in coros))


# --- load -----------------------------------------------------------------------------------


async def sample_rss(pid: int, plan: Plan, stats: Stats, t_fire: float, stop: asyncio.Event):
    while not stop.is_set():
        got = read_proc(pid)
        if got is not None:
            rss, cpu = got
            stats.rss.append(
                {"t": round(time.monotonic() - t_fire, 1), "rss_mb": round(rss, 1), "cpu_s": cpu}
            )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), plan.rss_every)


async def post_messages(
    api: Api, keys: list[str], plan: Plan, stats: Stats, stop: asyncio.Event, rng: random.Random
) -> None:
    """Poisson arrivals of user messages at `plan.post_rate` per second over random sessions."""
    n = 0
    pending: set[asyncio.Task[None]] = set()

    async def one(key: str, i: int) -> None:
        body = {"content": f"soak ping {i}: how are things going?"}
        got = await api.json("POST", f"/api/sessions/{key}/messages", "/messages", json=body)
        if got is not None:
            stats.posted[got["turn_id"]] = key

    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.expovariate(plan.post_rate))
        if stop.is_set():
            break
        n += 1
        task = asyncio.create_task(one(rng.choice(keys), n))
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.gather(*pending)


async def ws_client(
    url: str,
    token: str,
    keys: list[str],
    plan: Plan,
    stats: Stats,
    stop: asyncio.Event,
    rng: random.Random,
) -> None:
    """Connect, authenticate (header or first frame), subscribe, read, disconnect; repeat."""
    while not stop.is_set():
        by_header = rng.random() < 0.5
        headers = {"Authorization": f"Bearer {token}"} if by_header else None
        subscribed = rng.sample(keys, min(plan.ws_subscribe, len(keys)))
        started: set[str] = set()
        life = rng.uniform(*plan.ws_life)
        try:
            async with connect(
                url, additional_headers=headers, proxy=None, open_timeout=15, max_size=None
            ) as ws:
                stats.ws["connect"] += 1
                if not by_header:
                    await ws.send(json.dumps({"type": "auth", "token": token}))
                first = json.loads(await asyncio.wait_for(ws.recv(), 15))
                if first.get("type") != "ready":
                    stats.ws["auth_not_ready"] += 1
                    stats.ws_errors.append(f"first frame after auth: {first}")
                    continue
                for key in subscribed:
                    await ws.send(json.dumps({"type": "subscribe", "session_key": key}))
                await ws.send(json.dumps({"type": "ping"}))
                end = time.monotonic() + life
                while not stop.is_set() and (left := end - time.monotonic()) > 0:
                    try:
                        raw = await asyncio.wait_for(ws.recv(), min(left, 1.0))
                    except TimeoutError:
                        continue
                    frame = json.loads(raw)
                    kind = frame.get("type", "?")
                    stats.ws[f"frame {kind}"] += 1
                    if kind == "error":
                        stats.ws["error_frames"] += 1
                        if len(stats.ws_errors) < 20:
                            stats.ws_errors.append(f"error frame: {frame}")
                    elif kind == "subscribed" and frame.get("running_turn"):
                        started.add(frame["running_turn"])
                    elif kind == "stream_start":
                        started.add(frame["turn_id"])
                        stats.ws_start_seen.setdefault(frame["turn_id"], datetime.now(UTC))
                    elif kind == "stream_end":
                        turn, status = frame["turn_id"], frame["status"]
                        seen = stats.ws_stream_end.setdefault(turn, status)
                        if seen != status and len(stats.ws_conflicts) < 20:
                            stats.ws_conflicts.append(
                                f"turn {turn}: stream_end {seen} and {status}"
                            )
                        if frame["session_key"] not in subscribed:
                            stats.ws["stream_end_unsubscribed_session"] += 1
                        if turn not in started:
                            stats.ws["stream_end_without_start"] += 1
                await ws.send(json.dumps({"type": "unsubscribe", "session_key": subscribed[0]}))
            stats.ws["clean_close"] += 1
        except ConnectionClosed as exc:
            stats.ws[f"closed_by_server {exc.rcvd.code if exc.rcvd else None}"] += 1
            stats.ws["errors"] += 1
            if len(stats.ws_errors) < 20:
                stats.ws_errors.append(f"connection closed: {exc}")
        except (OSError, TimeoutError, ValueError) as exc:
            stats.ws[f"exception {type(exc).__name__}"] += 1
            stats.ws["errors"] += 1
            if len(stats.ws_errors) < 20:
                stats.ws_errors.append(f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.uniform(0.1, 1.0))


async def metrics(api: Api) -> dict[str, float]:
    answer = await api.call("GET", "/metrics", "/metrics")
    out: dict[str, float] = {}
    if answer is None:
        return out
    for line in answer.text.splitlines():
        if line.startswith("agentcron_") and " " in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


async def progress(api: Api, stats: Stats, stop: asyncio.Event, every: float) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every)
        m = await metrics(api)
        stats.lateness_snaps.append((time.time(), lateness_buckets(m)))
        rss = stats.rss[-1]["rss_mb"] if stats.rss else None
        log(
            f"fires {m.get('agentcron_fires_total', 0):,.0f}, active turns "
            f"{m.get('agentcron_active_turns', 0):.0f}, posted {len(stats.posted):,}, "
            f"ws connects {stats.ws['connect']:,}, http non-2xx {stats.http_bad()}, RSS {rss} MB"
        )


# --- checks ---------------------------------------------------------------------------------


async def runs_of(api: Api, job_id: str) -> list[dict[str, Any]] | None:
    """Every run of a job, following `next_cursor` a page (the API's largest) at a time; None
    when a page cannot be read.
    """
    found: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": PAGE}
    while True:
        page = await api.json("GET", f"/api/jobs/{job_id}/runs", "/runs", params=params)
        if page is None:
            return None
        found.extend(page["runs"])
        if not page.get("next_cursor"):
            return found
        params = {"limit": PAGE, "cursor": page["next_cursor"]}


async def fetch_all(api: Api, key: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A session's whole transcript (paged with `after`) and its turns."""
    entries: list[dict[str, Any]] = []
    after: int | None = None
    while True:
        params: dict[str, Any] = {"limit": PAGE}
        if after is not None:
            params["after"] = after
        page = await api.json("GET", f"/api/sessions/{key}/messages", "/messages", params=params)
        if page is None:
            raise RuntimeError(f"cannot read the transcript of {key}")
        entries.extend(page["messages"])
        if not page["messages"] or page.get("next_after") in (None, after):
            break
        after = page["next_after"]
    turns = await api.json("GET", f"/api/sessions/{key}/turns", "/turns", params={"limit": 10_000})
    if turns is None:
        raise RuntimeError(f"cannot read the turns of {key}")
    return entries, turns["turns"]


def check_everything(
    jobs: list[dict[str, Any]],
    paused: dict[str, datetime],
    runs_by_job: dict[str, list[dict[str, Any]]],
    transcripts: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]],
    stats: Stats,
    grown: AbstractSet[str] = frozenset(),
) -> dict[str, Any]:
    """Each check: how many items it looked at, how many broke it, and a few examples
    (the runs of pre-grown turns, `grown`, and their entries are left out).
    """
    checks: dict[str, dict[str, Any]] = {}

    def record(name: str, looked: int, bad: list[str]) -> None:
        checks[name] = {"checked": looked, "violations": len(bad), "examples": bad[:8]}

    all_runs = [r for rs in runs_by_job.values() for r in rs]
    runs_by_id = {r["id"]: r for r in all_runs}

    # 1. one run record per fire: unique ids and (job, fire_at), and the fire grid is whole
    bad: list[str] = []
    if len(runs_by_id) != len(all_runs):
        bad.append(f"{len(all_runs) - len(runs_by_id)} duplicate run ids")
    seen: Counter[tuple[str, str]] = Counter((r["job_id"], r["fire_at"]) for r in all_runs)
    bad += [f"job {j} fire {f}: {n} run records" for (j, f), n in seen.items() if n > 1]
    record("one run record per (job, fire_at)", len(all_runs), bad)

    missing: list[str] = []
    extra: list[str] = []
    looked = 0
    margin = timedelta(seconds=5)
    for job in jobs:
        spec = job["spec"]
        anchor, step = parse_ts(spec["anchor"]), timedelta(seconds=spec["seconds"])
        assert anchor is not None
        stop_at = paused[job["id"]]
        have = {parse_ts(r["fire_at"]) for r in runs_by_job.get(job["id"], [])}
        k = 1
        while (at := anchor + k * step) < stop_at - margin:
            looked += 1
            if at not in have:
                missing.append(f"job {job['name']}: no run record for fire {at.isoformat()}")
            k += 1
        for at in have:
            assert at is not None
            off = (at - anchor) / step
            if abs(off - round(off)) > 1e-6 or round(off) < 1:
                extra.append(f"job {job['name']}: run at {at.isoformat()} is off its schedule")
            elif at > stop_at + margin:
                extra.append(f"job {job['name']}: fire {at.isoformat()} after its pause")
    record("every scheduled fire before the pause has a run record", looked, missing)
    record("no run record off the schedule or after the pause", len(all_runs), extra)

    # 2. no run left non-terminal
    open_runs = [
        f"run {r['id']} ({r['session_key']}, fire {r['fire_at']}): {r['state']}"
        for r in all_runs
        if r["state"] not in TERMINAL
    ]
    record("no run left non-terminal", len(all_runs), open_runs)

    # 3. a started fire: one trigger entry, one closure, one turn (terminal), in order
    triggers: dict[str, list[dict[str, Any]]] = defaultdict(list)
    closures: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_turn_user: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_turn_reply: dict[str, list[dict[str, Any]]] = defaultdict(list)
    turns_by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    turns_by_id: dict[str, dict[str, Any]] = {}
    for entries, turns in transcripts.values():
        for e in entries:
            meta = e.get("meta") or {}
            run_id = meta.get("automation_run_id")
            if run_id in grown:
                continue
            if run_id is not None:
                (triggers if e["role"] == "user" else closures)[run_id].append(e)
            elif meta.get("turn_id") is not None and meta.get("source") == "user":
                (by_turn_user if e["role"] == "user" else by_turn_reply)[meta["turn_id"]].append(e)
        for t in turns:
            turns_by_id[t["id"]] = t
            if t["run_id"] is not None:
                turns_by_run[t["run_id"]].append(t)

    bad_trigger: list[str] = []
    bad_closure: list[str] = []
    bad_turn: list[str] = []
    started = [r for r in all_runs if r["started_at"] is not None]
    for r in all_runs:
        t, c, tu = triggers.get(r["id"], []), closures.get(r["id"], []), turns_by_run.get(r["id"])
        what = f"run {r['id']} ({r['session_key']}, {r['state']}, fire {r['fire_at']})"
        if r["started_at"] is None:
            if t or c:
                bad_trigger.append(
                    f"{what}: never started but has {len(t)} trigger, {len(c)} closure"
                )
            continue
        if len(t) != 1:
            bad_trigger.append(f"{what}: {len(t)} trigger entries")
        if len(c) != 1:
            bad_closure.append(f"{what}: {len(c)} closures")
        elif c[0]["id"] != r["message_id"]:
            bad_closure.append(
                f"{what}: closure {c[0]['id']} is not its message_id {r['message_id']}"
            )
        elif len(t) == 1 and t[0]["seq"] > c[0]["seq"]:
            bad_closure.append(
                f"{what}: closure (seq {c[0]['seq']}) before trigger (seq {t[0]['seq']})"
            )
        if not tu or len(tu) != 1:
            bad_turn.append(f"{what}: {len(tu or [])} turns")
        elif tu[0]["state"] not in TURN_TERMINAL:
            bad_turn.append(f"{what}: its turn is {tu[0]['state']}")
    orphans = [rid for rid in set(triggers) | set(closures) if rid not in runs_by_id]
    bad_trigger += [f"transcript entries name run {rid}, which has no record" for rid in orphans]
    record(
        "a started fire has exactly one trigger entry (none if never started)",
        len(all_runs),
        bad_trigger,
    )
    record(
        "a started fire has exactly one closure, its run's message_id, after the trigger",
        len(started),
        bad_closure,
    )
    record("a started fire has exactly one turn, terminal", len(started), bad_turn)

    # 4. every accepted user message: its turn ended, one user entry and one reply
    bad_posted: list[str] = []
    for turn_id, key in stats.posted.items():
        turn = turns_by_id.get(turn_id)
        if turn is None:
            bad_posted.append(f"posted turn {turn_id} ({key}): no turn record")
            continue
        if turn["state"] not in TURN_TERMINAL:
            bad_posted.append(f"posted turn {turn_id} ({key}): {turn['state']}")
        users, replies = by_turn_user.get(turn_id, []), by_turn_reply.get(turn_id, [])
        if len(users) != 1 or len(replies) != 1:
            bad_posted.append(
                f"posted turn {turn_id} ({key}): {len(users)} user entries, {len(replies)} replies"
            )
    record(
        "every accepted message: turn terminal, one user entry, one reply",
        len(stats.posted),
        bad_posted,
    )

    # 5. no turn of any kind left open
    open_turns = [
        f"turn {t['id']} ({t['session_key']}, {t['source']}): {t['state']}"
        for t in turns_by_id.values()
        if t["state"] not in TURN_TERMINAL
    ]
    record("no turn left non-terminal", len(turns_by_id), open_turns)

    # 6. what the WebSocket said a turn ended with is what the record says
    bad_ws = list(stats.ws_conflicts)
    for turn_id, status in stats.ws_stream_end.items():
        turn = turns_by_id.get(turn_id)
        if turn is None:
            bad_ws.append(f"stream_end for turn {turn_id}: no such turn")
        elif turn["state"] != status:
            bad_ws.append(f"turn {turn_id}: stream_end {status}, record {turn['state']}")
    record(
        "WebSocket stream_end status = the turn's recorded state", len(stats.ws_stream_end), bad_ws
    )
    return checks


def check_database(db: Path, api_runs: int, api_turns: int) -> dict[str, Any]:
    """After the server stopped: the database read-only, as a cross-check of the API's answers."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        runs = dict(con.execute("SELECT state, count(*) FROM runs GROUP BY state").fetchall())
        turns = dict(con.execute("SELECT state, count(*) FROM turns GROUP BY state").fetchall())
        bound = con.execute("SELECT count(*) FROM runs WHERE session_key IS NOT NULL").fetchone()[0]
        dup = con.execute(
            "SELECT count(*) FROM (SELECT 1 FROM runs GROUP BY job_id, fire_at HAVING count(*) > 1)"
        ).fetchone()[0]
    finally:
        con.close()
    open_runs = {s: n for s, n in runs.items() if s not in TERMINAL}
    open_turns = {s: n for s, n in turns.items() if s not in TURN_TERMINAL}
    return {
        "runs_by_state": runs,
        "turns_by_state": turns,
        "bound_runs": bound,
        "api_runs": api_runs,
        "api_turns": api_turns,
        "duplicate_fires": dup,
        "non_terminal_runs": open_runs,
        "non_terminal_turns": open_turns,
        "ok": dup == 0
        and not open_runs
        and not open_turns
        and bound == api_runs
        and sum(turns.values()) == api_turns,
    }


# --- pre-grown sessions ---------------------------------------------------------------------

GROW_STEP_S = 20.0  # seconds between two pre-grown turns of one session
GROW_USER_EVERY = 10  # every 10th pre-grown turn is a user message's, the rest fires'
_OFFLINE_ECHO = (
    '(offline model) You said: "{text}". I am the built-in offline model: try "remind me in '
    '10 minutes to stretch", "every weekday at 9 check the build" or "list my automations".'
)


def _ulid_at(at: datetime, rng: random.Random) -> str:
    """A ULID (Crockford base32, 26 characters) for the instant `at`: ids sort like the
    server's own, older ones first.
    """
    value = (int(at.timestamp() * 1000) << 80) | rng.getrandbits(80)
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    return "".join(alphabet[(value >> (5 * i)) & 31] for i in range(25, -1, -1))


def _db_time(at: datetime) -> str:
    """A time as the store keeps it on SQLite: naive UTC text with microseconds."""
    return at.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def _summary_text(folded: int) -> str:
    return (
        f"(offline model) Summary of {folded} earlier entries. The user said: "
        + "; ".join(f'"soak ping g{i}: how are things going?"' for i in range(5))
        + ". Before that: (offline model) Summary of 99 earlier entries."
    )


@dataclass
class _Grown:
    """One session's pre-grown rows, as the server would have written them."""

    key: str
    messages: list[tuple[Any, ...]] = field(default_factory=list)
    turns: list[tuple[Any, ...]] = field(default_factory=list)
    runs: list[tuple[Any, ...]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)  # entry ids by seq - 1
    last: datetime | None = None

    def entry(self, role: str, text: str, meta: dict[str, Any], at: datetime, id_: str) -> str:
        self.ids.append(id_)
        self.messages.append(
            (id_, self.key, len(self.ids), role, text, json.dumps(meta), _db_time(at))
        )
        return id_


def _grow_one(
    key: str, own: list[dict[str, Any]], turns: int, now: datetime, rng: random.Random
) -> _Grown:
    window = 200  # EngineSettings.history_window
    out = _Grown(key)
    covered = 0  # the seq the newest summary covers (0: none yet)
    for k in range(turns):
        at = now - timedelta(seconds=GROW_STEP_S * (turns - k))
        done = out.last = at + timedelta(milliseconds=300)
        turn_id = _ulid_at(at, rng)
        before = len(out.ids)  # entries before this turn's trigger
        run_id: str | None = None
        if k % GROW_USER_EVERY == GROW_USER_EVERY - 1:
            source, task = "user", f"soak ping g{k}: how are things going?"
            meta: dict[str, Any] = {"source": "user", "turn_id": turn_id}
            out.entry("user", task, meta, at, _ulid_at(at, rng))
            closure = _OFFLINE_ECHO.format(text=task)
        else:
            job = own[k % len(own)]
            run_id = _ulid_at(at, rng)
            source, task = "automation", job["message"]
            meta = {"source": "automation", "automation_run_id": run_id, "turn_id": turn_id}
            trigger = {
                "_automation_turn": True,
                "automation_id": job["id"],
                "automation_name": job["name"],
                **meta,
            }
            text = f"Scheduled automation triggered: {job['name']}\n\n{task}"
            out.entry("user", text, trigger, at, _ulid_at(at, rng))
            closure = f"(offline model) Reminder: {task}."
        if before >= window and covered <= before - window:
            # this turn's window no longer reaches the last summary's end: it compacts
            covered = before - window // 2
            meta_s = {"through_id": out.ids[covered - 1], "entries": covered, "turn_id": turn_id}
            out.entry("summary", _summary_text(covered), meta_s, done, _ulid_at(done, rng))
        reply = out.entry(
            "assistant", closure, {**meta, "status": "succeeded"}, done, _ulid_at(done, rng)
        )
        out.turns.append((turn_id, key, source, task, run_id, at, done, reply))
        if run_id is not None:
            out.runs.append(
                (run_id, job["id"], key, _db_time(at), "succeeded", _db_time(at), _db_time(at),
                 _db_time(done), closure, reply)
            )  # fmt: skip
    return out


def grow_sessions(
    db: Path, jobs: list[dict[str, Any]], turns: int, now: datetime, rng: random.Random
) -> set[str]:
    """Store `turns` finished turns in each session of `jobs` (the sessions exist, empty), as
    the server writes them: a fire's turn is its trigger entry, its closure, its turn record and
    its run record (of one of the session's jobs, round robin, at a time before the job's
    anchor, so off the soak's grid); every `GROW_USER_EVERY`th is a user message and its reply
    with its turn. The compactions are there too: a turn whose history window (200 entries)
    no longer reaches what the last summary covers writes a `summary` entry before its reply
    that folds all but the newest 100 (so the soak's first turns do not all compact at once).
    Written straight into the database (the server runs, its schema is made) in one
    transaction per session, before any job fires. Returns the ids of the runs it wrote (the
    checks leave them out).
    """
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for job in jobs:
        by_session[job["session_key"]].append(job)
    grown: set[str] = set()
    con = sqlite3.connect(db, timeout=60, isolation_level=None)
    try:
        con.execute("PRAGMA busy_timeout = 60000")
        for key, own in by_session.items():
            rows = _grow_one(key, own, turns, now, rng)
            grown.update(r[0] for r in rows.runs)
            con.execute("BEGIN IMMEDIATE")
            con.executemany(
                "INSERT INTO messages (id, session_key, seq, role, content, meta, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows.messages,
            )
            con.executemany(
                "INSERT INTO turns (id, session_key, source, state, content, run_id, created_at, "
                "started_at, finished_at, reply_message_id) "
                "VALUES (?, ?, ?, 'succeeded', ?, ?, ?, ?, ?, ?)",
                [
                    (t, k, src, c, r, _db_time(a), _db_time(a), _db_time(d), m)
                    for t, k, src, c, r, a, d, m in rows.turns
                ],
            )
            con.executemany(
                "INSERT INTO runs (id, job_id, session_key, fire_at, state, claimed_at, "
                "started_at, finished_at, output, message_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows.runs,
            )
            con.execute(
                "UPDATE sessions SET last_seq = ?, updated_at = ? WHERE session_key = ?",
                (len(rows.ids), _db_time(rows.last or now), key),
            )
            con.execute("COMMIT")
    finally:
        con.close()
    return grown


# --- the soak -------------------------------------------------------------------------------


async def wait_ready(api: Api, proc: asyncio.subprocess.Process, limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if (await api.client.get("/readyz")).status_code == 200:
                return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"the server was not ready within {limit:.0f} s")


async def stop_server(proc: asyncio.subprocess.Process, grace: float = 60) -> int | None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(proc.wait(), grace)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    return proc.returncode


async def soak(plan: Plan, seed: int, keep: bool) -> dict[str, Any]:
    rng = random.Random(seed)
    stats = Stats()
    tmp = Path(tempfile.mkdtemp(prefix="agentcron-soak-"))
    port, token = free_port(), secrets.token_urlsafe(24)
    db = tmp / "soak.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTCRON_")}
    env.update(AGENTCRON_HOME=str(tmp / "home"), AGENTCRON_TOKEN=token, AGENTCRON_MAX_JOBS="none")
    env.update(AGENTCRON_MIN_INTERVAL="1")  # its jobs recur every few seconds
    cmd = [
        sys.executable,
        "-c",
        (
            TRACEMALLOC_PRELUDE.format(frames=plan.tracemalloc, out=str(tmp))
            if plan.tracemalloc
            else ""
        )
        + "from agentcron.cli import main; main()",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--db",
        str(db),
        "--log-level",
        "warning",
    ]
    server_log = tmp / "server.log"
    with server_log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *cmd, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    log(f"server pid {proc.pid}, data in {tmp}")
    base = f"http://127.0.0.1:{port}"
    api = Api(base, token, stats, connections=16)
    report: dict[str, Any] = {"plan": plan.__dict__, "seed": seed, "tmp": str(tmp)}
    try:
        await wait_ready(api, proc, 90)
        rss0 = read_proc(proc.pid)
        report["rss_at_ready_mb"] = None if rss0 is None else round(rss0[0], 1)

        # sessions and jobs: `every N seconds`, N spread over [min, max] so fires interleave
        keys = [f"api:soak-{i}" for i in range(plan.sessions)]
        await gather_limited(
            8, [api.call("POST", "/api/sessions", "/api/sessions", json={"key": k}) for k in keys]
        )
        span = plan.max_interval - plan.min_interval + 1

        def job_body(i: int) -> dict[str, Any]:
            every = plan.min_interval + (i * 7919) % span
            return {
                "session_key": keys[i % plan.sessions],
                "name": f"soak-{i}",
                "message": f"check item {i}",
                "when": f"every {every} seconds",
            }

        t_create = time.monotonic()
        created = await gather_limited(
            8,
            [
                api.json("POST", "/api/jobs", "/api/jobs", json=job_body(i))
                for i in range(plan.jobs)
            ],
        )
        jobs = [j for j in created if j is not None]
        log(f"{len(keys)} sessions, {len(jobs)} jobs in {time.monotonic() - t_create:.1f} s")
        if len(jobs) != plan.jobs:
            raise RuntimeError(f"only {len(jobs)} of {plan.jobs} jobs were created")
        grown: set[str] = set()
        if plan.grow:
            t_grow = time.monotonic()
            grown = await asyncio.to_thread(
                grow_sessions, db, jobs, plan.grow, datetime.now(UTC), random.Random(seed)
            )
            log(
                f"grew {len(keys)} sessions by {plan.grow} turns each ({len(grown):,} runs) in "
                f"{time.monotonic() - t_grow:.1f} s"
            )

        # fire for `minutes` while clients post and WebSocket clients come and go
        stop_load, stop_rss = asyncio.Event(), asyncio.Event()
        t_fire = time.monotonic()
        fire_start = datetime.now(UTC)
        stats.lateness_snaps.append((time.time(), lateness_buckets(await metrics(api))))
        ws_url = f"ws://127.0.0.1:{port}/api/ws"
        tasks = [
            asyncio.create_task(post_messages(api, keys, plan, stats, stop_load, rng)),
            asyncio.create_task(progress(api, stats, stop_load, 30 if plan.minutes > 2 else 10)),
            *(
                asyncio.create_task(
                    ws_client(ws_url, token, keys, plan, stats, stop_load, random.Random(seed + i))
                )
                for i in range(plan.ws_clients)
            ),
        ]
        rss_task = asyncio.create_task(sample_rss(proc.pid, plan, stats, t_fire, stop_rss))
        if plan.tracemalloc:
            await asyncio.sleep(plan.warmup)
            proc.send_signal(signal.SIGUSR1)
            await asyncio.sleep(plan.minutes * 60 - plan.warmup)
        else:
            await asyncio.sleep(plan.minutes * 60)
        stop_load.set()
        firing_s = time.monotonic() - t_fire
        await asyncio.gather(*tasks)
        log(f"load stopped after {firing_s:.0f} s; pausing {len(jobs)} jobs")

        # stop the firing: pause every job; its pause time (server clock) bounds its fires
        paused: dict[str, datetime] = {}
        answers = await gather_limited(
            8, [api.json("POST", f"/api/jobs/{j['id']}/pause", "/pause") for j in jobs]
        )
        for job, answer in zip(jobs, answers, strict=True):
            at = parse_ts(answer["paused_at"]) if answer else None
            paused[job["id"]] = at or datetime.now(UTC)
        fire_end = max(paused.values())

        # quiescence: nothing running or waiting, twice in a row
        t_q, calm = time.monotonic(), 0
        while time.monotonic() - t_q < plan.quiesce_limit and calm < 2:
            m = await metrics(api)
            busy = m.get("agentcron_active_turns", 1) + sum(
                v for k, v in m.items() if k.startswith("agentcron_queue_depth")
            )
            calm = calm + 1 if busy == 0 else 0
            await asyncio.sleep(1)
        report["quiescent_after_s"] = round(time.monotonic() - t_q, 1)
        report["quiescent"] = calm >= 2
        log(f"quiescent={calm >= 2} after {report['quiescent_after_s']} s; reading records")
        final_metrics = await metrics(api)
        stats.lateness_snaps.append((time.time(), lateness_buckets(final_metrics)))
        if plan.tracemalloc:  # once quiescent: what is alive now is kept, not in flight
            proc.send_signal(signal.SIGUSR1)
            await asyncio.sleep(10)  # written by the server's main thread
        stop_rss.set()
        await rss_task

        # read everything back through the API
        runs_lists = await gather_limited(8, [runs_of(api, j["id"]) for j in jobs])
        runs_by_job: dict[str, list[dict[str, Any]]] = {}
        for job, got in zip(jobs, runs_lists, strict=True):
            if got is None:
                raise RuntimeError(f"cannot read the runs of job {job['id']}")
            runs_by_job[job["id"]] = [r for r in got if r["id"] not in grown]
        fetched = await gather_limited(8, [fetch_all(api, k) for k in keys])
        transcripts = dict(zip(keys, fetched, strict=True))
        checks = check_everything(jobs, paused, runs_by_job, transcripts, stats, grown)
        all_runs = [r for rs in runs_by_job.values() for r in rs]
        runs_by_id = {r["id"]: r for r in all_runs}
        api_turns = sum(len(t) for _, t in transcripts.values())
    finally:
        await api.close()
        code = await stop_server(proc)
        log(f"server stopped, exit {code}")
    report["server_exit"] = code
    text = server_log.read_text("utf-8", "replace")
    log_lines = text.splitlines()
    bad_lines = [ln for ln in log_lines if re.match(r"(ERROR|CRITICAL)\b", ln)]
    warn_lines = [ln for ln in log_lines if ln.startswith("WARNING")]
    # the exception line that ends each traceback ("module.Error: text"), counted by kind
    raised = Counter(
        ln.strip()[:200]
        for ln in log_lines
        if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Disconnected|Disconnect|Exit)\b.*", ln)
    )
    report["server_log"] = {
        "error_lines": len(bad_lines),
        "tracebacks": log_lines.count("Traceback (most recent call last):"),
        "exceptions_raised": dict(raised.most_common(10)),
        "warning_lines": len(warn_lines),
        "first_errors": bad_lines[:5],
        "first_warnings": warn_lines[:10],
    }
    report["database"] = check_database(db, len(all_runs) + len(grown), api_turns)
    if plan.tracemalloc:
        report["tracemalloc"] = tracemalloc_growth(tmp)
    if not keep:
        shutil.rmtree(tmp, ignore_errors=True)

    # figures
    states = Counter(r["state"] for r in all_runs)
    started = [r for r in all_runs if r["started_at"] is not None]
    late = [
        (parse_ts(r["started_at"]) - parse_ts(r["fire_at"])).total_seconds() * 1000  # type: ignore[operator]
        for r in started
    ]
    late_direct = [
        (parse_ts(r["started_at"]) - parse_ts(r["fire_at"])).total_seconds() * 1000  # type: ignore[operator]
        for r in started
        if r["deferred_at"] is None
    ]
    in_window = [r for r in all_runs if fire_start <= parse_ts(r["fire_at"]) <= fire_end]  # type: ignore[operator]

    def dist(values: list[float]) -> dict[str, Any]:
        return {
            "n": len(values),
            "p50_ms": pct(values, 50),
            "p99_ms": pct(values, 99),
            "max_ms": max(values) if values else None,
        }

    # how long a started fire held its turn by its record, and how long after its recorded
    # start a WebSocket subscriber saw its stream_start (same host clock)
    held = [
        (parse_ts(r["finished_at"]) - parse_ts(r["started_at"])).total_seconds() * 1000  # type: ignore[operator]
        for r in started
        if r["finished_at"]
    ]
    run_of_turn = {t["id"]: t["run_id"] for _, ts in transcripts.values() for t in ts}
    seen_after = []
    for turn_id, seen in stats.ws_start_seen.items():
        run = runs_by_id.get(run_of_turn.get(turn_id) or "")
        if run is not None and run["started_at"] is not None:
            seen_after.append((seen - parse_ts(run["started_at"])).total_seconds() * 1000)  # type: ignore[operator]
    minutes: dict[int, list[float]] = defaultdict(list)
    for r in started:
        fired = parse_ts(r["fire_at"])
        assert fired is not None
        ms = (parse_ts(r["started_at"]) - fired).total_seconds() * 1000  # type: ignore[operator]
        minutes[int((fired - fire_start).total_seconds() // 60)].append(ms)
    by_minute = [{"minute": m, **dist(v)} for m, v in sorted(minutes.items()) if m >= 0]
    # The engine's own lateness (after the turn slot, at the runner call): a fire claimed
    # ahead has its record stamped at its time, so records alone read 0 when it was on time.
    engine_windows = engine_lateness_windows(
        stats.lateness_snaps,
        fire_start.timestamp(),
        fire_start.timestamp() + firing_s,
        600.0 if firing_s >= 1200 else firing_s / 4,
    )
    warm = [(s["t"], s["rss_mb"]) for s in stats.rss if plan.warmup <= s["t"] <= firing_s]
    cpu = [s for s in stats.rss if s["t"] <= firing_s]
    report.update(
        firing_seconds=round(firing_s, 1),
        fires={
            "run_records": len(all_runs),
            "in_firing_window": len(in_window),
            "rate_per_s": round(len(in_window) / firing_s, 2),
            "by_state": dict(states),
            "started": len(started),
            "metrics_fires_total": final_metrics.get("agentcron_fires_total"),
        },
        lateness_started=dist(late),
        lateness_not_deferred=dist(late_direct),
        lateness_by_minute=by_minute,
        lateness_metrics=bucket_quantiles(final_metrics),
        lateness_engine_by_window=engine_windows,
        started_to_finished=dist(held),
        ws_stream_start_after_recorded_start=dist(seen_after),
        messages_posted=len(stats.posted),
        turns=api_turns,
        errors={
            "http_non_2xx_or_transport": stats.http_bad(),
            "http_examples": stats.http_errors[:10],
            "ws_errors": stats.ws["errors"] + stats.ws["error_frames"] + stats.ws["auth_not_ready"],
            "ws_examples": stats.ws_errors[:10],
            "failed_runs": states.get("failed", 0),
            "interrupted_runs": states.get("interrupted", 0),
        },
        http=dict(sorted(stats.http.items())),
        ws=dict(sorted(stats.ws.items())),
        rss={
            "samples": stats.rss,
            "warmup_s": plan.warmup,
            "slope_after_warmup_mb_per_min": (s := slope_per_minute(warm)) and round(s, 3),
            "after_warmup_min_mb": min((v for _, v in warm), default=None),
            "after_warmup_max_mb": max((v for _, v in warm), default=None),
            "server_cpu_s_while_firing": round(cpu[-1]["cpu_s"] - cpu[0]["cpu_s"], 1)
            if len(cpu) > 1
            else None,
        },
        checks=checks,
        ok=all(c["violations"] == 0 for c in checks.values()) and report["database"]["ok"],
    )
    return report


def fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown(r: dict[str, Any], started: str) -> str:
    p, f, e, rss = r["plan"], r["fires"], r["errors"], r["rss"]
    lines = [
        f"# agentcron soak, {started}",
        "",
        f"`agentcron serve` (SQLite, offline model), {p['jobs']:,} jobs (`every N seconds`, N in "
        f"{p['min_interval']}-{p['max_interval']}) over {p['sessions']:,} sessions, firing "
        f"{r['firing_seconds']:.0f} s; {p['post_rate']} user messages/s over REST; "
        f"{p['ws_clients']} WebSocket clients reconnecting every {p['ws_life'][0]:.0f}-"
        f"{p['ws_life'][1]:.0f} s, {p['ws_subscribe']} sessions each"
        + (f"; each session starts with {p['grow']:,} turns" if p.get("grow") else "")
        + f". Commit {r.get('commit')}.",
        "",
        f"**Result: {'all checks hold' if r['ok'] else 'INCONSISTENCIES FOUND'}**",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| fires (run records, fire time in the firing window) | {fmt(f['in_firing_window'])} |",
        f"| fire rate (/s) | {fmt(f['rate_per_s'], 2)} |",
        f"| run records in all (incl. the pause boundary) / `agentcron_fires_total` | "
        f"{fmt(f['run_records'])} / {fmt(f['metrics_fires_total'], 0)} |",
        f"| run states | {', '.join(f'{k} {v:,}' for k, v in sorted(f['by_state'].items()))} |",
        f"| user messages posted (202) / turns in all | {fmt(r['messages_posted'])} / "
        f"{fmt(r['turns'])} |",
    ]
    for label, d in (
        ("started fires", r["lateness_started"]),
        ("fires that did not wait behind a turn", r["lateness_not_deferred"]),
    ):
        lines.append(
            f"| lateness, {label} (n={d['n']:,}): p50 / p99 / max (ms) | {fmt(d['p50_ms'])} / "
            f"{fmt(d['p99_ms'])} / {fmt(d['max_ms'])} |"
        )
    lm = r["lateness_metrics"]
    lines.append(
        f"| lateness as the engine measures it (`agentcron_fire_lateness_seconds`, after the "
        f"turn slot; n={lm['n']:,}): p50 / p99 at most (s) | {fmt(lm['p50_le_s'], 3)} / "
        f"{fmt(lm['p99_le_s'], 3)} |"
    )
    for label, d in (
        ("a started fire's record, started_at to finished_at", r["started_to_finished"]),
        (
            "a subscriber saw stream_start, after the run's recorded started_at",
            r["ws_stream_start_after_recorded_start"],
        ),
    ):
        lines.append(
            f"| {label} (n={d['n']:,}): p50 / p99 / max (ms) | {fmt(d['p50_ms'])} / "
            f"{fmt(d['p99_ms'])} / {fmt(d['max_ms'])} |"
        )
    lines += [
        f"| HTTP non-2xx or transport errors | {e['http_non_2xx_or_transport']:,} |",
        f"| WebSocket errors (error frames, server closes, exceptions) | {e['ws_errors']:,} |",
        f"| WebSocket connections / frames read | {r['ws'].get('connect', 0):,} / "
        f"{sum(v for k, v in r['ws'].items() if k.startswith('frame ')):,} |",
        f"| failed / interrupted runs | {e['failed_runs']:,} / {e['interrupted_runs']:,} |",
        f"| server RSS at ready (MB) | {fmt(r['rss_at_ready_mb'])} |",
        f"| server RSS after {rss['warmup_s']:.0f} s warm-up: min / max (MB) | "
        f"{fmt(rss['after_warmup_min_mb'])} / {fmt(rss['after_warmup_max_mb'])} |",
        f"| RSS slope after warm-up (MB/min, least squares) | "
        f"{fmt(rss['slope_after_warmup_mb_per_min'], 3)} |",
        f"| server CPU while firing (s) | {fmt(rss['server_cpu_s_while_firing'])} |",
        f"| quiescent after pause (s) | {r['quiescent_after_s']} "
        f"({'yes' if r['quiescent'] else 'NO'}) |",
        f"| server log: ERROR lines, tracebacks, WARNING lines | "
        f"{r['server_log']['error_lines']:,}, {r['server_log']['tracebacks']:,}, "
        f"{r['server_log']['warning_lines']:,} |",
        "",
        "## Consistency checks",
        "",
        "| check | checked | violations |",
        "| --- | --- | --- |",
    ]
    for name, c in r["checks"].items():
        lines.append(f"| {name} | {c['checked']:,} | {c['violations']:,} |")
    d = r["database"]
    lines.append(
        f"| database read-only after stop: no duplicate fire, nothing non-terminal, counts = API "
        f"| {d['bound_runs']:,} runs, {sum(d['turns_by_state'].values()):,} turns "
        f"| {'0' if d['ok'] else 'see JSON'} |"
    )
    examples = [(n, c["examples"]) for n, c in r["checks"].items() if c["examples"]]
    if examples or not d["ok"]:
        lines += ["", "### Violations (examples)", ""]
        for name, ex in examples:
            lines.append(f"- {name}:")
            lines += [f"  - `{x}`" for x in ex]
        if not d["ok"]:
            lines.append(f"- database: `{json.dumps(d)}`")
    if e["http_examples"] or e["ws_examples"] or r["server_log"]["first_errors"]:
        lines += ["", "### Errors (first few)", ""]
        lines += [f"- HTTP: `{x}`" for x in e["http_examples"]]
        lines += [f"- WS: `{x}`" for x in e["ws_examples"]]
        lines += [f"- server log: `{x[:300]}`" for x in r["server_log"]["first_errors"]]
        lines += [
            f"- server log, exception raised {n:,} times: `{x}`"
            for x, n in r["server_log"]["exceptions_raised"].items()
        ]
    lines += [
        "",
        "## The engine's lateness by window of firing (`agentcron_fire_lateness_seconds`)",
        "",
        "| from minute | fires | p50 at most (s) | p99 at most (s) |",
        "| --- | --- | --- | --- |",
        *(
            f"| {w['from_min']} | {w['n']:,} | {fmt(w['p50_le_s'], 3)} | {fmt(w['p99_le_s'], 3)} |"
            for w in r.get("lateness_engine_by_window", [])
        ),
        "",
        "## Lateness by minute of firing (started fires, ms)",
        "",
        "| minute | n | p50 | p99 | max |",
        "| --- | --- | --- | --- | --- |",
    ]
    for m in r["lateness_by_minute"]:
        lines.append(
            f"| {m['minute']} | {m['n']:,} | {fmt(m['p50_ms'])} | {fmt(m['p99_ms'])} "
            f"| {fmt(m['max_ms'])} |"
        )
    if "tracemalloc" in r:
        tm = r["tracemalloc"]
        lines += [
            "",
            f"## tracemalloc: Python memory allocated after the warm-up and still held once "
            f"quiescent: {tm['traced_mb_at_end']} MB (largest sites below)",
            "",
            "| KB | blocks | allocated at |",
            "| --- | --- | --- |",
        ]
        for g in tm["top_growth"]:
            lines.append(f"| {g['kb']:,} | {g['count']:,} | {' <- '.join(reversed(g['where']))} |")
    samples = rss["samples"]
    step = max(1, len(samples) // 40)
    lines += [
        "",
        f"## Server RSS samples (MB; taken every {p['rss_every']:.0f} s, every {step}. shown; "
        "all in the JSON)",
        "",
        " ".join(f"{s['t']:.0f}s:{s['rss_mb']:.0f}" for s in samples[::step]),
        "",
    ]
    return "\n".join(lines)


def git_commit() -> str | None:
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
        return out.stdout.strip()
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="1 minute, 100 jobs, 20 sessions")
    ap.add_argument("--min-interval", type=int, help="seconds (default 45; quick 5)")
    ap.add_argument("--max-interval", type=int, help="seconds (default 180; quick 15)")
    ap.add_argument("--post-rate", type=float, help="user messages per second (default 1; quick 2)")
    ap.add_argument("--ws-clients", type=int, default=8)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="FRAMES",
        help="run the server under tracemalloc and report what grew after the warm-up "
        "(slows the server: a diagnostic, not a soak)",
    )
    ap.add_argument(
        "--grow",
        type=int,
        default=0,
        metavar="TURNS",
        help="store TURNS finished turns in each session before the firing starts (as if the "
        "soak had run for a while: a long transcript, turn and run records)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (database, server log)")
    args = ap.parse_args()
    if args.quick:
        args.minutes, args.jobs, args.sessions = 1.0, 100, 20
    quick = args.minutes <= 2
    plan = Plan(
        minutes=args.minutes,
        jobs=args.jobs,
        sessions=args.sessions,
        min_interval=args.min_interval or (5 if quick else 45),
        max_interval=args.max_interval or (15 if quick else 180),
        post_rate=args.post_rate or (2.0 if quick else 1.0),
        ws_clients=args.ws_clients if not args.quick else min(args.ws_clients, 4),
        ws_life=(3.0, 10.0) if quick else (5.0, 30.0),
        ws_subscribe=5,
        rss_every=2.0 if quick else 5.0,
        warmup=20.0 if quick else 120.0,
        quiesce_limit=120.0,
        tracemalloc=args.tracemalloc,
        grow=args.grow,
    )
    if not 1 <= plan.min_interval <= plan.max_interval:
        ap.error("need 1 <= --min-interval <= --max-interval")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        report = asyncio.run(soak(plan, args.seed, args.keep))
    except RuntimeError as exc:
        log(f"the soak could not run: {exc}")
        return 2
    report["commit"] = git_commit()
    report["started"] = stamp
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"soak-{stamp}.json").write_text(json.dumps(report, indent=1, default=str))
    text = markdown(report, stamp)
    (RESULTS / f"soak-{stamp}.md").write_text(text)
    (RESULTS / "soak-latest.md").write_text(text)
    print(text)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
