"""`agentcron next` and `agentcron examples`: schedule phrases and their next fires, no server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from agentcron.cli import render
from agentcron.cli.common import echo, fail, local_zone
from agentcron.schedule import (
    DstFold,
    DstGap,
    ScheduleError,
    describe,
    parse_when,
    spec_to_json,
    upcoming,
    with_dst,
)
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


_TZ_HELP = "IANA zone for wall-clock phrases (default: agentcron --tz, $TZ, the machine's)."


def _now() -> datetime:
    """Now, to the second: the anchors of "every ..." phrases show no microseconds."""
    return datetime.now(UTC).replace(microsecond=0)


def _show(
    text: str,
    now: datetime,
    tz: str,
    count: int,
    dst: tuple[DstGap | None, DstFold | None] = (None, None),
) -> None:
    """The phrase's spec and next fires, each in the spec's zone (named) and in UTC."""
    spec = with_dst(parse_when(text, now, tz), *dst)
    echo(f"{text!r}: {describe(spec)}")
    echo(f"  spec: {spec_to_json(spec)}")
    zone = get_zone(spec.tz)
    for fire in upcoming(spec, now, count):
        day = f"{fire.astimezone(zone):%a}"
        echo(f"  -> {day} {render.when(fire, spec.tz)}  ({fire:%Y-%m-%dT%H:%M:%SZ})")


@app.command("next")
def next_cmd(
    when: Annotated[
        list[str],
        typer.Argument(metavar="WHEN", help='A phrase: "every weekday at 9", cron, ...'),
    ],
    ctx: typer.Context,
    tz: Annotated[str | None, typer.Option(help=_TZ_HELP)] = None,
    count: Annotated[int, typer.Option("-n", help="How many fire times to show.")] = 5,
    dst_gap: Annotated[
        DstGap | None, typer.Option(help="A time of day the clocks skip: shift or skip.")
    ] = None,
    dst_fold: Annotated[
        DstFold | None,
        typer.Option(help="A time of day the clocks repeat: first, last or both."),
    ] = None,
) -> None:
    """Show the spec and next fire times of a WHEN phrase."""
    try:
        _show(" ".join(when), _now(), tz or local_zone(ctx), count, (dst_gap, dst_fold))
    except ScheduleError as exc:
        raise fail(str(exc), 2) from exc


@app.command()
def examples(
    ctx: typer.Context,
    tz: Annotated[str | None, typer.Option(help=_TZ_HELP)] = None,
    count: Annotated[int, typer.Option("-n", help="Fire times per example.")] = 3,
) -> None:
    """Print the next fire times of a few example schedules, including a rejected one."""
    now, zone = _now(), tz or local_zone(ctx)
    echo(f"now: {render.when(now, zone)}\n")
    for phrase in EXAMPLE_PHRASES:
        try:
            _show(phrase, now, zone, count)
        except ScheduleError as exc:
            echo(f"{phrase!r}: rejected: {exc}")
        echo("")
