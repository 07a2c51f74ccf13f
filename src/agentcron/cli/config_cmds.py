"""`agentcron config`: the effective configuration and its sources, an example file."""

from __future__ import annotations

from typing import Any

import typer

from agentcron.cli.common import JsonOpt, echo, fail, print_json, settings
from agentcron.config import ConfigError, Settings
from agentcron.config.database import backend_name, describe, where
from agentcron.config.file import CONFIG_ENV, SETTINGS, dump_example
from agentcron.config.settings import effective_json

app = typer.Typer(
    help="The configuration: what is in effect, an example file.", no_args_is_help=True
)


def _database(config: Settings) -> dict[str, Any]:
    """The database `serve` and `db upgrade` use without a --db flag, and where that came from."""
    try:
        target = config.database()
    except ConfigError as exc:
        raise fail(str(exc), 2) from None
    url, env = target.url, target.env
    setting = next((s.key for s in SETTINGS if s.env == env), None)
    return {
        "backend": backend_name(url),
        "database": where(url),  # a file's path, else the URL without its password
        "describe": describe(url),
        "source": config.source(env),
        "setting": setting,
        "env": env,
    }


@app.command("show")
def config_show(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Print the effective configuration: the database in use and where it came from, then each
    setting, its value and where it came from (env, file or default); secrets masked.
    """
    config = settings(ctx)
    rows = config.effective()
    db = _database(config)
    path = config.file
    if as_json:
        print_json(
            {
                "config": None if path is None else str(path),
                "database": db,
                "settings": effective_json(rows),
            }
        )
        return
    echo(f"configuration file: {path if path is not None else f'none (--config or ${CONFIG_ENV})'}")
    named = "" if db["env"] is None else f": {db['setting']}, ${db['env']}"
    echo(f"database: {db['describe']}  ({db['source']}{named})")
    width = max(len(r.setting.key) for r in rows)
    for row in rows:
        echo(f"{row.setting.key:<{width}}  {row.source:<7}  {row.value}")


@app.command("example")
def config_example() -> None:
    """Print an example configuration file with every setting, commented out."""
    echo(dump_example(), nl=False)
