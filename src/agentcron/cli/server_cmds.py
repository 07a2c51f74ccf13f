"""`agentcron demo`, `serve` and `token`: run the product, and the token to reach it."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from agentcron.cli.common import (
    DB_HELP,
    DB_METAVAR,
    ToolsFileOpt,
    database_flag,
    echo,
    fail,
    tools_file,
)
from agentcron.config import DB_ENV, ConfigError, data_dir
from agentcron.db_target import DATABASE_URL_ENV, configured_db, default_db_url

app = typer.Typer()  # its commands join the top level


@app.command()
def demo(
    sentence: Annotated[
        str, typer.Option("--say", help="What you tell the offline agent.")
    ] = "remind me in 10 seconds to stretch",
    db: Annotated[
        str | None,
        typer.Option(
            metavar=DB_METAVAR, help=f"{DB_HELP} (default: ${DB_ENV}, else the data dir)."
        ),
    ] = None,
    wps: Annotated[
        float | None,
        typer.Option(help="Words per second of the offline model's replies (0 = no delay)."),
    ] = None,
) -> None:
    """Chat with the offline agent in the terminal: it schedules a reminder that comes back."""
    from agentcron.demo import run_demo

    url = database_flag(db, None)
    try:
        url = url or default_db_url()
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    code = asyncio.run(run_demo(url, sentence, echo, wps))
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
        str | None,
        typer.Option(
            metavar=DB_METAVAR,
            help=f"{DB_HELP} (default: ${DATABASE_URL_ENV}, else ${DB_ENV}, else the data dir).",
        ),
    ] = None,
    url: Annotated[str | None, typer.Option(help="Deprecated: --db takes URLs too.")] = None,
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

    # A flag wins over $AGENTCRON_DATABASE_URL, which wins over $AGENTCRON_DB (env or file).
    target = database_flag(db, url)
    try:
        target = target or configured_db()[0]
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    options = ServeOptions(
        host=host,
        port=port,
        url=target,
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
