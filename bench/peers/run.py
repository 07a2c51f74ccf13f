"""The peer benchmark's driver (`python -m bench`): installs each peer into its own virtual
environment, runs every (system, workload) in its own subprocess, rotates the order of the
systems between rounds, and reports medians and agentcron / peer ratios (taken within a
round, then the median of those) as a markdown table, JSON and a PNG chart.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent.parent
REPO = BENCH_DIR.parent
VENVS = BENCH_DIR / ".venvs"
RESULTS = BENCH_DIR / "results"
PEER_RESULTS = RESULTS / "peers"
CHART = RESULTS / "peers.png"

AC = ("agentcron-unbound", "agentcron-bound", "agentcron-pg")
SYSTEMS = (*AC, "apscheduler", "nanobot", "hermes")
LABELS = {
    "agentcron-unbound": "agentcron unbound",
    "agentcron-bound": "agentcron bound",
    "agentcron-pg": "agentcron bound (PostgreSQL)",
    "apscheduler": "APScheduler",
    "nanobot": "nanobot",
    "hermes": "hermes-agent",
}
# Each peer: its virtual environment under bench/.venvs/, what pip installs there, and the
# distribution whose version must match.
PEERS = {
    "apscheduler": (
        "apscheduler",
        ["apscheduler==3.11.3", "sqlalchemy>=2"],
        "apscheduler",
        "3.11.3",
    ),
    "nanobot": ("nanobot-ai", ["nanobot-ai==0.3.5"], "nanobot-ai", "0.3.5"),
    "hermes": ("hermes-agent", ["hermes-agent==0.19.0"], "hermes-agent", "0.19.0"),
}
BOUND = "agentcron-bound"  # the ratio rows of the table: agentcron's main path / each peer


@dataclass(frozen=True)
class Metric:
    key: str  # a key of the child's JSON answer
    label: str
    higher_better: bool
    fmt: str = "{:,.0f}"

    def show(self, value: float) -> str:
        return sig(value) if self.fmt == "sig" else self.fmt.format(value)


def sig(value: float) -> str:
    """Three significant digits (CPU seconds go from 0.0003 to 10)."""
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) >= 0.001 else f"{value:.2g}"


@dataclass(frozen=True)
class Workload:
    key: str
    kind: str  # harness workload: create, burst, lateness, idle (build + idle)
    full: dict[str, Any]
    quick: dict[str, Any]
    metrics: tuple[Metric, ...]
    title: str = ""
    extra_s: float = 0  # subprocess timeout beyond the workload's own limit


RATE = "rate"
WORKLOADS = (
    Workload(
        "create_1k",
        "create",
        {"n": 1_000, "limit_s": 45},
        {"n": 100, "limit_s": 10},
        (Metric(RATE, "create {n} one per call, running (jobs/s)", True),),
    ),
    Workload(
        "create_10k",
        "create",
        {"n": 10_000, "limit_s": 45},
        {"n": 500, "limit_s": 10},
        (Metric(RATE, "create {n} one per call, running (jobs/s)", True),),
    ),
    Workload(
        "burst_1k",
        "burst",
        {"n": 1_000, "lead_s": 3, "margin_s": 1, "limit_s": 60},
        {"n": 100, "lead_s": 2, "margin_s": 0.5, "limit_s": 10},
        (
            Metric(RATE, "{n} due at once (fires/s)", True),
            Metric("first_ms", "{n} due at once: first body (ms after due)", False, "{:,.1f}"),
        ),
    ),
    Workload(
        "burst_10k",
        "burst",
        {"n": 10_000, "lead_s": 5, "margin_s": 1, "limit_s": 60},
        {"n": 500, "lead_s": 2, "margin_s": 0.5, "limit_s": 10},
        (
            Metric(RATE, "{n} due at once (fires/s)", True),
            Metric("first_ms", "{n} due at once: first body (ms after due)", False, "{:,.1f}"),
        ),
    ),
    Workload(
        "lateness_1k",
        "lateness",
        {"n": 1_000, "span_s": 10, "lead_s": 3, "margin_s": 1, "limit_s": 45},
        {"n": 100, "span_s": 2, "lead_s": 2, "margin_s": 0.5, "limit_s": 10},
        (
            Metric("p50_ms", "lateness p50, {n} over {span_s:g} s (ms)", False, "{:,.1f}"),
            Metric("p99_ms", "lateness p99, {n} over {span_s:g} s (ms)", False, "{:,.1f}"),
            Metric("max_ms", "lateness max, {n} over {span_s:g} s (ms)", False, "{:,.1f}"),
        ),
    ),
    Workload(
        "idle_10k",
        "idle",
        {"n": 10_000, "idle_s": 30},
        {"n": 1_000, "idle_s": 5},
        (Metric("cpu_s", "idle CPU over {idle_s:g} s, {n} stored (s)", False, "sig"),),
    ),
    Workload(
        "idle_100k",
        "idle",
        {"n": 100_000, "idle_s": 30},
        {"n": 5_000, "idle_s": 5},
        (
            Metric("cpu_s", "idle CPU over {idle_s:g} s, {n} stored (s)", False, "sig"),
            Metric("rss_mb", "peak RSS, {n} stored (MB)", False, "{:,.0f}"),
        ),
    ),
    Workload(
        "herd",
        "herd",
        {"n": 100_000, "sessions": 10_000, "lead_s": 150, "margin_s": 2, "limit_s": 300},
        {"n": 10_000, "sessions": 1_000, "lead_s": 30, "margin_s": 1, "limit_s": 60},
        (
            Metric(
                "all_s",
                "herd: {n} due at once over {sessions:,} sessions: all started (s after due)",
                False,
                "{:,.2f}",
            ),
            Metric("first_ms", "herd: first fire started (ms after due)", False, "{:,.1f}"),
            Metric("rss_mb", "herd: peak RSS during the herd (MB)", False, "{:,.0f}"),
            Metric("lost_or_twice", "herd: fires lost or run twice", False, "{:,.0f}"),
        ),
    ),
)
WORKLOAD_KEYS = tuple(w.key for w in WORKLOADS)
# How long a child may take beyond its own limit (setup, imports, the idle window) before it
# is killed and reported as such.
CHILD_SLACK_S = 600


def log(msg: str) -> None:
    print(f"[bench] {time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def short(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else f"{n:,}"


def label_for(metric: Metric, params: dict[str, Any]) -> str:
    values = {**params, "n": short(params["n"])}
    return metric.label.format(**values)


# -- virtual environments --------------------------------------------------------------------


def python_for(system: str) -> str:
    if system in AC:
        return sys.executable
    return str(VENVS / PEERS[system][0] / "bin" / "python")


def installed_version(python: str, dist: str) -> str | None:
    proc = subprocess.run(
        [python, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def ensure_env(system: str) -> str | None:
    """Make sure `system` can run; None, or why it cannot."""
    if system in AC:
        try:
            import agentcron  # noqa: F401
        except ImportError:
            return f"agentcron is not importable by {sys.executable}"
        return None
    venv_name, specs, dist, version = PEERS[system]
    venv = VENVS / venv_name
    python = str(venv / "bin" / "python")
    if Path(python).exists() and installed_version(python, dist) == version:
        return None
    log(f"installing {' '.join(specs)} into {venv.relative_to(REPO)}")
    if not Path(python).exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    proc = subprocess.run(
        [python, "-m", "pip", "install", "-q", *specs],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0 or installed_version(python, dist) != version:
        log(proc.stderr[-2000:])
        return f"pip install {' '.join(specs)} failed"
    return None


# -- running children ------------------------------------------------------------------------


def run_child(
    system: str, kind: str, params: dict[str, Any], workdir: Path, timeout: float, logfile: Path
) -> dict[str, Any]:
    """One child process; its JSON answer, or {"error": ...}."""
    cmd = [
        python_for(system),
        "-m",
        "bench.peers.harness",
        system,
        kind,
        json.dumps(params),
        str(workdir),
    ]
    # The repository first (for `bench`), then the caller's own path: the agentcron columns
    # measure the agentcron the caller imports (PYTHONPATH=src), as bench_engine does.
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
    env.pop("HERMES_HOME", None)
    start = time.perf_counter()
    with logfile.open("ab") as err:
        err.write(f"\n== {system} {kind} {json.dumps(params)}\n".encode())
        err.flush()
        try:
            proc = subprocess.run(
                cmd,
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=err,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"killed after {timeout:.0f} s"}
    wall = time.perf_counter() - start
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode} (see {logfile.name})"}
    try:
        out = json.loads(lines[-1])
    except json.JSONDecodeError:
        return {"error": f"no JSON answer (see {logfile.name})"}
    out["child_wall_s"] = wall
    return out


@dataclass
class Run:
    profile: str
    rounds: int
    systems: list[str]
    workloads: list[Workload]
    tmp: Path
    logfile: Path
    problems: dict[str, str] = field(default_factory=dict)  # system -> why it was skipped
    # results[workload][system] = one answer per round
    results: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    builds: dict[tuple[str, int], Path | str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    rounds_done: int = 0
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    def params(self, w: Workload) -> dict[str, Any]:
        return w.quick if self.profile == "quick" else w.full

    def built_store(self, system: str, n: int) -> Path | str:
        """The store with `n` jobs a year ahead for `system`, built once per run (a Path), or
        why it could not be built (a str).
        """
        key = (system, n)
        if key not in self.builds:
            wd = self.tmp / f"build-{system}-{n}"
            log(f"build {system}: {n:,} stored jobs")
            out = run_child(system, "build", {"n": n}, wd, 3_600, self.logfile)
            if "error" in out:
                self.builds[key] = f"building {n:,} jobs: {out['error']}"
            else:
                log(f"  built in {out['build_s']:.1f} s")
                self.builds[key] = wd / "store"
        return self.builds[key]

    def one(self, w: Workload, system: str, round_no: int) -> dict[str, Any]:
        p = self.params(w)
        wd = self.tmp / f"r{round_no}-{w.key}-{system}"
        if w.kind != "idle":
            limit = p["limit_s"] + p.get("span_s", 0) + p.get("lead_s", 0)
            return run_child(system, w.kind, p, wd, limit + CHILD_SLACK_S, self.logfile)
        store = self.built_store(system, p["n"])
        if isinstance(store, str):
            return {"error": store}
        copy = self.tmp / f"r{round_no}-{w.key}-{system}-store"
        out = run_child(
            system, "clone", {"src": str(store), "dst": str(copy)}, wd, 600, self.logfile
        )
        if "error" in out:
            return {"error": f"copying the store: {out['error']}"}
        out = run_child(
            system, "idle", {**p, "store": str(copy)}, wd, p["idle_s"] + CHILD_SLACK_S, self.logfile
        )
        if system not in AC:
            shutil.rmtree(copy, ignore_errors=True)
        return out

    def go(self) -> None:
        for system in self.systems:
            problem = ensure_env(system)
            if problem:
                self.problems[system] = problem
                log(f"{system}: skipped, {problem}")
        systems = [s for s in self.systems if s not in self.problems]
        for r in range(self.rounds):
            # Rotate the order of the systems between rounds (and workloads).
            order = systems[r % len(systems) :] + systems[: r % len(systems)] if systems else []
            log(f"round {r + 1}/{self.rounds}: order {', '.join(order)}")
            for w in self.workloads:
                for system in order:
                    log(f"{w.key} {system}")
                    out = self.one(w, system, r)
                    if "version" in out:
                        self.versions[system] = out["version"]
                    log(f"  -> {summary(w, out)}")
                    self.results.setdefault(w.key, {}).setdefault(system, []).append(out)
            self.rounds_done = r + 1
            report(self, final=r + 1 == self.rounds)


def summary(w: Workload, out: dict[str, Any]) -> str:
    if "error" in out:
        return f"ERROR {out['error']}"
    if "na" in out:
        return f"n/a: {out['na']}"
    parts = [f"{m.key}={out.get(m.key)!s:.8}" for m in w.metrics]
    if "complete" in out and not out["complete"]:
        parts.append(f"INCOMPLETE {out['done']}/{out['n']}")
    return " ".join(parts)


# -- aggregation -----------------------------------------------------------------------------


def ok(out: dict[str, Any], metric: Metric) -> bool:
    return (
        "error" not in out
        and "na" not in out
        and out.get("complete", True)
        and out.get(metric.key) is not None
    )


def cell(w: Workload, metric: Metric, outs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of the complete rounds; when any round did not finish within the limit,
    "> limit" with what was measured (never a figure for the full N).
    """
    if not outs:
        return {"text": "-", "value": None, "status": "missing"}
    na = [o["na"] for o in outs if "na" in o]
    if na:  # the system cannot run this workload
        return {"text": f"n/a: {na[0]}", "value": None, "status": "n/a"}
    errors = [o["error"] for o in outs if "error" in o]
    if errors:
        return {"text": f"error: {errors[0]}", "value": None, "status": "error"}
    incomplete = [o for o in outs if not o.get("complete", True)]
    complete = [o for o in outs if o.get("complete", True)]
    if incomplete and complete:
        # Some rounds finished within the limit: their median, saying how many did not.
        med = statistics.median(o[metric.key] for o in complete)
        return {
            "text": f"{metric.show(med)} ({len(incomplete)} of {len(outs)} rounds "
            f"> {incomplete[0]['limit_s']:g} s limit)",
            "value": med,
            "status": "ok",
            "rounds": [o[metric.key] for o in complete],
            "rounds_over_limit": len(incomplete),
        }
    if incomplete:
        o = incomplete[0]
        limit = o["limit_s"]
        done = statistics.median(x["done"] for x in incomplete)
        what = f"> {limit:g} s limit ({done:,.0f}/{o['n']:,} done"
        partial = [x[metric.key] for x in incomplete if x.get(metric.key) is not None]
        if partial and metric.key == RATE:
            what += f": {metric.show(statistics.median(partial))}/s"
        elif partial:
            what += f"; of those {metric.show(statistics.median(partial))}"
        return {
            "text": what + ")",
            "value": statistics.median(partial) if partial else None,
            "status": "limit",
            "rounds_over_limit": len(incomplete),
        }
    values = [o.get(metric.key) for o in outs]
    if None in values:  # not measured by this system (a count it cannot give)
        return {"text": "-", "value": None, "status": "missing"}
    med = statistics.median(values)
    return {"text": metric.show(med), "value": med, "status": "ok", "rounds": values}


