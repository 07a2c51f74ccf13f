"""`agentcron mcp --session KEY`: the scheduling tools over MCP on stdin/stdout, for one session."""

from __future__ import annotations

from typing import Annotated

import typer

from agentcron.cli.backends import DbBackend
from agentcron.cli.common import (
    DB_HELP,
    DB_METAVAR,
    database_flag,
    fail,
    run_async,
    settings,
)
from agentcron.config import ConfigError

app = typer.Typer()


@app.command("mcp")
def mcp(
    ctx: typer.Context,
    session: Annotated[
        str,
        typer.Option("--session", help="The session every call is bound to (it must exist)."),
    ],
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            metavar=DB_METAVAR,
            help=f"{DB_HELP} (default: the one `agentcron serve` uses).",
        ),
    ] = None,
) -> None:
    """Serve the scheduling tools (cron, schedule_recall, manage_recall) over MCP on stdio,
    bound to one session: for an MCP client that starts agentcron itself (Claude Desktop and
    the like). A server running on the same database fires what they schedule.
    """
    config = settings(ctx)
    try:
        target = database_flag(db, None) or config.database().url
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    run_async(_serve(DbBackend(target, settings=config), session))


async def _serve(backend: DbBackend, key: str) -> None:
    # Loaded here: the MCP SDK is needed by this command only.
    from mcp.server.stdio import stdio_server

    from agentcron.agent.mcp_server import scheduling_server

    async with backend:
        cron = backend.cron
        key = (await backend.get_session(key))["key"]  # the session must exist (CliError)
        server = scheduling_server(lambda _ctx: cron.session_tool_deps(key))
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
