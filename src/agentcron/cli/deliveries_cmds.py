"""`agentcron deliveries`: what the channels did with the replies; re-send a failed one."""

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
    echo,
    local_zone,
    out,
    print_json,
)
from agentcron.domain.deliveries import DeliveryState

app = typer.Typer(
    help="Delivery records of the channels: list them, re-send a failed one.",
    no_args_is_help=True,
)


@app.command("list")
def deliveries_list(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option(help="One session's (default: all).")] = None,
    state: Annotated[
        DeliveryState | None, typer.Option(help="pending, delivered or failed.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=200, help="At most this many.")] = 50,
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delivery records, newest first: each reply on each channel, its state and last error."""
    backend = backend_for(ctx, db, url, api, token)
    data = call(backend, lambda b: b.list_deliveries(session, state, limit))
    if as_json:
        print_json(data["deliveries"])
        return
    out().print(render.deliveries_table(data["deliveries"], local_zone(ctx)))


@app.command("retry")
def deliveries_retry(
    ctx: typer.Context,
    delivery_id: Annotated[
        str, typer.Argument(metavar="ID", help="The delivery's id: channel:message_id.")
    ],
    db: DbOpt = None,
    url: UrlOpt = None,
    api: ApiOpt = None,
    token: TokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Re-send a failed delivery without running the agent again.

    Through the API the server's channel sends it at once. With --db the record is pending
    again, with a fresh deadline: a server running that channel on this database sends it
    when it next looks for deliveries left behind (within about three minutes).
    """
    record = call(backend_for(ctx, db, url, api, token), lambda b: b.retry_delivery(delivery_id))
    if as_json:
        print_json(record)
        return
    echo(f"{record['state']} {record['id']} (attempts so far: {record['attempts']})")
