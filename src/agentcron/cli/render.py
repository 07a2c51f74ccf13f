"""Rich tables and detail views of the API's JSON records, for the terminal."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Column, Table

from agentcron.schedule.zones import get_zone


def when(value: str | None, tz: str = "UTC") -> str:
    """An ISO instant as local time in `tz` ("-" for none)."""
    if not value:
        return "-"
    instant = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return f"{instant.astimezone(get_zone(tz)):%Y-%m-%d %H:%M:%S} {tz}"


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


def runs_table(runs: list[dict[str, Any]]) -> Table:
    table = Table(
        _id("id"), _id("job"), "fire at", "state", "finished", "error", title=f"{len(runs)} run(s)"
    )
    for run in runs:
        table.add_row(
            run["id"],
            run["job_id"],
            when(run["fire_at"]),
            run["state"],
            when(run["finished_at"]),
            (run["error"] or "")[:60],
        )
    return table


def history_table(runs: list[dict[str, Any]], tz: str = "UTC") -> Table:
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
            run["state"],
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


def sessions_table(sessions: list[dict[str, Any]]) -> Table:
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
            when(s["updated_at"]),
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


def usage(data: dict[str, Any] | None) -> str:
    """Tokens and cost in one line; a cost no price table knows says "unpriced", never $0."""
    if not data:
        return "-"
    tokens = f"{data.get('input_tokens', 0):,} in / {data.get('output_tokens', 0):,} out tokens"
    cost = data.get("cost_usd")
    if "counted" in data:  # totals over runs or turns
        priced = f"${cost:.6f}" if data.get("counted", 0) > data.get("unpriced", 0) else ""
        unpriced = f"{data['unpriced']} unpriced" if data.get("unpriced") else ""
        money = " + ".join(p for p in (priced, unpriced) if p) or "$0"
        return f"{data['counted']} counted, {tokens}, {money}"
    money = "unpriced" if cost is None else f"${cost:.6f}"
    model = f" ({data['model']})" if data.get("model") else ""
    return f"{tokens}, {money}{model}"


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
            ("next run", when(job["next_run_at"], tz)),
            ("last run", when(job["last_run_at"], tz)),
            ("last status", job["last_status"] or "-"),
            ("runs", str(job["run_count"])),
            ("policy", job["policy"]),
            ("usage", usage(job.get("usage"))),
        ],
    )
    console.print("next fires: " + ", ".join(when(f, tz) for f in job.get("upcoming", [])))
    if job.get("runs"):
        console.print(runs_table(job["runs"]))


def run_detail(console: Console, run: dict[str, Any]) -> None:
    rows: list[tuple[str, Any]] = [
        (key, run[key] if not key.endswith("_at") else when(run[key]))
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
            ("running turn", session.get("running_turn") or "-"),
            ("recall", (session.get("recall") or {}).get("schedule", "-")),
            ("usage", usage(session.get("usage"))),
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


def approvals_table(approvals: list[dict[str, Any]]) -> Table:
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
            when(a["requested_at"]),
            when(a["expires_at"]) if a["state"] == "pending" else a["decided_by"] or "-",
            end_section=False,
        )
    return table


def deliveries_table(deliveries: list[dict[str, Any]]) -> Table:
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
        outcome = when(d["delivered_at"]) if d["state"] == "delivered" else d["last_error"]
        table.add_row(
            d["id"],
            d["session_key"],
            d["state"],
            str(d["attempts"]),
            when(d["created_at"]),
            outcome or "-",
            end_section=False,
        )
    return table


def approval_detail(console: Console, approval: dict[str, Any]) -> None:
    rows: list[tuple[str, Any]] = [
        ("session_key", approval["session_key"] or "-"),
        ("turn_id", approval["turn_id"] or "-"),
        ("tool", approval["tool"]),
        ("args", approval["args"]),
        ("state", approval["state"]),
        ("requested_at", when(approval["requested_at"])),
        ("expires_at", when(approval["expires_at"])),
    ]
    if approval["state"] != "pending":
        rows += [
            ("decision", approval["decision"] or "-"),
            ("decided_by", approval["decided_by"] or "-"),
            ("decided_at", when(approval["decided_at"])),
        ]
    _pairs(console, f"approval {approval['id']}", rows)
