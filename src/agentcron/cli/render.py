"""Rich tables and detail views of the API's JSON records, for the terminal."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Column, Table

from agentcron.schedule.zones import get_zone


def when(instant: str | datetime | None, zone: str) -> str:
    """An instant (ISO text or a datetime) as the wall clock in `zone`, the zone named, to the
    second: "2026-11-26 09:00:00 Europe/Berlin" ("-" for none). Every time the CLI prints goes
    through here.
    """
    if not instant:
        return "-"
    if isinstance(instant, str):
        instant = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    return f"{instant.astimezone(get_zone(zone)):%Y-%m-%d %H:%M:%S} {zone}"


def _state(job: dict[str, Any]) -> str:
    active = job.get("active_run")
    if active:
        return f"{active['state']} ({active['id']})"
    if job.get("state") == "done":
        return f"done {when(job.get('finished_at'), job['tz'])}"
    if not job["enabled"]:
        return f"paused: {job.get('paused_reason') or ''}".strip()
    return "enabled" if job["next_run_at"] else "done"


def _id(header: str) -> Column:
    """Ids are what a user copies: never cut, never wrapped, whatever the terminal's width."""
    return Column(header, no_wrap=True, min_width=26)


def jobs_table(jobs: list[dict[str, Any]]) -> Table:
    table = Table(
        _id("id"),
        "name",
        Column("kind", no_wrap=True, min_width=10),
        "session",
        "schedule",
        "next run",
        "last",
        "state",
        title=f"{len(jobs)} job(s)",
    )
    for job in jobs:
        table.add_row(
            job["id"],
            job["name"],
            job["kind"],
            job["session_key"] or "-",
            job["schedule"],
            when(job["next_run_at"], job["tz"]),
            job["last_status"] or "-",
            _state(job),
        )
    return table


def history_table(runs: list[dict[str, Any]], tz: str) -> Table:
    """The run history: job names (a deleted job's too), fire times in `tz`, durations."""
    table = Table(
        "fired",
        "job",
        "session",
        "state",
        "took",
        "tokens in/out",
        "cost",
        _id("id"),
        title=f"{len(runs)} run(s)",
    )
    for run in runs:
        usage = run.get("usage") or {}
        tokens = (
            f"{usage.get('input_tokens', 0):,}/{usage.get('output_tokens', 0):,}" if usage else "-"
        )
        cost = usage.get("cost_usd")
        table.add_row(
            when(run["fire_at"], tz),
            run.get("job_name") or "(a deleted job)",
            run["session_key"] or "-",
            # a fire its gate held back says so (its reason, `error`, is "gate")
            run["state"] + (" (gate)" if run.get("error") == "gate" else ""),
            took(run["started_at"], run["finished_at"]),
            tokens,
            "-" if cost is None else f"${cost:.4f}",
            run["id"],
        )
    return table


def took(started: str | None, finished: str | None) -> str:
    """How long a run took ("running" while it runs, "-" when it never started)."""
    if not started:
        return "-"
    if not finished:
        return "running"
    begin, end = (datetime.fromisoformat(v.replace("Z", "+00:00")) for v in (started, finished))
    seconds = max((end - begin).total_seconds(), 0.0)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def usage_table(usage: dict[str, Any]) -> Table:
    """The usage per day (`GET /api/usage`), one row per day, session and job, then the sums."""
    table = Table(
        "day", "session", "job", "runs", "turns", "tokens in", "tokens out", "cost",
        title=f"usage per day ({len(usage['days'])} row(s))",
    )  # fmt: skip
    for day in usage["days"]:
        job = day["job_name"] or ("-" if day["job_id"] is None else "(a deleted job)")
        table.add_row(day["day"], day["session_key"], job, *_sums(day))
    table.add_section()
    table.add_row("total", "", "", *_sums(usage["total"]))
    return table


def _sums(row: dict[str, Any]) -> list[str]:
    cost = row["cost_usd"]
    return [
        str(row["runs"]),
        str(row["turns"]),
        f"{row['input_tokens']:,}",
        f"{row['output_tokens']:,}",
        f"${cost:.4f}" if cost is not None else "unpriced" if row["input_tokens"] else "-",
    ]


def sessions_table(sessions: list[dict[str, Any]], zone: str) -> Table:
    table = Table(
        Column("key", no_wrap=True),
        "title",
        "tz",
        "automations",
        "recall",
        "updated",
        title=f"{len(sessions)} session(s)",
    )
    for s in sessions:
        table.add_row(
            s["key"],
            s["title"] or "-",
            s["tz"],
            str(s.get("automations", 0)),
            "yes" if s.get("has_recall") else "-",
            when(s["updated_at"], zone),
        )
    return table


