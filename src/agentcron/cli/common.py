"""What every command group of the CLI shares: output, errors, the backend options."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from agentcron.cli.backends import ApiBackend, Backend, CliError, DbBackend, PageAsk
from agentcron.config import ConfigError, Settings
from agentcron.config.agent import TOOLS_FILE_ENV
from agentcron.config.database import db_url
from agentcron.config.server import DEFAULT_API, URL_ENV
from agentcron.service.paging import MAX_PAGE

_T = TypeVar("_T")

TABLE_WIDTH = 160  # when stdout is not a terminal (pipes, tests): wide, fixed, no surprises
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def out() -> Console:
    """Tables and detail views: the terminal's width, or TABLE_WIDTH when not a terminal."""
    tty = sys.stdout.isatty()
    return Console(width=None if tty else TABLE_WIDTH, highlight=False, emoji=False)


def echo(text: str = "", nl: bool = True) -> None:
    """Plain lines, exactly as written (what `demo`, `serve`, `next` print)."""
    typer.echo(text, nl=nl)


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"error: {message}", markup=False)
    return typer.Exit(code)


def settings(ctx: typer.Context) -> Settings:
    """The settings the command line read once at start-up (`--config`, the environment:
    `main_callback`); read from the environment alone when a command runs without it.
    """
    found = ctx.find_root().obj
    return found if isinstance(found, Settings) else Settings.load()


ZONE_KEY = "agentcron.tz"  # ctx.meta: the zone `agentcron --tz ZONE` names


def local_zone(ctx: typer.Context) -> str:
    """The zone times are shown in where no job's zone applies: `agentcron --tz ZONE`, else
    $TZ (`[cli] tz`), else the machine's zone; never an unnamed one.
    """
    given = ctx.meta.get(ZONE_KEY)
    return given if isinstance(given, str) else settings(ctx).cli().tz


def run_async(coro: Awaitable[_T]) -> _T:
    try:
        return asyncio.run(coro)  # type: ignore[arg-type]
    except CliError as exc:
        raise fail(str(exc)) from None


# -- options shared by the resource commands -------------------------------------------------

_DIRECT = (
    "instead of a server's API (a server running on it hears of changes made this way at once)"
)
DB_HELP = "A SQLite file or a database URL (sqlite:///path, postgresql://user@host/db)"
DB_METAVAR = "FILE|URL"
DbOpt = Annotated[
    str | None,
    typer.Option("--db", metavar=DB_METAVAR, help=f"{DB_HELP}: use it directly, {_DIRECT}."),
]
UrlOpt = Annotated[str | None, typer.Option("--url", help="Deprecated: --db takes URLs too.")]
ApiOpt = Annotated[
    str | None,
    typer.Option("--api", help=f"The server's URL (default: ${URL_ENV}, else {DEFAULT_API})."),
]
TokenOpt = Annotated[
    str | None,
    typer.Option("--token", help="API token (default: $AGENTCRON_TOKEN, else the token file)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the JSON record(s) instead.")]
ToolsFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--tools",
        # no square brackets: the help is rendered as rich markup, which takes "[tools]" for a tag
        help="A TOML file whose `tools` table gives the agent's tools "
        f"(default: ${TOOLS_FILE_ENV}, else the `tools` table of the configuration file).",
        dir_okay=False,
    ),
]


def database_flag(db: str | None, url: str | None) -> str | None:
    """The database `--db` (or the deprecated `--url`) names, as a SQLAlchemy URL; None when
    neither is given. A value that is neither a file path nor an accepted URL, or both flags,
    is a usage error (exit 2).
    """
    if url is not None:
        err.print("warning: --url is deprecated: --db takes URLs too", markup=False)
        if db is not None:
            raise fail("give --db or --url, not both", 2)
    flag, value = ("--url", url) if url is not None else ("--db", db)
    if value is None:
        return None
    try:
        return db_url(value, flag)
    except ConfigError as exc:
        raise fail(str(exc), 2) from None


def backend_for(
    ctx: typer.Context,
    db: str | None,
    url: str | None,
    api: str | None,
    token: str | None,
    *,
    create: bool = False,
) -> Backend:
    """The database when --db (or --url) is given, else the API of a running server. Only
    `create` commands make a new SQLite file; the others say there is none (a typo, usually).
    """
    target = database_flag(db, url)
    config = settings(ctx)
    if target is not None:
        return DbBackend(target, create=create, settings=config)
    from agentcron.tokens import read_token

    data = config.data()
    return ApiBackend(config.cli(url=api).url, token or read_token(data.dir, given=data.token))


def call(
    backend: Backend, action: Callable[[Backend], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with backend:
            return await action(backend)

    return run_async(go())


def print_json(data: Any) -> None:
    echo(json.dumps(data, indent=2, ensure_ascii=False))


# -- lists in pages ----------------------------------------------------------------------------

LimitOpt = Annotated[
    int, typer.Option("--limit", min=1, max=MAX_PAGE, help="At most this many on a page.")
]
CursorOpt = Annotated[
    str | None,
    typer.Option("--cursor", help="Go on after the page a command ended with (its `more:` line)."),
]
AllOpt = Annotated[bool, typer.Option("--all", help="Every page, not only the first.")]


def paged(
    backend: Backend,
    fetch: Callable[[Backend, PageAsk], Awaitable[dict[str, Any]]],
    name: str,
    first: PageAsk,
    every: bool,
) -> tuple[list[dict[str, Any]], str | None]:
    """The records of list `name` on the page `first` asks for (with `every`: on it and all
    the pages after it), and the cursor of the page after them (None: no more).
    """

    async def go() -> tuple[list[dict[str, Any]], str | None]:
        found: list[dict[str, Any]] = []
        ask = first
        async with backend:
            while True:
                data = await fetch(backend, ask)
                found.extend(data[name])
                cursor = data.get("next_cursor")
                if not every or cursor is None:
                    return found, cursor
                ask = replace(ask, cursor=cursor)

    return run_async(go())


def more(cursor: str | None) -> None:
    """Tell (on stderr, so --json stays one document) how to read the next page."""
    if cursor is not None:
        err.print(f"more: --cursor {cursor} (or --all)", markup=False)
