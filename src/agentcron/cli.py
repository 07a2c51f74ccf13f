"""The `agentcron` command line: an edge that translates arguments, holding no scheduling logic."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from agentcron import __version__
from agentcron.config import DB_ENV, default_db_path
from agentcron.schedule import ScheduleError, describe, parse_when, spec_to_json, upcoming
from agentcron.schedule.zones import get_zone

DEMO_PHRASES = (
    "in 30m",
    "tomorrow at 09:00",
    "every weekday at 9 Europe/Berlin",
    "every 2h",
    "0 30 2 * * *",
    "30 2 * * * Europe/Berlin",
    "0 * * * * Australia/Lord_Howe",
)


def _show(text: str, now: datetime, tz: str, count: int) -> None:
    spec = parse_when(text, now, tz)
    zone = get_zone(spec.tz)
    click.echo(f"{text!r}: {describe(spec)}")
    click.echo(f"  spec: {spec_to_json(spec)}")
    for fire in upcoming(spec, now, count):
        click.echo(f"  -> {fire.isoformat()}  ({fire.astimezone(zone):%a %Y-%m-%d %H:%M %Z})")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agentcron")
def main() -> None:
    """agentcron: cron for AI agent sessions."""


@main.command("next")
@click.argument("when", nargs=-1, required=True)
@click.option("--tz", default="UTC", show_default=True, help="IANA zone for wall-clock phrases.")
@click.option("-n", "count", default=5, show_default=True, help="How many fire times to show.")
def next_cmd(when: tuple[str, ...], tz: str, count: int) -> None:
    """Show the spec and next fire times of a WHEN phrase ("every weekday at 9", cron, ...)."""
    try:
        _show(" ".join(when), datetime.now(UTC), tz, count)
    except ScheduleError as exc:
        raise click.UsageError(str(exc)) from exc


@main.command()
@click.option("--tz", default="UTC", show_default=True, help="IANA zone for wall-clock phrases.")
@click.option("-n", "count", default=3, show_default=True, help="Fire times per example.")
def examples(tz: str, count: int) -> None:
    """Print the next fire times of a few example schedules, including a rejected one."""
    now = datetime.now(UTC)
    click.echo(f"now: {now.isoformat()}\n")
    for phrase in DEMO_PHRASES:
        try:
            _show(phrase, now, tz, count)
        except ScheduleError as exc:
            click.echo(f"{phrase!r}: rejected: {exc}")
        click.echo("")


@main.command()
@click.option(
    "--say",
    "sentence",
    default="remind me in 10 seconds to stretch",
    show_default=True,
    help="What you tell the offline agent.",
)
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"SQLite file (default: ${DB_ENV}, else agentcron.db in the user data dir).",
)
@click.option(
    "--wps",
    type=float,
    default=None,
    help="Words per second of the offline model's streamed replies (0 = no delay).",
)
def demo(sentence: str, db_path: Path | None, wps: float | None) -> None:
    """Chat with the offline agent: it schedules a reminder that comes back as a turn."""
    from agentcron.demo import run_demo

    code = asyncio.run(run_demo(db_path or default_db_path(), sentence, click.echo, wps))
    if code:
        raise SystemExit(code)


@main.group()
def db() -> None:
    """The database: create, upgrade, inspect."""


_DB_OPTION = click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=f"SQLite file (default: ${DB_ENV}, else agentcron.db in the user data dir).",
)


async def _db_status(path: Path) -> tuple[str | None, int, int]:
    from agentcron.store.sql import SqlStore, sqlite_url

    store = SqlStore(sqlite_url(path))
    await store.open()
    try:
        return await store.schema_revision(), await store.count_jobs(), await store.count_runs()
    finally:
        await store.close()


@db.command("upgrade")
@_DB_OPTION
def db_upgrade(db_path: Path | None) -> None:
    """Create the database, or upgrade its schema to the newest revision."""
    path = db_path or default_db_path()
    revision, jobs, runs = asyncio.run(_db_status(path))
    click.echo(f"{path}: schema at revision {revision} ({jobs} jobs, {runs} runs)")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