def ratios(
    w: Workload, metric: Metric, mine: list[dict[str, Any]], peer: list[dict[str, Any]]
) -> float | None:
    """agentcron / peer within each round (both complete), then the median."""
    per_round = [
        a[metric.key] / b[metric.key]
        for a, b in zip(mine, peer, strict=False)
        if ok(a, metric) and ok(b, metric) and b[metric.key]
    ]
    return statistics.median(per_round) if per_round else None


def fmt_ratio(x: float | None) -> str:
    if x is None:
        return "-"
    if x < 0.01:
        return f"{x:.1g}x"
    return f"{x:.2f}x" if x < 10 else f"{x:,.0f}x"


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} cores ({cpu}), {mem} RAM, Python {sys.version.split()[0]}"


def aggregate(run: Run) -> dict[str, Any]:
    rows = []
    for w in run.workloads:
        p = run.params(w)
        by_system = run.results.get(w.key, {})
        for m in w.metrics:
            row: dict[str, Any] = {
                "workload": w.key,
                "metric": m.key,
                "label": label_for(m, p),
                "higher_better": m.higher_better,
                "params": p,
                "cells": {},
                "ratios": {},
            }
            for s in run.systems:
                if s in run.problems:
                    row["cells"][s] = {
                        "text": f"n/a: {run.problems[s]}",
                        "value": None,
                        "status": "n/a",
                    }
                else:
                    row["cells"][s] = cell(w, m, by_system.get(s, []))
            for a in AC:
                for peer in run.systems:
                    if peer in AC or a not in by_system or peer not in by_system:
                        continue
                    row["ratios"][f"{a}/{peer}"] = ratios(w, m, by_system[a], by_system[peer])
            rows.append(row)
    return {
        "started": run.started,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "profile": run.profile,
        "rounds": run.rounds,
        "rounds_done": run.rounds_done,
        "machine": machine(),
        "command": "python -m bench " + " ".join(sys.argv[1:]),
        "systems": {s: {"label": LABELS[s], "version": run.versions.get(s)} for s in run.systems},
        "skipped": run.problems,
        "rows": rows,
        "raw": run.results,
    }


