"""`agentcron jobs`: automations — add, list, show, update, run now, pause, resume, renew, rm,
trigger; and their standing approvals (`agentcron jobs grant list | add | revoke`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from agentcron.cli import render
from agentcron.cli.approvals_cmds import default_by
from agentcron.cli.backends import Backend, PageAsk
from agentcron.cli.common import (
    AllOpt,
    ApiOpt,
    CursorOpt,
    DbOpt,
    JsonOpt,
    LimitOpt,
    TokenOpt,
    UrlOpt,
    backend_for,
    call,
    echo,
    fail,
    more,
    out,
    paged,
    print_json,
)
from agentcron.domain.budgets import ContextMode
from agentcron.domain.jobs import Catchup, JobKind, Overlap
from agentcron.domain.notify import Notify
from agentcron.domain.quiet import QuietMode
from agentcron.schedule import DstFold, DstGap
from agentcron.service.paging import DEFAULT_PAGE

app = typer.Typer(
    help="Automations: add, list, show, update, run now, pause, resume, renew, rm, trigger.",
    no_args_is_help=True,
)
trigger_app = typer.Typer(
    help="An automation's trigger: a signed event posted to its URL runs it (see "
    "docs/safe-triggers.md). enable and rotate show its secret once.",
    no_args_is_help=True,
)
app.add_typer(trigger_app, name="trigger")

# The agent's cadence bounds past the first (`jobs add`, `jobs update`).
CadenceMaxOpt = Annotated[str | None, typer.Option(help="... and no later than this (6h).")]
AllowedHoursOpt = Annotated[
    str | None,
    typer.Option(help="... and only inside these local hours of its zone (08:00-20:00)."),
]
DstGapOpt = Annotated[
    DstGap | None,
    typer.Option(
        help="On a day the clocks skip its time of day (DST starts): shift (default: it runs "
        "at the first time after) or skip (not that day)."
    ),
]
DstFoldOpt = Annotated[
    DstFold | None,
    typer.Option(
        help="On a day the clocks repeat its time of day (DST ends): first (default), last or both."
    ),
]


@app.command("add")
def jobs_add(
    ctx: typer.Context,
    session: Annotated[str, typer.Option(help="The session it belongs to, e.g. websocket:abc.")],
    name: Annotated[str, typer.Option(help="A short name.")],
    message: Annotated[str, typer.Option(help="What the agent should do when it fires.")],
    when: Annotated[str, typer.Option(help='"in 30m", "every weekday at 9", "0 9 * * 1-5", ...')],
    tz: Annotated[str | None, typer.Option(help="IANA zone (default: the session's).")] = None,
    overlap: Annotated[
        Overlap | None, typer.Option(help="A fire while the previous one waits or runs.")
    ] = None,
    catchup: Annotated[
        Catchup | None, typer.Option(help="Fires that came due while no engine ran.")
    ] = None,
    max_runs: Annotated[int | None, typer.Option(help="End after this many runs.", min=1)] = None,
    idempotency_key: Annotated[str | None, typer.Option(help="Create at most once.")] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Its turns' model, e.g. \"openai:gpt-4o\" (default: the agent's)."),
    ] = None,
    runner_url: Annotated[
        str | None,
        typer.Option(
            help="Your own agent's http(s) URL its fires run on (default: the session's runner)."
        ),
    ] = None,
    delete_after_run: Annotated[
        bool,
        typer.Option(
            "--delete-after-run/--keep",
            help="Remove it once its last fire ends, or keep it listed as done (the default) "
            "for the retention age.",
        ),
    ] = False,
    notify: Annotated[
        Notify | None,
        typer.Option(
            help="When its outcomes are delivered: always (default), changes, never-empty; "
            "a reply starting with [SILENT] never is."
        ),
    ] = None,
    quiet: Annotated[
        QuietMode | None,
        typer.Option(
            help="In its session's quiet hours: hold its delivery until they end (default), "
            "run silent, or wait to run until they end."
        ),
    ] = None,
    dst_gap: DstGapOpt = None,
    dst_fold: DstFoldOpt = None,
    cadence_min: Annotated[
        str | None,
        typer.Option(help="The agent may move its next run no sooner than this from then (30m)."),
    ] = None,
    cadence_max: CadenceMaxOpt = None,
    allowed_hours: AllowedHoursOpt = None,
    gate: Annotated[
        str | None,
        typer.Option(
            help='A pre-check run before the agent, as JSON: {"kind": "command", "target": '
            '["./check.sh"]}, kind command|http|python (docs/safe-quiet-and-gates.md).'
        ),
    ] = None,
    budget_usd_run: Annotated[
        float | None, typer.Option(help="Budget: dollars per run (its estimate).", min=0)
    ] = None,
    budget_usd_day: Annotated[
        float | None, typer.Option(help="Budget: dollars per UTC day.", min=0)
    ] = None,
    budget_usd_month: Annotated[
        float | None, typer.Option(help="Budget: dollars per UTC month.", min=0)
    ] = None,
    budget_tokens_run: Annotated[
        int | None, typer.Option(help="Budget: tokens per run (its estimate).", min=1)
    ] = None,
    budget_tokens_day: Annotated[
        int | None, typer.Option(help="Budget: tokens per UTC day.", min=1)
    ] = None,
    budget_tokens_month: Annotated[
        int | None, typer.Option(help="Budget: tokens per UTC month.", min=1)
    ] = None,
    context: Annotated[
        ContextMode | None,
        typer.Option(
            help="The history its turns get: continue (default), summary (the session's "
            "latest summary), fresh (none)."
        ),
    ] = None,
    history_tokens: Annotated[
        int | None, typer.Option(help="Its turns' history budget in tokens.", min=1)
    ] = None,
    tools: Annotated[
        str | None,
        typer.Option(help="The only tools its turns may use, comma-separated (default: all)."),
    ] = None,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add an automation to a session."""
    body: dict[str, Any] = {"session_key": session, "name": name, "message": message, "when": when}
    optional = {
        "tz": tz,
        "overlap": overlap,
        "catchup": catchup,
        "max_runs": max_runs,
        "idempotency_key": idempotency_key,
        "model": model,
        "runner_url": runner_url,
        "notify": notify,
        "quiet": quiet,
        "dst_gap": dst_gap,
        "dst_fold": dst_fold,
        "context": context,
        "history_tokens": history_tokens,
        "tools": None if tools is None else [t.strip() for t in tools.split(",") if t.strip()],
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    caps = {
        "usd_run": budget_usd_run,
        "usd_day": budget_usd_day,
        "usd_month": budget_usd_month,
        "tokens_run": budget_tokens_run,
        "tokens_day": budget_tokens_day,
        "tokens_month": budget_tokens_month,
    }
    if any(v is not None for v in caps.values()):
        body["budget"] = {k: v for k, v in caps.items() if v is not None}
    if delete_after_run:
        body["delete_after_run"] = True
    cadence = {"min": cadence_min, "max": cadence_max, "allowed_hours": allowed_hours}
    if any(v is not None for v in cadence.values()):
        body["cadence"] = {k: v for k, v in cadence.items() if v is not None}
    if gate is not None:
        body["gate"] = _gate_json(gate)
    job = call(backend_for(ctx, db, url, api, token), lambda b: b.add_job(body))
    if as_json:
        print_json(job)
        return
    echo(
        f"added “{job['name']}”: {job['schedule']}; next run "
        f"{render.when(job['next_run_at'], job['tz'])}; id {job['id']}"
    )


def _gate_json(text: str) -> Any:
    """`--gate`'s JSON (its fields are checked by the request, as the API's)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"--gate: not JSON ({exc.msg})", 2) from exc


@app.command("list")
def jobs_list(
    ctx: typer.Context,
    session: Annotated[
        str | None, typer.Option(help="Only this session's (what it shows).")
    ] = None,
    kind: Annotated[JobKind | None, typer.Option(help="Only jobs of this kind.")] = None,
    enabled: Annotated[
        bool | None, typer.Option("--enabled/--disabled", help="Only enabled / paused ones.")
    ] = None,
    limit: LimitOpt = DEFAULT_PAGE,
    cursor: CursorOpt = None,
    every: AllOpt = False,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List automations (and recalls and system jobs), oldest first, a page at a time."""
    kind_value = None if kind is None else kind.value
    jobs, next_cursor = paged(
        backend_for(ctx, db, url, api, token),
        lambda b, page: b.list_jobs(session, kind_value, enabled, page),
        "jobs",
        PageAsk(limit=limit, cursor=cursor),
        every,
    )
    if as_json:
        print_json(jobs)
    else:
        out().print(render.jobs_table(jobs))
    more(next_cursor)


@app.command("show")
def jobs_show(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job's id.")],
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One automation: its schedule, the next 5 fires, the last runs and what it cost."""
    job = call(backend_for(ctx, db, url, api, token), lambda b: b.get_job(job_id))
    if as_json:
        print_json(job)
        return
    render.job_detail(out(), job)


@app.command("update")
def jobs_update(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job's id.")],
    name: Annotated[str | None, typer.Option(help="A new name.")] = None,
    message: Annotated[str | None, typer.Option(help="What it should do from now on.")] = None,
    when: Annotated[
        str | None, typer.Option(help="A new schedule (it keeps its DST policy).")
    ] = None,
    tz: Annotated[str | None, typer.Option(help="A new IANA zone.")] = None,
    notify: Annotated[Notify | None, typer.Option(help="When its outcomes are delivered.")] = None,
    quiet: Annotated[
        QuietMode | None, typer.Option(help="In its session's quiet hours: hold, silent, wait.")
    ] = None,
    dst_gap: DstGapOpt = None,
    dst_fold: DstFoldOpt = None,
    cadence_min: Annotated[
        str | None,
        typer.Option(
            help="The agent may move its next run no sooner than this from then (30m); "
            "the --cadence-* and --allowed-hours given replace its bounds as a whole."
        ),
    ] = None,
    cadence_max: CadenceMaxOpt = None,
    allowed_hours: AllowedHoursOpt = None,
    no_cadence: Annotated[
        bool, typer.Option("--no-cadence", help="Remove its bounds: the agent may not move it.")
    ] = False,
    gate: Annotated[
        str | None,
        typer.Option(
            help='A new pre-check, as JSON: {"kind": "http", "target": "https://..."} '
            "(docs/safe-quiet-and-gates.md)."
        ),
    ] = None,
    no_gate: Annotated[bool, typer.Option("--no-gate", help="Remove its gate.")] = False,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Change an automation: what is given, the rest kept."""
    given = {
        "name": name,
        "message": message,
        "when": when,
        "tz": tz,
        "notify": notify,
        "quiet": quiet,
        "dst_gap": dst_gap,
        "dst_fold": dst_fold,
    }
    body: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    cadence = {"min": cadence_min, "max": cadence_max, "allowed_hours": allowed_hours}
    bounds = {k: v for k, v in cadence.items() if v is not None}
    if no_cadence and bounds:
        raise fail("--no-cadence removes the bounds: give it alone, or the new bounds", 2)
    if bounds or no_cadence:
        body["cadence"] = bounds or None
    if no_gate and gate is not None:
        raise fail("--no-gate removes the gate: give it or --gate, not both", 2)
    if gate is not None or no_gate:
        body["gate"] = None if no_gate else _gate_json(gate or "")
    if not body:
        raise fail(
            "nothing to change: give --name, --message, --when, --tz, --notify, --quiet, "
            "--dst-gap, --dst-fold, --cadence-min/--cadence-max/--allowed-hours, "
            "--no-cadence, --gate or --no-gate",
            2,
        )
    job = call(backend_for(ctx, db, url, api, token), lambda b: b.update_job(job_id, body))
    if as_json:
        print_json(job)
        return
    echo(
        f"updated “{job['name']}”: {job['schedule']}; next run "
        f"{render.when(job['next_run_at'], job['tz'])}"
    )


@app.command("spend")
def jobs_spend(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job's id.")],
    days: Annotated[int, typer.Option(help="UTC days back, today included.", min=1, max=366)] = 7,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """An automation's spend against its budget: today and this month (UTC), the estimate
    of one run, and its tokens and cost per day.
    """
    spend = call(backend_for(ctx, db, url, api, token), lambda b: b.job_spend(job_id, days))
    if as_json:
        print_json(spend)
        return
    render.job_spend(out(), spend)


@app.command("run")
def jobs_run(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job's id.")],
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run an automation now, once (its schedule does not move; a paused one runs too)."""

    async def named_run(b: Backend) -> dict[str, Any]:
        return {"job": await b.get_job(job_id), "run": await b.run_job(job_id)}

    both = call(backend_for(ctx, db, url, api, token), named_run)
    run = both["run"]
    if as_json:
        print_json(run)
        return
    echo(f"a run of “{both['job']['name']}” asked for; see it: agentcron runs show {run['id']}")


@app.command("renew")
def jobs_renew(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job's id.")],
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            help="The new end (end_at): an ISO 8601 instant with its UTC offset, "
            "e.g. 2027-01-31T18:00:00+01:00.",
        ),
    ] = None,
    runs: Annotated[
        int | None, typer.Option(help="Runs added to its limit (max_runs).", min=1)
    ] = None,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Renew an automation that ends or ended: a later end (--until), more runs (--runs)."""
    body = {k: v for k, v in {"end_at": until, "runs": runs}.items() if v is not None}
    job = call(backend_for(ctx, db, url, api, token), lambda b: b.renew_job(job_id, body))
    if as_json:
        print_json(job)
        return
    ends = job["policy"]["end_at"]
    left = job["remaining_runs"]
    limits = [f"ends {render.when(ends, job['tz'])}"] if ends else []
    if left is not None:
        limits.append(f"{left} run{'s' if left != 1 else ''} left")
    nxt = render.when(job["next_run_at"], job["tz"])
    echo(f"“{job['name']}” renewed: {', '.join(limits) or 'no end'}; next run {nxt}")


def _job_action(job_id: str, action: str, backend: Backend, as_json: bool) -> None:
    async def named_action(b: Backend) -> dict[str, Any]:
        name = (await b.get_job(job_id))["name"] if action == "rm" and not as_json else ""
        return {"name": name, "result": await b.job_action(job_id, action)}

    both = call(backend, named_action)
    result = both["result"]
    if as_json:
        print_json(result)
    elif action == "rm":
        echo(f"removed “{both['name']}”")
    else:
        state = "enabled" if result["enabled"] else result.get("state", "paused")
        nxt = render.when(result["next_run_at"], result["tz"])
        echo(f"“{result['name']}”: {state}; next run {nxt}")


def _action_command(action: str, doc: str) -> None:
    """`agentcron jobs <action> ID`: pause, resume and rm take the same options."""

    def command(
        ctx: typer.Context,
        job_id: Annotated[str, typer.Argument(metavar="ID", help="The job's id.")],
        db: DbOpt = None,
        url: UrlOpt = None,
        api: ApiOpt = None,
        token: TokenOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        _job_action(job_id, action, backend_for(ctx, db, url, api, token), as_json)

    command.__doc__ = doc
    command.__name__ = f"jobs_{action}"
    app.command(action)(command)


_action_command("pause", "Pause an automation (no fires until it is resumed).")
_action_command("resume", "Resume an automation from now on.")
_action_command("rm", "Remove an automation (its run records stay until retention).")


grant_app = typer.Typer(
    help="Standing approvals of a job's scheduled runs: list, add, revoke.", no_args_is_help=True
)
app.add_typer(grant_app, name="grant")

JobIdArg = Annotated[str, typer.Argument(metavar="JOB", help="The job's id.")]
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _seconds(text: str) -> int:
    """'90', '30m', '12h', '7d' -> seconds."""
    value = text.strip().lower()
    unit = _UNITS.get(value[-1:])
    number = value[:-1] if unit is not None else value
    if not number.isdigit():
        raise typer.BadParameter(f"a duration like 30m, 12h or 7d, not {text!r}")
    return int(number) * (unit or 1)


def _pattern(pairs: list[str], as_json: str | None) -> dict[str, Any]:
    """--arg NAME=GLOB (each a string glob) and --args JSON (exact values too), merged."""
    pattern: dict[str, Any] = {}
    if as_json is not None:
        try:
            loaded = json.loads(as_json)
        except json.JSONDecodeError as exc:
            raise typer.BadParameter(f"--args is not JSON: {exc.msg}") from exc
        if not isinstance(loaded, dict):
            raise typer.BadParameter("--args must be a JSON object")
        pattern.update(loaded)
    for pair in pairs:
        name, sep, glob = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"--arg takes NAME=GLOB, not {pair!r}")
        pattern[name] = glob
    return pattern


@grant_app.command("list")
def grants_list(
    ctx: typer.Context,
    job_id: JobIdArg,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The job's standing approvals, oldest first (expired ones too, until revoked)."""
    data = call(backend_for(ctx, db, url, api, token), lambda b: b.list_grants(job_id))
    if as_json:
        print_json(data["grants"])
        return
    if not data["grants"]:
        echo("no grants")
    for g in data["grants"]:
        state = "expired" if g["expired"] else f"until {g['expires_at']}"
        pattern = json.dumps(g["args"], ensure_ascii=False)
        echo(f"{g['id']}  {g['tool']} {pattern}  {state}  by {g['granted_by']}")


@grant_app.command("add")
def grants_add(
    ctx: typer.Context,
    job_id: JobIdArg,
    tool: Annotated[str, typer.Argument(help="The one tool it allows, by its exact name.")],
    arg: Annotated[
        list[str] | None,
        typer.Option(
            "--arg", help="NAME=GLOB: that argument must match the glob (repeat for more)."
        ),
    ] = None,
    args_json: Annotated[
        str | None,
        typer.Option(
            "--args", help='The whole pattern as JSON, e.g. \'{"name": "*.log", "dry": false}\'.'
        ),
    ] = None,
    for_: Annotated[
        str | None, typer.Option("--for", help="How long it holds: 30m, 12h, 7d (at most 366d).")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="When it expires: an ISO 8601 time with its offset.")
    ] = None,
    by: Annotated[
        str | None, typer.Option(help="Who grants it (recorded). Default: cli:<user name>.")
    ] = None,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Let the job's scheduled runs call TOOL with matching arguments without waiting for a
    person, until it expires (other calls keep asking).
    """
    if (for_ is None) == (until is None):
        raise typer.BadParameter("give --for or --until (one of them)")
    body: dict[str, Any] = {
        "tool": tool,
        "args": _pattern(arg or [], args_json),
        "by": by or default_by(),
    }
    if for_ is not None:
        body["expires_in_s"] = _seconds(for_)
    else:
        body["expires_at"] = until
    made = call(backend_for(ctx, db, url, api, token), lambda b: b.add_grant(job_id, body))
    if as_json:
        print_json(made)
        return
    echo(f"granted {made['id']}: {made['tool']} until {made['expires_at']}")


@grant_app.command("revoke")
def grants_revoke(
    ctx: typer.Context,
    job_id: JobIdArg,
    grant_id: Annotated[str, typer.Argument(metavar="GRANT", help="The grant's id.")],
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a grant: the calls it allowed wait for a person again."""
    gone = call(backend_for(ctx, db, url, api, token), lambda b: b.revoke_grant(job_id, grant_id))
    if as_json:
        print_json(gone)
        return
    echo(f"revoked {gone['revoked']}")


def _trigger_command(action: str, doc: str) -> None:
    """`agentcron jobs trigger <action> ID`: enable, rotate and disable take the same options."""

    def command(
        ctx: typer.Context,
        job_id: Annotated[str, typer.Argument(metavar="ID", help="The job's id.")],
        db: DbOpt = None,
        url: UrlOpt = None,
        api: ApiOpt = None,
        token: TokenOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        async def named(b: Backend) -> dict[str, Any]:
            name = (await b.get_job(job_id))["name"]
            return {"name": name, "trigger": await b.job_trigger(job_id, action)}

        both = call(backend_for(ctx, db, url, api, token), named)
        trigger = both["trigger"]
        if as_json:
            print_json(trigger)
            return
        if not trigger["enabled"]:
            echo(f"the trigger of “{both['name']}” is off")
            return
        where = trigger["url"] or f"{trigger['path']} on the server's address"
        echo(f"the trigger of “{both['name']}” is on: POST its events to {where}")
        echo(f"secret (shown this once; keep it): {trigger['secret']}")

    command.__doc__ = doc
    command.__name__ = f"jobs_trigger_{action}"
    trigger_app.command(action)(command)


_trigger_command("enable", "Turn an automation's trigger on: its URL and a new secret.")
_trigger_command("rotate", "A new secret for an automation's trigger; the old one is refused.")
_trigger_command("disable", "Turn an automation's trigger off (its events get 404).")