def _pairs(console: Console, title: str, rows: list[tuple[str, Any]]) -> None:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for key, value in rows:
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        table.add_row(key, shown)
    console.print(table)


def usage(data: dict[str, Any] | None, over: str = "runs") -> str:
    """Tokens and cost in one line; a cost no price table knows says "unpriced", never $0.
    Totals say what they were summed `over` ("runs", "turns"): "... over 18 turns".
    """
    if not data:
        return "-"
    tokens = f"{data.get('input_tokens', 0):,} in / {data.get('output_tokens', 0):,} out tokens"
    cost = data.get("cost_usd")
    if "counted" in data:  # totals over runs or turns
        counted = data["counted"]
        priced = f"${cost:.6f}" if counted > data.get("unpriced", 0) else ""
        unpriced = f"{data['unpriced']} unpriced" if data.get("unpriced") else ""
        money = " + ".join(p for p in (priced, unpriced) if p) or "$0"
        noun = over if counted != 1 else over.removesuffix("s")
        return f"{tokens} over {counted:,} {noun}, {money}"
    money = "unpriced" if cost is None else f"${cost:.6f}"
    model = f" ({data['model']})" if data.get("model") else ""
    return f"{tokens}, {money}{model}"


_OVERLAP = {
    "defer": "a fire while the last one waits or runs waits its turn",
    "skip": "a fire while the last one waits or runs is skipped",
    "buffer_one": "at most one fire waits while the last one runs; more are skipped",
}
_CATCHUP = {
    "skip": "fires missed while no engine ran are recorded missed",
    "latest": "of the fires missed while no engine ran, the latest runs",
    "all": "every fire missed while no engine ran runs",
}


def _duration(seconds: int) -> str:
    """A whole number of seconds in the largest unit that divides it: "24 h", "90 s"."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


_NOTIFY = {
    "changes": "sends a result only when it differs from the last one sent",
    "never-empty": "sends no empty result",
}


_QUIET = {
    "silent": "in its session's quiet hours it runs, its result never sent",
    "wait": "in its session's quiet hours a fire waits until they end, then runs",
}


def policy(data: dict[str, Any], zone: str) -> str:
    """A job's policy in words, one clause a line."""
    window = _duration(int(data["catchup_window_s"]))
    catchup = _CATCHUP.get(data["catchup"], f"catch-up: {data['catchup']}")
    lines = [
        _OVERLAP.get(data["overlap"], f"overlap: {data['overlap']}"),
        f"{catchup} (within {window})",
        f"paused after {data['max_failures']} failures in a row"
        if data["max_failures"]
        else "never paused for failures",
    ]
    if data.get("max_runs") is not None:
        lines.append(f"ends after {data['max_runs']} runs")
    if data.get("end_at"):
        lines.append(f"ends at {when(data['end_at'], zone)}")
    if data.get("delete_after_run"):
        lines.append("removed once its last fire ends")
    if data.get("jitter"):
        lines.append("fires spread by a small random delay")
    notify = data.get("notify")
    if notify and notify != "always":  # always: as every job did before notify
        lines.append(_NOTIFY.get(notify, f"notify: {notify}"))
    quiet = data.get("quiet")
    if quiet and quiet != "hold":  # hold: it runs, its delivery waits, as a job does by default
        lines.append(_QUIET.get(quiet, f"quiet: {quiet}"))
    if data.get("cadence"):  # none: the agent may not move it, as every job before bounds
        lines.append(cadence(data["cadence"]))
    if data.get("gate"):  # none: every fire runs, as every job before gates
        lines.append(gate(data["gate"]))
    return "\n".join(lines)


def gate(data: dict[str, Any]) -> str:
    """A job's pre-check gate in words: what it asks, how its answer reads, its bounds."""
    kind, target = data.get("kind"), data.get("target")
    if kind == "command":
        words = shlex.join(target) if isinstance(target, list) else str(target)
        asks = f"runs the command {words} (exit 0 runs the fire, 1 skips it)"
    elif kind == "http":
        asks = f"sends a GET to {target} (2xx runs the fire; 204, 304, 404, 409, 412, 423 skip it)"
    else:
        asks = f"calls {target} (a true answer runs the fire, a false one skips it)"
    said = [f"gate: before each fire it {asks}, within {data.get('timeout_s', 10):g} s"]
    if data.get("no_llm"):
        said.append("no LLM: the gate is the whole job")
    if data.get("notice"):
        said.append("a skipped fire leaves a notice in the chat")
    return "; ".join(said)