def reaggregate(data: dict[str, Any]) -> dict[str, Any]:
    """A results file's rows computed again from its raw answers (with today's rules)."""
    systems = list(data["systems"])
    run = Run(
        data["profile"],
        data["rounds"],
        systems,
        [w for w in WORKLOADS if w.key in data["raw"]],
        Path("."),
        Path("."),
    )
    run.results = data["raw"]
    run.problems = data["skipped"]
    run.versions = {s: v["version"] for s, v in data["systems"].items() if v["version"]}
    run.rounds_done = data.get("rounds_done", data["rounds"])
    run.started = data["started"]
    fresh = aggregate(run)
    return {**data, "rows": fresh["rows"], "rounds_done": run.rounds_done}


def render(data: dict[str, Any]) -> str:
    systems = list(data["systems"])
    peers = [s for s in systems if s not in AC]
    head = ["", *(LABELS[s] for s in systems)]
    lines = [
        "| " + " | ".join(head) + " |",
        "| " + " | ".join(["---"] + ["---:"] * len(systems)) + " |",
    ]
    for row in data["rows"]:
        arrow = "↑" if row["higher_better"] else "↓"
        cells = [row["cells"][s]["text"] for s in systems]
        lines.append(f"| {row['label']} {arrow} | " + " | ".join(cells) + " |")
        if peers and BOUND in systems:
            ratio_cells = [
                fmt_ratio(row["ratios"].get(f"{BOUND}/{s}")) if s in peers else "" for s in systems
            ]
            lines.append(
                "| &nbsp;&nbsp;ratio agentcron bound ÷ peer | " + " | ".join(ratio_cells) + " |"
            )
    ac_version = next(
        (
            data["systems"][s]["version"]
            for s in AC
            if s in data["systems"] and data["systems"][s]["version"]
        ),
        None,
    )
    versions = ", ".join(
        ([f"agentcron {ac_version}"] if ac_version else [])
        + [
            f"{info['label']} {info['version']}"
            for s, info in data["systems"].items()
            if info["version"] and s not in AC
        ]
    )
    done = data.get("rounds_done", data["rounds"])
    notes = [
        "",
        f"{data['profile']} profile, {done} of {data['rounds']} round(s), medians; ratios are "
        "agentcron ÷ peer taken within a round, then the median (↑ higher is better: a ratio "
        "above 1 favours agentcron; ↓ lower is better: a ratio below 1 favours agentcron).",
        f"Machine: {data['machine']}. Versions: {versions}.",
    ]
    for s, why in data["skipped"].items():
        notes.append(f"{LABELS[s]}: n/a, {why}.")
    unbound = (
        [
            f"{row['label']}: "
            + ", ".join(
                f"{LABELS[p]} {fmt_ratio(row['ratios'].get(f'agentcron-unbound/{p}'))}"
                for p in peers
            )
            for row in data["rows"]
        ]
        if "agentcron-unbound" in systems and peers
        else []
    )
    if unbound:
        notes += ["", "Ratios agentcron unbound ÷ peer:", *(f"- {u}" for u in unbound)]
    return "\n".join(lines + notes)


