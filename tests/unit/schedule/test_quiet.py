"""Quiet hours (schedule/quiet.py): the window's grammar and whether an instant is in it, held
to a table of instants written by hand: plain windows, windows across midnight, both DST
transitions (Europe/Berlin: 2026-03-29 02:00 -> 03:00, 2026-10-25 03:00 -> 02:00), a southern
zone and a 30-minute offset.
"""

from __future__ import annotations

from datetime import UTC, datetime, time

import pytest

from agentcron.schedule.errors import InvalidSpecError
from agentcron.schedule.quiet import QuietHours, parse_quiet_hours, quiet_until


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("22:00-07:00", time(22), time(7)),
        ("7:30-9:05", time(7, 30), time(9, 5)),
        (" 00:00 - 23:59 ", time(0), time(23, 59)),
    ],
)
def test_a_window_is_read_and_written_back_in_one_form(text: str, start: time, end: time) -> None:
    window = parse_quiet_hours(text)
    assert window == QuietHours(start, end)
    assert parse_quiet_hours(str(window)) == window
    assert str(window) == f"{start:%H:%M}-{end:%H:%M}"


@pytest.mark.parametrize(
    "text", ["", "22-07", "22:00", "24:00-07:00", "22:60-07:00", "22:00-22:00", "ab:cd-07:00"]
)
def test_anything_else_is_refused_with_the_form_it_takes(text: str) -> None:
    with pytest.raises(InvalidSpecError, match="quiet hours"):
        parse_quiet_hours(text)


# (window, zone, now in UTC, the end of the quiet hours around it in UTC or None)
TABLE = [
    # a window inside one day
    ("01:00-05:00", "UTC", "2026-06-10T00:59:59", None),
    ("01:00-05:00", "UTC", "2026-06-10T01:00:00", "2026-06-10T05:00:00"),
    ("01:00-05:00", "UTC", "2026-06-10T04:59:59", "2026-06-10T05:00:00"),
    ("01:00-05:00", "UTC", "2026-06-10T05:00:00", None),
    # across midnight: the evening part and the morning part are one window
    ("22:00-07:00", "UTC", "2026-06-10T21:59:00", None),
    ("22:00-07:00", "UTC", "2026-06-10T22:00:00", "2026-06-11T07:00:00"),
    ("22:00-07:00", "UTC", "2026-06-10T23:59:59", "2026-06-11T07:00:00"),
    ("22:00-07:00", "UTC", "2026-06-11T00:00:00", "2026-06-11T07:00:00"),
    ("22:00-07:00", "UTC", "2026-06-11T06:59:59", "2026-06-11T07:00:00"),
    ("22:00-07:00", "UTC", "2026-06-11T07:00:00", None),
    ("22:00-07:00", "UTC", "2026-06-11T12:00:00", None),
    # in the session's zone (Berlin is UTC+2 in summer, UTC+1 in winter)
    ("22:00-07:00", "Europe/Berlin", "2026-06-10T20:00:00", "2026-06-11T05:00:00"),
    ("22:00-07:00", "Europe/Berlin", "2026-06-10T19:59:00", None),
    ("22:00-07:00", "Europe/Berlin", "2026-01-10T21:00:00", "2026-01-11T06:00:00"),
    # spring forward (Berlin, night of 28 -> 29 March 2026): the night is an hour shorter
    ("22:00-07:00", "Europe/Berlin", "2026-03-28T21:00:00", "2026-03-29T05:00:00"),
    ("22:00-07:00", "Europe/Berlin", "2026-03-29T04:59:00", "2026-03-29T05:00:00"),
    ("22:00-07:00", "Europe/Berlin", "2026-03-29T05:00:00", None),
    # a start in the gap (02:30 does not exist): quiet from the gap's end, 03:00 CEST
    ("02:30-06:00", "Europe/Berlin", "2026-03-29T00:59:00", None),
    ("02:30-06:00", "Europe/Berlin", "2026-03-29T01:00:00", "2026-03-29T04:00:00"),
    # an end in the gap: quiet until the gap's end
    ("23:00-02:30", "Europe/Berlin", "2026-03-29T00:59:00", "2026-03-29T01:00:00"),
    ("23:00-02:30", "Europe/Berlin", "2026-03-29T01:00:00", None),
    # fall back (Berlin, night of 24 -> 25 October 2026): the night is an hour longer
    ("22:00-07:00", "Europe/Berlin", "2026-10-24T20:00:00", "2026-10-25T06:00:00"),
    ("22:00-07:00", "Europe/Berlin", "2026-10-25T05:59:00", "2026-10-25T06:00:00"),
    ("22:00-07:00", "Europe/Berlin", "2026-10-25T06:00:00", None),
    # an end in the fold (02:30 happens twice): the first time
    ("22:00-02:30", "Europe/Berlin", "2026-10-25T00:29:00", "2026-10-25T00:30:00"),
    ("22:00-02:30", "Europe/Berlin", "2026-10-25T00:30:00", None),
    ("22:00-02:30", "Europe/Berlin", "2026-10-25T01:15:00", None),
    # a start in the fold: from its first time
    ("02:30-05:00", "Europe/Berlin", "2026-10-25T00:29:00", None),
    ("02:30-05:00", "Europe/Berlin", "2026-10-25T00:30:00", "2026-10-25T04:00:00"),
    # southern hemisphere (Sydney falls back on 5 April 2026: 03:00 AEDT -> 02:00 AEST)
    ("21:00-06:00", "Australia/Sydney", "2026-04-04T10:00:00", "2026-04-04T20:00:00"),
    ("21:00-06:00", "Australia/Sydney", "2026-04-04T09:59:00", None),
    # a half-hour offset (Kolkata, UTC+5:30)
    ("22:00-07:00", "Asia/Kolkata", "2026-06-10T16:30:00", "2026-06-11T01:30:00"),
    ("22:00-07:00", "Asia/Kolkata", "2026-06-10T16:29:00", None),
]


@pytest.mark.parametrize(("window", "tz", "now", "until"), TABLE)
def test_the_end_of_the_quiet_hours_around_an_instant(
    window: str, tz: str, now: str, until: str | None
) -> None:
    found = quiet_until(parse_quiet_hours(window), _utc(now), tz)
    assert found == (None if until is None else _utc(until))


def test_a_naive_instant_is_refused() -> None:
    with pytest.raises(InvalidSpecError, match="aware"):
        quiet_until(parse_quiet_hours("22:00-07:00"), datetime(2026, 6, 10, 23), "UTC")