def cadence(bounds: dict[str, Any]) -> str:
    """A job's cadence bounds in words: how far the agent may move its next run."""
    parts = []
    if bounds.get("min"):
        parts.append(f"at least {bounds['min']}")
    if bounds.get("max"):
        parts.append(f"at most {bounds['max']}")
    ahead = f" {' and '.join(parts)} ahead" if parts else ""
    hours = f", between {bounds['allowed_hours']} local time" if bounds.get("allowed_hours") else ""
    return f"the agent may move its next run{ahead}{hours}"


def _moved(move: dict[str, Any] | None, tz: str) -> str:
    """ ", moved by the agent from ... (why)" while the next run is the agent's move."""
    if not move:
        return ""
    return f" (moved by the agent from {when(move['from_at'], tz)}: {move['reason']})"


def job_detail(console: Console, job: dict[str, Any]) -> None:
    tz = job["tz"]
    _pairs(
        console,
        f"job {job['id']}",
        [
            ("name", job["name"]),
            ("kind", job["kind"]),
            ("session", job["session_key"] or "-"),
            ("schedule", job["schedule"]),
            ("message", job["message"]),
            ("state", _state(job)),
            ("next run", when(job["next_run_at"], tz) + _moved(job.get("moved"), tz)),
            ("last run", when(job["last_run_at"], tz)),
            ("last status", job["last_status"] or "-"),
            ("runs", str(job["run_count"])),
            ("policy", policy(job["policy"], tz)),
            ("trigger", f"on: POST /hooks/jobs/{job['id']}" if job.get("trigger") else "off"),
            ("usage", usage(job.get("usage"), "runs")),
        ],
    )
    console.print("next fires: " + ", ".join(when(f, tz) for f in job.get("upcoming", [])))
    if job.get("runs"):
        console.print(history_table(job["runs"], tz))


def _dollars(usd: float | None) -> str:
    if usd is None:
        return "-"
    return f"${usd:,.2f}" if usd >= 0.01 or usd == 0 else f"${usd:.4f}"


def job_spend(console: Console, spend: dict[str, Any]) -> None:
    """A job's spend against its budget (`agentcron jobs spend`)."""
    state = spend["state"] + (f": {spend['paused_reason']}" if spend["paused_reason"] else "")
    _spend(console, f"spend of job {spend['job_id']} (UTC)", [("state", state)], spend)


def session_spend(console: Console, spend: dict[str, Any]) -> None:
    """A session's spend against its budget, its jobs' fires (`agentcron sessions spend`)."""
    _spend(console, f"spend of session {spend['session_key']}'s jobs (UTC)", [], spend)


def _spend(
    console: Console, title: str, head: list[tuple[str, Any]], spend: dict[str, Any]
) -> None:
    budget = spend.get("budget") or {}
    caps = ", ".join(
        f"{_dollars(v) if k.startswith('usd') else f'{v:,} tokens'} per {k.split('_')[1]}"
        for k, v in budget.items()
        if v is not None
    )
    spent = spend.get("spent")
    rows: list[tuple[str, Any]] = [*head, ("budget", caps or "none")]
    if spent is not None:
        rows += [
            (
                f"today {spent['day']}",
                f"{_dollars(spent['day_usd'])}, {spent['day_tokens']:,} tokens",
            ),
            (
                f"month {spent['month']}",
                f"{_dollars(spent['month_usd'])}, {spent['month_tokens']:,} tokens",
            ),
            (
                "one run",
                f"about {_dollars(spent['est_usd'])}, {spent['est_tokens']:,} tokens "
                f"(mean of {spent['est_runs']} runs)",
            ),
        ]
    _pairs(console, title, rows)
    table = Table(box=None, pad_edge=False)
    for column in ("DAY", "RUNS", "TOKENS", "COST"):
        table.add_column(column)
    for day in spend["days"]:
        tokens = day["input_tokens"] + day["output_tokens"]
        table.add_row(day["day"], str(day["runs"]), f"{tokens:,}", _dollars(day["cost_usd"]))
    console.print(table)


