"""`agentcron db`: create or upgrade the database and say what it holds."""

from __future__ import annotations

from typing import Annotated

import typer

from agentcron.cli.backends import CliError
from agentcron.cli.common import (
    DB_HELP,
    DB_METAVAR,
    database_flag,
    echo,
    fail,
    run_async,
    settings,
)
from agentcron.config import ConfigError
from agentcron.config.database import DATABASE_URL_ENV, DB_ENV, where

app = typer.Typer(help="The database: create, upgrade, inspect.", no_args_is_help=True)


async def _db_status(url: str) -> tuple[str | None, int, int]:
    from sqlalchemy.exc import SQLAlchemyError

    from agentcron.store.errors import StoreUnavailableError
    from agentcron.store.sql import upgrade_and_count

    try:
        return await upgrade_and_count(url)
    except StoreUnavailableError as exc:
        raise CliError(f"cannot open the database {where(url)}: {exc.reason}") from exc
    except (SQLAlchemyError, OSError) as exc:
        inner = getattr(exc, "orig", None) or exc
        first = (str(inner).strip().splitlines() or [type(inner).__name__])[0]
        raise CliError(f"cannot open the database {where(url)}: {first}") from exc


@app.command("upgrade")
def db_upgrade(
    ctx: typer.Context,
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
            url = settings(ctx).database().url
        except ConfigError as exc:
            raise fail(str(exc), 2) from None
    revision, jobs, runs = run_async(_db_status(url))
    echo(f"{where(url)}: schema at revision {revision} ({jobs} jobs, {runs} runs)")
