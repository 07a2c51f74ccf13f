"""Internal: the `agentcron` command line (typer + rich): an edge that translates, holding no logic.

One module per command group (`*_cmds.py`), sharing `common.py`; the command line is theirs joined.

Public names: none; the commands are the interface (README "Command line").
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentcron.cli import (
    approvals_cmds,
    config_cmds,
    db_cmds,
    deliveries_cmds,
    jobs_cmds,
    mcp_cmds,
    relay_cmds,
    runs_cmds,
    schedule_cmds,
    server_cmds,
    sessions_cmds,
    tools_cmds,
    usage_cmds,
)
from agentcron.cli.common import ZONE_KEY, echo, fail
from agentcron.config import ConfigError, Settings
from agentcron.config.file import CONFIG_ENV, config_path
from agentcron.schedule import ScheduleError
from agentcron.schedule.zones import get_zone
from agentcron.version import __version__

app = typer.Typer(
    help="agentcron: cron for AI agent sessions.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
app.add_typer(jobs_cmds.app, name="jobs")
app.add_typer(runs_cmds.app, name="runs")
app.add_typer(sessions_cmds.app, name="sessions")
app.add_typer(db_cmds.app, name="db")
app.add_typer(config_cmds.app, name="config")
app.add_typer(relay_cmds.app, name="relay")
app.add_typer(tools_cmds.app, name="tools")
app.add_typer(approvals_cmds.app, name="approvals")
app.add_typer(deliveries_cmds.app, name="deliveries")
# The top-level commands (next, examples, demo, serve, token, mcp, usage), in their own modules.
for group in (schedule_cmds.app, server_cmds.app, mcp_cmds.app, usage_cmds.app):
    app.registered_commands += group.registered_commands


def _version(value: bool) -> None:
    if value:
        echo(f"agentcron, version {__version__}")
        raise typer.Exit()


@app.callback()
def main_callback(
    ctx: typer.Context,
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help=f"A TOML configuration file (default: ${CONFIG_ENV}); flags and the "
            "environment win over it.",
            dir_okay=False,
        ),
    ] = None,
    tz: Annotated[
        str | None,
        typer.Option(
            "--tz",
            metavar="ZONE",
            help="The IANA zone times are shown in where no job's zone applies "
            "(default: $TZ, else the machine's zone).",
        ),
    ] = None,
) -> None:
    """agentcron: cron for AI agent sessions."""
    # Read once, before any command: the environment over the file. The commands take their
    # settings from it (`common.settings`); the environment itself is left as it is.
    try:
        ctx.obj = Settings.load(config_path(config))
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    if tz is not None:
        try:
            get_zone(tz)
        except ScheduleError as exc:
            raise fail(str(exc), 2) from None
        ctx.meta[ZONE_KEY] = tz


def main() -> None:
    app()