def run_detail(console: Console, run: dict[str, Any], zone: str) -> None:
    rows: list[tuple[str, Any]] = [
        (key, run[key] if not key.endswith("_at") else when(run[key], zone))
        for key in (
            "job_id",
            "session_key",
            "state",
            "fire_at",
            "claimed_at",
            "queued_at",
            "deferred_at",
            "started_at",
            "finished_at",
        )
    ]
    rows += [
        (key, run[key])
        for key in ("prompt_ref", "output", "error", "delivery")
        if run.get(key) is not None
    ]
    if run.get("usage"):
        rows.append(("usage", usage(run["usage"])))
    _pairs(console, f"run {run['id']}", rows)
    if run.get("tool_calls"):
        console.print(f"[bold]tool calls[/bold] ({len(run['tool_calls'])})")
        for tool in run["tool_calls"]:
            took = "" if tool.get("duration_ms") is None else f" {tool['duration_ms']} ms"
            line = (
                f"{'ok' if tool['ok'] else 'FAILED'}{took} {tool['name']}"
                f"({json.dumps(tool['args'])}) -> {tool['result']}"
            )
            console.print(line, markup=False, soft_wrap=True)
    # the prompt and the traceback as they are: no markup, no re-wrapping
    if run.get("prompt"):
        console.print("[bold]rendered prompt[/bold]")
        console.print(run["prompt"], markup=False, soft_wrap=True)
    details = run.get("error_details") or {}
    if details:
        console.print("[bold]error details[/bold]")
        text = details.get("traceback") or json.dumps(details, indent=2)
        console.print(text, markup=False, soft_wrap=True)


def session_detail(console: Console, session: dict[str, Any]) -> None:
    _pairs(
        console,
        f"session {session['key']}",
        [
            ("title", session["title"] or "-"),
            ("channel", session["channel"]),
            ("chat id", session["chat_id"]),
            ("tz", session["tz"]),
            # only when it has them: the output of a session without stays as it was
            *([("quiet hours", session["quiet_hours"])] if session.get("quiet_hours") else []),
            ("running turn", session.get("running_turn") or "-"),
            ("recall", (session.get("recall") or {}).get("schedule", "-")),
            ("usage", usage(session.get("usage"), "turns")),
        ],
    )
    if session.get("automations"):
        console.print(jobs_table(session["automations"]))
    for message in session.get("messages", []):
        first, *more = message["content"].splitlines() or [""]
        console.print(
            f"{message['seq']:>4} {message['role']:<9} {first}{' …' if more else ''}", markup=False
        )


def _args(args: Any, limit: int = 60) -> str:
    text = json.dumps(args, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def approvals_table(approvals: list[dict[str, Any]], zone: str) -> Table:
    table = Table(
        Column("id", no_wrap=True, min_width=36),
        "session",
        "tool",
        "args",
        "state",
        "requested",
        "expires / decided by",
        title=f"{len(approvals)} approval(s)",
    )
    for a in approvals:
        table.add_row(
            a["id"],
            a["session_key"] or "-",
            a["tool"],
            _args(a["args"]),
            a["state"],
            when(a["requested_at"], zone),
            when(a["expires_at"], zone) if a["state"] == "pending" else a["decided_by"] or "-",
            end_section=False,
        )
    return table


def deliveries_table(deliveries: list[dict[str, Any]], zone: str) -> Table:
    table = Table(
        Column("id", no_wrap=True),
        "session",
        "state",
        "attempts",
        "created",
        "delivered / last error",
        title=f"{len(deliveries)} deliveries",
    )
    for d in deliveries:
        delivered = d["state"] == "delivered"
        outcome = when(d["delivered_at"], zone) if delivered else d["last_error"]
        table.add_row(
            d["id"],
            d["session_key"],
            d["state"],
            str(d["attempts"]),
            when(d["created_at"], zone),
            outcome or "-",
            end_section=False,
        )
    return table


def approval_detail(console: Console, approval: dict[str, Any], zone: str) -> None:
    rows: list[tuple[str, Any]] = [
        ("session_key", approval["session_key"] or "-"),
        ("turn_id", approval["turn_id"] or "-"),
        ("tool", approval["tool"]),
        ("args", approval["args"]),
        ("state", approval["state"]),
        ("requested_at", when(approval["requested_at"], zone)),
        ("expires_at", when(approval["expires_at"], zone)),
    ]
    if approval["state"] != "pending":
        rows += [
            ("decision", approval["decision"] or "-"),
            ("decided_by", approval["decided_by"] or "-"),
            ("decided_at", when(approval["decided_at"], zone)),
        ]
    _pairs(console, f"approval {approval['id']}", rows)
