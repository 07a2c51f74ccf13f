"""`agentcron next` and `agentcron examples`: schedule phrases and their next fires, no server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from agentcron.cli.common import echo, fail
from agentcron.schedule import ScheduleError, describe, parse_when, spec_to_json, upcoming
from agentcron.schedule.zones import get_zone

EXAMPLE_PHRASES = (
    "in 30m",
    "tomorrow at 09:00",
    "every weekday at 9 Europe/Berlin",
    "every 2h",
    "0 30 2 * * *",
    "30 2 * * * Europe/Berlin",
    "0 * * * * Australia/Lord_Howe",
)

app = typer.Typer()  # its commands join the top level


def _show(text: str, now: datetime, tz: str, count: int) -> None:
    spec = parse_when(text, now, tz)
    zone = get_zone(spec.tz)
    echo(f"{text!r}: {describe(spec)}")
    echo(f"  spec: {spec_to_json(spec)}")
    for fire in upcoming(spec, now, count):
        echo(f"  -> {fire.isoformat()}  ({fire.astimezone(zone):%a %Y-%m-%d %H:%M %Z})")


@app.command("next")
def next_cmd(
    when: Annotated[
        list[str],
        typer.Argument(metavar="WHEN", help='A phrase: "every weekday at 9", cron, ...'),
    ],
    tz: Annotated[str, typer.Option(help="IANA zone for wall-clock phrases.")] = "UTC",
    count: Annotated[int, typer.Option("-n", help="How many fire times to show.")] = 5,
) -> None:
    """Show the spec and next fire times of a WHEN phrase."""
    try:
        _show(" ".join(when), datetime.now(UTC), tz, count)
    except ScheduleError as exc:
        raise fail(str(exc), 2) from exc


@app.command()
def examples(
    tz: Annotated[str, typer.Option(help="IANA zone for wall-clock phrases.")] = "UTC",
    count: Annotated[int, typer.Option("-n", help="Fire times per example.")] = 3,
) -> None:
    """Print the next fire times of a few example schedules, including a rejected one."""
    now = datetime.now(UTC)
    echo(f"now: {now.isoformat()}\n")
    for phrase in EXAMPLE_PHRASES:
        try:
            _show(phrase, now, tz, count)
        except ScheduleError as exc:
            echo(f"{phrase!r}: rejected: {exc}")
        echo("")