# -- the chart -------------------------------------------------------------------------------

COLORS = {
    "agentcron-unbound": "#8fb8de",
    "agentcron-bound": "#d62728",
    "agentcron-pg": "#f2a09a",
    "apscheduler": "#7f7f7f",
    "nanobot": "#a9a9a9",
    "hermes": "#cfcfcf",
}


def chart(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    systems = list(data["systems"])
    rows = data["rows"]
    cols = 4
    nrows = (len(rows) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.3 * nrows + 1.0))
    flat = list(axes.flat) if hasattr(axes, "flat") else [axes]
    for ax, row in zip(flat, rows, strict=False):
        xs = range(len(systems))
        values, hatches = [], []
        for s in systems:
            c = row["cells"][s]
            v = c["value"]
            values.append(v if v and v > 0 else 0)
            hatches.append("//" if c["status"] == "limit" else "")
        bars = ax.bar(
            xs,
            [v or 0 for v in values],
            color=[COLORS[s] for s in systems],
            edgecolor=["black" if s == BOUND else "none" for s in systems],
            linewidth=1.5,
        )
        for bar, h in zip(bars, hatches, strict=True):
            bar.set_hatch(h)
        positive = [v for v in values if v]
        if positive:
            ax.set_yscale("log")
            ax.set_ylim(min(positive) / 3, max(positive) * 8)
        for x, s in zip(xs, systems, strict=True):
            c = row["cells"][s]
            if c["status"] == "ok":
                # "329 (1 of 3 rounds > 45 s limit)" -> "329*": the table says the rest
                text = c["text"].split(" (")[0] + ("*" if c.get("rounds_over_limit") else "")
            elif c["status"] == "limit":
                text = "> limit"
            else:
                text = "n/a" if c["status"] == "n/a" else c["status"]
            y = values[x] if values[x] else (min(positive) / 2 if positive else 1)
            ax.text(
                x,
                y * 1.15,
                text,
                ha="center",
                va="bottom",
                fontsize=7,
                rotation=90 if len(text) > 5 else 0,
                fontweight="bold" if s == BOUND else "normal",
            )
        better = "higher is better" if row["higher_better"] else "lower is better"
        ax.set_title(f"{row['label']}\n({better}, log scale)", fontsize=8.5)
        ax.set_xticks([])
        ax.tick_params(axis="y", labelsize=7)
    for ax in flat[len(rows) :]:
        ax.axis("off")
    handles = [
        Patch(facecolor=COLORS[s], edgecolor="black" if s == BOUND else "none", label=LABELS[s])
        for s in systems
    ]
    handles.append(
        Patch(
            facecolor="white",
            edgecolor="black",
            hatch="//",
            label="did not finish within the limit (rate of what did)",
        )
    )
    fig.legend(
        handles=handles, loc="lower center", ncol=min(4, len(handles)), fontsize=8, frameon=False
    )
    done = data.get("rounds_done", data["rounds"])
    fig.suptitle(
        f"agentcron vs peers ({data['profile']} profile, {done} round(s), medians; "
        f"{data['finished'][:10]})",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0.07, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def chart_path(profile: str) -> Path:
    """The full profile's chart is bench/results/peers.png (committed); others beside it."""
    return CHART if profile == "full" else RESULTS / f"peers-{profile}.png"


def report(run: Run, *, final: bool) -> None:
    """Write the JSON (timestamped + latest), the chart, and print the table."""
    data = aggregate(run)
    PEER_RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = run.started.replace(":", "").replace("-", "")[:15]
    text = json.dumps(data, indent=1, default=str)
    (PEER_RESULTS / f"{stamp}-{run.profile}.json").write_text(text)
    # A smoke run does not replace the full profile's (committed) latest.json.
    latest = "latest.json" if run.profile == "full" else f"latest-{run.profile}.json"
    (PEER_RESULTS / latest).write_text(text)
    try:
        chart(data, chart_path(run.profile))
    except ImportError:
        log("matplotlib is not installed: no chart (pip install -e '.[bench]')")
    table = render(data)
    if final:
        print(table, flush=True)
    else:
        log("table so far:\n" + table)


# -- command line ----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="agentcron next to APScheduler, nanobot and hermes-agent, same machine.",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: small sizes, 1 round, idle 5 s"
    )
    parser.add_argument("--rounds", type=int, help="rounds (default 3; --quick: 1)")
    parser.add_argument(
        "--systems",
        help=f"comma list of {', '.join(SYSTEMS)} "
        "(also: agentcron = the three agentcron columns, peers = the three peers)",
    )
    parser.add_argument(
        "--workloads",
        help=f"comma list of {', '.join(WORKLOAD_KEYS)} "
        "(or the prefixes create, burst, lateness, idle)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument(
        "--report",
        metavar="JSON",
        help="measure nothing: print the table and redraw the chart of a "
        "results file (e.g. bench/results/peers/latest.json)",
    )
    parser.add_argument(
        "--engine",
        action="store_true",
        help="run bench/bench_engine.py instead (the rest of the arguments go to it)",
    )
    return parser.parse_args(argv)


