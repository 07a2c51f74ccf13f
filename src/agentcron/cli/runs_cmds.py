"""`agentcron runs`: the run records of fires."""

from __future__ import annotations

from typing import Annotated

import typer

from agentcron.cli import render
from agentcron.cli.common import (
    ApiOpt,
    DbOpt,
    JsonOpt,
    TokenOpt,
    UrlOpt,
    backend_for,
    call,
    fail,
    local_zone,
    out,
    print_json,
)

app = typer.Typer(help="Run records of fires.", no_args_is_help=True)


@app.command("list")
def runs_list(
    ctx: typer.Context,
    job: Annotated[str | None, typer.Option(help="A job's runs.")] = None,
    session: Annotated[str | None, typer.Option(help="A session's runs.")] = None,
    limit: Annotated[
        int, typer.Option(help="At most this many, newest first.", min=1, max=1000)
    ] = 20,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run records, newest first."""
    if (job is None) == (session is None):
        raise fail("give exactly one of --job ID or --session KEY", 2)
    data = call(backend_for(ctx, db, url, api, token), lambda b: b.list_runs(job, session, limit))
    if as_json:
        print_json(data["runs"])
        return
    out().print(render.runs_table(data["runs"], local_zone(ctx)))


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
