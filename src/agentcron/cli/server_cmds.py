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
    settings,
)
from agentcron.config import ConfigError
from agentcron.config.database import DATABASE_URL_ENV, DB_ENV
from agentcron.config.server import (
    DEFAULT_HOST,
    DEFAULT_LOG_LEVEL,
    DEFAULT_PORT,
    HOST_ENV,
    LOG_LEVEL_ENV,
    PORT_ENV,
)
from agentcron.config.wake import WAKE_ENV

app = typer.Typer()  # its commands join the top level
DEMO_DB = "demo.db"  # `agentcron demo`'s own database: the demo writes nothing into serve's


@app.command()
def demo(
    ctx: typer.Context,
    sentence: Annotated[
        str, typer.Option("--say", help="What you tell the offline agent.")
    ] = "remind me in 10 seconds to stretch",
    db: Annotated[
        str | None,
        typer.Option(
            metavar=DB_METAVAR,
            help=f"{DB_HELP} (default: {DEMO_DB} in the data dir, apart from the database "
            "`serve` uses: the demo writes into that one only when --db names it).",
        ),
    ] = None,
    wps: Annotated[
        float | None,
        typer.Option(help="Words per second of the offline model's replies (0 = no delay)."),
    ] = None,
) -> None:
    """Chat with the offline agent in the terminal: it schedules a reminder that comes back."""
    from agentcron.demo import run_demo

    config = settings(ctx)
    url = database_flag(db, None) or config.data().dir / DEMO_DB
    code = asyncio.run(run_demo(url, sentence, echo, wps, config))
    if code:
        raise typer.Exit(code)


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[
        str | None,
        typer.Option(
            help=f"Address to bind (default: ${HOST_ENV}, else {DEFAULT_HOST}: local only)."
        ),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help=f"Port (default: ${PORT_ENV}, else {DEFAULT_PORT}).")
    ] = None,
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
    runner_url: Annotated[
        str | None,
        typer.Option(
            help="Your own agent over HTTP runs every turn (default: $AGENTCRON_RUNNER_URL, "
            "else the built-in agent)."
        ),
    ] = None,
    unified: Annotated[
        bool | None,
        typer.Option("--unified/--no-unified", help="Web-chat automations share one session."),
    ] = None,
    demo: Annotated[
        bool, typer.Option(help="Start a chat where the agent schedules a reminder.")
    ] = False,
    log_level: Annotated[
        str | None,
        typer.Option(
            help=f"uvicorn log level (default: ${LOG_LEVEL_ENV}, else {DEFAULT_LOG_LEVEL})."
        ),
    ] = None,
    wake: Annotated[
        str | None,
        typer.Option(
            help="What wakes the engine: local (timer) or managed (a signed webhook from the "
            f"relay or a seed-002 service, `wake.service`) (default: ${WAKE_ENV}, else local).",
        ),
    ] = None,
    tools: ToolsFileOpt = None,
) -> None:
    """Run the engine, the agent, the channels, the API, the live stream and the web UI."""
    from agentcron.server.serve import ListenError, ServeOptions, run

    # A flag wins over $AGENTCRON_DATABASE_URL, which wins over $AGENTCRON_DB (env or file).
    config = settings(ctx)
    target = database_flag(db, url)
    try:
        target = target or config.database().url
        bound = config.server(host=host, port=port, log_level=log_level)
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    options = ServeOptions(
        host=bound.host,
        port=bound.port,
        url=target,
        model=model,
        runner_url=runner_url,
        unified_session=unified,
        demo=demo,
        log_level=bound.log_level,
        wake=wake,
        tools=config.tools_file(tools),
        settings=config,
    )
    try:
        run(options, echo)
    except ConfigError as exc:  # a setting from the environment or the file is not usable
        raise fail(str(exc), 2) from None
    except ListenError as exc:  # nothing was created: said before the URL and the token
        raise fail(str(exc)) from None


@app.command()
def token(
    ctx: typer.Context,
    hook: Annotated[bool, typer.Option("--hook", help="The inbound hook's token.")] = False,
    runner: Annotated[
        bool,
        typer.Option("--runner", help="The secret your agent over HTTP checks signatures with."),
    ] = False,
    mcp: Annotated[
        bool,
        typer.Option("--mcp", help="A token for /mcp bound to one session (with --session)."),
    ] = False,
    session: Annotated[
        str | None, typer.Option("--session", help="The session an --mcp token is bound to.")
    ] = None,
) -> None:
    """Print the API token (created on first use; the server prints it at start-up too), the
    hook's, the runner secret (your agent over HTTP checks signatures with it), or an MCP
    token bound to one session (made from the API token: a new API token revokes them all).
    """
    from agentcron.errors import InvalidInputError
    from agentcron.session_keys import check_session_key
    from agentcron.tokens import (
        HOOK_TOKEN_ENV,
        HOOK_TOKEN_FILE,
        RUNNER_SECRET_ENV,
        RUNNER_SECRET_FILE,
        TOKEN_ENV,
        TOKEN_FILE,
        load_or_create_token,
        mcp_token,
        new_runner_secret,
    )

    config = settings(ctx)
    data = config.data()
    if runner:
        given = config.runner().secret
        echo(
            load_or_create_token(
                data.dir, RUNNER_SECRET_FILE, RUNNER_SECRET_ENV, given=given, make=new_runner_secret
            )
        )
        return
    if mcp != (session is not None):
        raise fail("--mcp and --session go together: agentcron token --mcp --session KEY", 2)
    if hook and mcp:
        raise fail("give --hook or --mcp, not both", 2)
    if session is not None:
        try:
            key = check_session_key(session)
        except InvalidInputError as exc:
            raise fail(str(exc), 2) from None
        echo(mcp_token(load_or_create_token(data.dir, given=data.token), key))
        return
    name, env = (HOOK_TOKEN_FILE, HOOK_TOKEN_ENV) if hook else (TOKEN_FILE, TOKEN_ENV)
    given = data.hook_token if hook else data.token
    echo(load_or_create_token(data.dir, name, env, given=given))
