"""`agentcron jobs`: automations — add, list, show, run now, pause, resume, rm."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentcron.cli import render
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
    more,
    out,
    paged,
    print_json,
)
from agentcron.domain.budgets import ContextMode
from agentcron.domain.jobs import Catchup, JobKind, Overlap
from agentcron.domain.notify import Notify
from agentcron.service.paging import DEFAULT_PAGE

app = typer.Typer(
    help="Automations: add, list, show, run now, pause, resume, rm.", no_args_is_help=True
)


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
    job = call(backend_for(ctx, db, url, api, token), lambda b: b.add_job(body))
    if as_json:
        print_json(job)
        return
    echo(
        f"added “{job['name']}”: {job['schedule']}; next run "
        f"{render.when(job['next_run_at'], job['tz'])}; id {job['id']}"
    )


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
