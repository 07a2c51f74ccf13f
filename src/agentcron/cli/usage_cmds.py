"""`agentcron usage`: tokens, cost, runs and turns per day, per session and per job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from agentcron.cli import render
from agentcron.cli.backends import UsageQuery
from agentcron.cli.common import (
    ApiOpt,
    DbOpt,
    JsonOpt,
    TokenOpt,
    UrlOpt,
    backend_for,
    call,
    fail,
    out,
    print_json,
)
from agentcron.schedule.errors import ScheduleError
from agentcron.schedule.zones import get_zone
from agentcron.service.runs import MAX_USAGE_DAYS

app = typer.Typer()


@app.command("usage")
def usage(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option(help="Only this session's.")] = None,
    job: Annotated[str | None, typer.Option(help="Only this job's runs (its id).")] = None,
    days: Annotated[
        int, typer.Option(help="The last N days, today included.", min=1, max=MAX_USAGE_DAYS)
    ] = 7,
    until: Annotated[
        datetime | None,
        typer.Option(formats=["%Y-%m-%d"], help="The last day (default: today in --tz)."),
    ] = None,
    tz: Annotated[str, typer.Option(help="The zone the days are in.")] = "UTC",
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Tokens, cost, runs and turns per day, per session and per job (a person's own turns:
    job "-"), with the totals.
    """
    try:
        zone = get_zone(tz)
    except ScheduleError as exc:
        raise fail(str(exc), 2) from None
    last = datetime.now(UTC).astimezone(zone).date() if until is None else until.date()
    first = last - timedelta(days=days - 1)
    query = UsageQuery(session=session, job=job, since=first, until=last, tz=tz)
    data = call(backend_for(ctx, db, url, api, token), lambda b: b.usage(query))
    if as_json:
        print_json(data)
        return
    out().print(render.usage_table(data))
