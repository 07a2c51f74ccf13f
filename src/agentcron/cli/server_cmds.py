"""`agentcron demo`, `serve` and `token`: run the product, and the token to reach it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from agentcron.cli.common import ToolsFileOpt, echo, fail, tools_file
from agentcron.config import DB_ENV, ConfigError, data_dir, default_db_path

app = typer.Typer()  # its commands join the top level


@app.command()
def demo(
    sentence: Annotated[
        str, typer.Option("--say", help="What you tell the offline agent.")
    ] = "remind me in 10 seconds to stretch",
    db: Annotated[
        Path | None,
        typer.Option(help=f"SQLite file (default: ${DB_ENV}, else the data dir).", dir_okay=False),
    ] = None,
    wps: Annotated[
        float | None,
        typer.Option(help="Words per second of the offline model's replies (0 = no delay)."),
    ] = None,
) -> None:
    """Chat with the offline agent in the terminal: it schedules a reminder that comes back."""
    from agentcron.demo import run_demo

    code = asyncio.run(run_demo(db or default_db_path(), sentence, echo, wps))
    if code:
        raise typer.Exit(code)


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option(help="Address to bind (local only by default).", envvar="AGENTCRON_HOST")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port.", envvar="AGENTCRON_PORT")] = 8321,
    db: Annotated[
        Path | None,
        typer.Option(help=f"SQLite file (default: ${DB_ENV}, else the data dir).", dir_okay=False),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(help="A database URL (postgresql://...).", envvar="AGENTCRON_DATABASE_URL"),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model, e.g. openai:gpt-4.1-mini (default: $AGENTCRON_MODEL, offline)."),
    ] = None,
    unified: Annotated[
        bool | None,
        typer.Option("--unified/--no-unified", help="Web-chat automations share one session."),
    ] = None,
    demo: Annotated[
        bool, typer.Option(help="Start a chat where the agent schedules a reminder.")
    ] = False,
    log_level: Annotated[
        str, typer.Option(help="uvicorn log level.", envvar="AGENTCRON_LOG_LEVEL")
    ] = "info",
    wake: Annotated[
        str | None,
        typer.Option(
            help="What wakes the engine: local (timer) or managed (a relay).",
            envvar="AGENTCRON_WAKE",
        ),
    ] = None,
    tools: ToolsFileOpt = None,
) -> None:
    """Run the engine, the agent, the channels, the API, the live stream and the web UI."""
    from agentcron.server.serve import ServeOptions, run

    if db is not None and url is not None:
        source = ctx.get_parameter_source("url")  # typer's own click: compare by name
        if source is None or source.name != "COMMANDLINE":
            url = None  # the --db flag wins over a database URL from the environment or file
        else:
            raise fail("give --db or --url, not both", 2)
    options = ServeOptions(
        host=host,
        port=port,
        db=db,
        url=url,
        model=model,
        unified_session=unified,
        demo=demo,
        log_level=log_level,
        wake=wake,
        tools=tools_file(ctx, tools),
    )
    try:
        run(options, echo)
    except ConfigError as exc:  # a setting from the environment or the file is not usable
        raise fail(str(exc), 2) from None


@app.command()
def token(
    hook: Annotated[bool, typer.Option("--hook", help="The inbound hook's token.")] = False,
) -> None:
    """Print the API token (created on first use; the server prints it at start-up too)."""
    from agentcron.tokens import (
        HOOK_TOKEN_ENV,
        HOOK_TOKEN_FILE,
        TOKEN_ENV,
        TOKEN_FILE,
        load_or_create_token,
    )

    name, env = (HOOK_TOKEN_FILE, HOOK_TOKEN_ENV) if hook else (TOKEN_FILE, TOKEN_ENV)
    echo(load_or_create_token(data_dir(), name, env))