def pick(
    text: str | None, allowed: tuple[str, ...], groups: dict[str, tuple[str, ...]], what: str
) -> list[str]:
    if not text:
        return list(allowed)
    chosen: list[str] = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        matches = groups.get(item) or tuple(
            a for a in allowed if a == item or a.startswith(item + "_")
        )
        if not matches:
            raise SystemExit(f"unknown {what} {item!r}; choose from {', '.join(allowed)}")
        chosen += [m for m in matches if m not in chosen]
    return [a for a in allowed if a in chosen]


def drop_pg_databases() -> None:
    """Drop the PostgreSQL databases the agentcron-pg runs created."""
    try:
        import sqlalchemy as sa

        from bench.bench_engine import DEFAULT_PG_URL, PG_ENV
        from bench.peers.agentcron_peer import PG_PREFIX, pg_admin
    except ImportError:
        return
    url = os.environ.get(PG_ENV, DEFAULT_PG_URL)
    try:
        admin = pg_admin(url)
        with admin.connect() as conn:
            names = (
                conn.execute(
                    sa.text("SELECT datname FROM pg_database WHERE datname LIKE :p"),
                    {"p": PG_PREFIX + "%"},
                )
                .scalars()
                .all()
            )
            for name in names:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
    except Exception as exc:
        log(f"could not drop the benchmark's PostgreSQL databases: {exc}")


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if "--engine" in args_list:
        rest = [a for a in args_list if a != "--engine"]
        engine = BENCH_DIR / "bench_engine.py"
        return subprocess.call([sys.executable, str(engine), *rest])
    args = parse_args(args_list)
    if args.report:
        data = reaggregate(json.loads(Path(args.report).read_text()))
        print(render(data))
        chart(data, chart_path(data["profile"]))
        return 0
    profile = "quick" if args.quick else "full"
    rounds = args.rounds or (1 if args.quick else 3)
    systems = pick(
        args.systems,
        SYSTEMS,
        {"agentcron": AC, "peers": ("apscheduler", "nanobot", "hermes")},
        "system",
    )
    keys = pick(args.workloads, WORKLOAD_KEYS, {}, "workload")
    workloads = [w for w in WORKLOADS if w.key in keys]
    tmp = Path(tempfile.mkdtemp(prefix="agentcron-peers-"))
    RESULTS.mkdir(parents=True, exist_ok=True)
    logfile = RESULTS / "peers-children.log"
    logfile.write_text("")
    log(f"{profile} profile, {rounds} round(s); scratch {tmp}; children's stderr -> {logfile}")
    run = Run(profile, rounds, systems, workloads, tmp, logfile)
    try:
        run.go()
    finally:
        if "agentcron-pg" in systems:
            drop_pg_databases()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0
