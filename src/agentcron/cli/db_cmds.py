"""`agentcron db`: create or upgrade the database and say what it holds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentcron.cli.backends import CliError
from agentcron.cli.common import echo, run_async
from agentcron.config import DB_ENV, default_db_path

app = typer.Typer(help="The database: create, upgrade, inspect.", no_args_is_help=True)


async def _db_status(path: Path) -> tuple[str | None, int, int]:
    from sqlalchemy.exc import SQLAlchemyError

    from agentcron.store.sql import sqlite_url, upgrade_and_count

    try:
        return await upgrade_and_count(sqlite_url(path))
    except (SQLAlchemyError, OSError) as exc:
        inner = getattr(exc, "orig", None) or exc
        raise CliError(f"cannot open the database {path}: {inner}") from exc


@app.command("upgrade")
def db_upgrade(
    db: Annotated[
        Path | None,
        typer.Option(help=f"SQLite file (default: ${DB_ENV}, else the data dir).", dir_okay=False),
    ] = None,
) -> None:
    """Create the database, or upgrade its schema to the newest revision."""
    path = db or default_db_path()
    revision, jobs, runs = run_async(_db_status(path))
    echo(f"{path}: schema at revision {revision} ({jobs} jobs, {runs} runs)")
