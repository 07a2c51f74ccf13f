"""`agentcron config`: the effective configuration and its sources, an example file."""

from __future__ import annotations

import os

import typer

from agentcron.cli.common import JsonOpt, echo, print_json
from agentcron.config_file import CONFIG_ENV, dump_example, effective, effective_json

app = typer.Typer(
    help="The configuration: what is in effect, an example file.", no_args_is_help=True
)


@app.command("show")
def config_show(
    ctx: typer.Context,
    as_json: JsonOpt = False,
) -> None:
    """Print the effective configuration: each setting, its value and where it came from
    (env, file or default); secrets masked.
    """
    obj = ctx.obj or {}
    rows = effective(os.environ, obj.get("from_file", set()))
    if as_json:
        print_json(
            {
                "config": None if obj.get("config") is None else str(obj["config"]),
                "settings": effective_json(rows),
            }
        )
        return
    path = obj.get("config")
    echo(f"configuration file: {path if path is not None else f'none (--config or ${CONFIG_ENV})'}")
    width = max(len(r.setting.key) for r in rows)
    for row in rows:
        echo(f"{row.setting.key:<{width}}  {row.source:<7}  {row.value}")


@app.command("example")
def config_example() -> None:
    """Print an example configuration file with every setting, commented out."""
    echo(dump_example(), nl=False)
