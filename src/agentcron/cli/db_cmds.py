"""`agentcron db`: create or upgrade the database and say what it holds."""

from __future__ import annotations

from typing import Annotated

import typer

from agentcron.cli.backends import CliError
from agentcron.cli.common import DB_HELP, DB_METAVAR, database_flag, echo, fail, run_async
from agentcron.config import DB_ENV, ConfigError
from agentcron.db_target import DATABASE_URL_ENV, configured_db, where

app = typer.Typer(help="The database: create, upgrade, inspect.", no_args_is_help=True)


async def _db_status(url: str) -> tuple[str | None, int, int]:
    from sqlalchemy.exc import SQLAlchemyError

    from agentcron.store.sql import upgrade_and_count

    try:
        return await upgrade_and_count(url)
    except (SQLAlchemyError, OSError) as exc:
        inner = getattr(exc, "orig", None) or exc
        first = (str(inner).strip().splitlines() or [type(inner).__name__])[0]
        raise CliError(f"cannot open the database {where(url)}: {first}") from exc


@app.command("upgrade")
def db_upgrade(
    db: Annotated[
        str | None,
        typer.Option(
            metavar=DB_METAVAR,
            help=f"{DB_HELP} (default: ${DATABASE_URL_ENV}, else ${DB_ENV}, else the data dir).",
        ),
    ] = None,
) -> None:
    """Create the database, or upgrade its schema to the newest revision."""
    url = database_flag(db, None)
    if url is None:
        try:
            url, _ = configured_db()
        except ConfigError as exc:
            raise fail(str(exc), 2) from None
    revision, jobs, runs = run_async(_db_status(url))
    echo(f"{where(url)}: schema at revision {revision} ({jobs} jobs, {runs} runs)")
