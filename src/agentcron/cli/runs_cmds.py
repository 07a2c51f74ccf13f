"""`agentcron runs`: the run records of fires."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Annotated

import typer

from agentcron.cli import render
from agentcron.cli.backends import PageAsk, RunQuery
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
    fail,
    local_zone,
    more,
    out,
    paged,
    print_json,
)
from agentcron.domain.states import RunState
from agentcron.schedule.errors import ScheduleError
from agentcron.schedule.zones import get_zone

app = typer.Typer(help="Run records of fires.", no_args_is_help=True)


@app.command("list")
def runs_list(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Option(help="Only this job's runs (its id).")] = None,
    session: Annotated[str | None, typer.Option(help="Only this session's runs.")] = None,
    state: Annotated[
        list[RunState] | None, typer.Option(help="Only runs in this state (repeat for several).")
    ] = None,
    since: Annotated[
        datetime | None,
        typer.Option(
            formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"],
            help="Only runs fired at or after this time (a day or a time, in --tz).",
        ),
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option(
            help="The zone of the times shown and of --since (default: the local zone, "
            "`agentcron --tz`, $TZ or the machine's)."
        ),
    ] = None,
    limit: LimitOpt = 20,
    cursor: CursorOpt = None,
    every: AllOpt = False,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run records, newest first, across jobs (or of one job or session): job names, fire
    times, states, durations, tokens and cost.
    """
    zone_name = tz or local_zone(ctx)
    try:
        zone = get_zone(zone_name)
    except ScheduleError as exc:
        raise fail(str(exc), 2) from None
    query = RunQuery(
        job=job,
        session=session,
        states=tuple(state or ()),
        since=None if since is None else since.replace(tzinfo=zone),
        page=PageAsk(limit=limit, cursor=cursor),
    )
    runs, next_cursor = paged(
        backend_for(ctx, db, url, api, token),
        lambda b, page: b.list_runs(replace(query, page=page)),
        "runs",
        query.page,
        every,
    )
    if as_json:
        print_json(runs)
    else:
        out().print(render.history_table(runs, zone_name))
    more(next_cursor)


@app.command("show")
def runs_show(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run's id.")],
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The full run record: states, rendered prompt, output, error details, usage."""
    run = call(backend_for(ctx, db, url, api, token), lambda b: b.get_run(run_id))
    if as_json:
        print_json(run)
        return
    render.run_detail(out(), run, local_zone(ctx))
