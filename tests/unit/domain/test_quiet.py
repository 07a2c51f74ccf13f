"""A job's quiet choice (domain/quiet.py) as tables: when a session's quiet hours around an
instant end, when a held reply may go out, and what a run's record keeps of it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from agentcron.domain.quiet import QUIET_UNTIL, QuietMode, held_until, quiet_end, quiet_record
from agentcron.schedule.errors import InvalidSpecError


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


@pytest.mark.parametrize(
    ("hours", "tz", "at", "ends"),
    [
        # none set, or none given: never quiet
        (None, "UTC", "2026-11-22T23:00Z", None),
        ("", "UTC", "2026-11-22T23:00Z", None),
        # across midnight: the evening part, the morning part, the day between
        ("22:00-07:00", "UTC", "2026-11-22T23:00Z", "2026-11-23T07:00Z"),
        ("22:00-07:00", "UTC", "2026-11-23T03:00Z", "2026-11-23T07:00Z"),
        ("22:00-07:00", "UTC", "2026-11-22T12:00Z", None),
        # the start is in them, the end is not
        ("22:00-07:00", "UTC", "2026-11-22T22:00Z", "2026-11-23T07:00Z"),
        ("22:00-07:00", "UTC", "2026-11-23T06:59:59Z", "2026-11-23T07:00Z"),
        ("22:00-07:00", "UTC", "2026-11-23T07:00Z", None),
        ("22:00-07:00", "UTC", "2026-11-22T21:59:59Z", None),
        # within one day
        ("01:00-05:00", "UTC", "2026-11-22T02:00Z", "2026-11-22T05:00Z"),
        ("01:00-05:00", "UTC", "2026-11-22T05:30Z", None),
        ("01:00-05:00", "UTC", "2026-11-22T00:30Z", None),
        # read in the session's zone: 23:30 in Berlin is 22:30 UTC, its 07:00 is 06:00 UTC
        ("22:00-07:00", "Europe/Berlin", "2026-11-22T22:30Z", "2026-11-23T06:00Z"),
        ("22:00-07:00", "Europe/Berlin", "2026-11-22T20:30Z", None),  # 21:30 in Berlin
        ("22:00-07:00", "America/New_York", "2026-11-23T04:00Z", "2026-11-23T12:00Z"),
        # an instant with any offset is the same instant
        ("22:00-07:00", "UTC", "2026-11-23T00:30+01:00", "2026-11-23T07:00Z"),
        # the hours as a person types them (blanks, one-digit hour)
        (" 9:00 - 17:00 ", "UTC", "2026-11-22T12:00Z", "2026-11-22T17:00Z"),
        # the night the clocks go back in Berlin (2026-10-25): an hour longer in UTC
        ("22:00-07:00", "Europe/Berlin", "2026-10-24T21:00Z", "2026-10-25T06:00Z"),
        # the night they go forward (2026-03-29): an hour shorter
        ("22:00-07:00", "Europe/Berlin", "2026-03-28T22:00Z", "2026-03-29T05:00Z"),
    ],
)
def test_quiet_end(hours: str | None, tz: str, at: str, ends: str | None) -> None:
    assert quiet_end(hours, tz, utc(at)) == (None if ends is None else utc(ends))


@pytest.mark.parametrize(
    ("hours", "tz", "at"),
    [
        ("22:00", "UTC", datetime(2026, 11, 22, 23, tzinfo=UTC)),
        ("25:00-07:00", "UTC", datetime(2026, 11, 22, 23, tzinfo=UTC)),
        ("22:00-22:00", "UTC", datetime(2026, 11, 22, 23, tzinfo=UTC)),
        ("22:00-07:00", "UTC", datetime(2026, 11, 22, 23)),  # a naive instant
    ],
)
def test_quiet_end_refuses_what_is_not_a_window_or_an_instant(
    hours: str, tz: str, at: datetime
) -> None:
    with pytest.raises(InvalidSpecError):
        quiet_end(hours, tz, at)


UNTIL = datetime(2026, 11, 23, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("meta", "until"),
    [
        ({}, None),  # not held
        ({QUIET_UNTIL: None}, None),
        ({QUIET_UNTIL: "2026-11-23T07:00:00+00:00"}, UNTIL),
        ({QUIET_UNTIL: "2026-11-23T08:00:00+01:00"}, UNTIL),  # the same instant
        ({QUIET_UNTIL: "tomorrow morning"}, None),  # not a time: not held
        ({QUIET_UNTIL: 1795417200}, None),  # not an ISO string
        ({"other": "2026-11-23T07:00:00+00:00"}, None),
    ],
)
def test_held_until(meta: dict[str, Any], until: datetime | None) -> None:
    assert held_until(meta) == until


@pytest.mark.parametrize(
    ("mode", "until", "record"),
    [
        (QuietMode.HOLD, UNTIL, {"mode": "hold", "until": "2026-11-23T07:00:00+00:00"}),
        (QuietMode.SILENT, UNTIL, {"mode": "silent", "until": "2026-11-23T07:00:00+00:00"}),
        (
            QuietMode.WAIT,
            UNTIL.astimezone(timezone(timedelta(hours=1))),
            {"mode": "wait", "until": "2026-11-23T08:00:00+01:00"},
        ),
    ],
)
def test_quiet_record(mode: QuietMode, until: datetime, record: dict[str, str]) -> None:
    kept = quiet_record(mode, until)
    assert kept == record
    assert datetime.fromisoformat(kept["until"]) == until  # read back, the same instant
    # what a held reply's meta carries reads back the same way
    assert held_until({QUIET_UNTIL: kept["until"]}) == until


@pytest.mark.parametrize(
    ("word", "mode"),
    [("hold", QuietMode.HOLD), ("silent", QuietMode.SILENT), ("wait", QuietMode.WAIT)],
)
def test_the_choice_is_one_of_three_words(word: str, mode: QuietMode) -> None:
    assert QuietMode(word) is mode
    assert str(mode) == word


def test_another_word_is_not_a_choice() -> None:
    with pytest.raises(ValueError, match="sometimes"):
        QuietMode("sometimes")
