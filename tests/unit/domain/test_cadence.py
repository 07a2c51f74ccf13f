"""domain/cadence.py: the bounds' written forms, and which moves of a next fire they allow
(a table: asked at T0 = 12:00 UTC, 13:00 in Berlin)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

from agentcron.domain.cadence import (
    CadenceBounds,
    CadenceRefusedError,
    HourWindow,
    Reschedule,
    check_move,
    duration_text,
    parse_duration,
)
from agentcron.errors import InvalidInputError

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)
M = timedelta(minutes=1)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1d", 86400),
        ("1h30m", 5400),
        ("600", 600),
        (45, 45),
        ("2H", 7200),
        ("1h 30m", 5400),
    ],
)
def test_durations_are_read(text: str | int, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "soon", "1x", "h", "0s", "400d", "-5m", "1h-", True, 1.5e9])
def test_bad_durations_are_refused(text: object) -> None:
    with pytest.raises(InvalidInputError):
        parse_duration(text)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [timedelta(seconds=45), 90 * M, 26 * H, timedelta(days=3)])
def test_a_duration_reads_back_as_itself(value: timedelta) -> None:
    assert parse_duration(duration_text(value)) == value


@pytest.mark.parametrize(
    ("text", "inside", "outside"),
    [
        ("08:00-20:00", [time(8), time(19, 59)], [time(20), time(7, 59), time(0)]),
        ("22:00-06:00", [time(23), time(0), time(5, 59)], [time(6), time(12), time(21, 59)]),
        ("20:00-24:00", [time(20), time(23, 59)], [time(0), time(19, 59)]),
    ],
)
def test_hour_windows(text: str, inside: list[time], outside: list[time]) -> None:
    window = HourWindow.parse(text)
    assert str(window) == text
    assert all(window.contains(t) for t in inside)
    assert not any(window.contains(t) for t in outside)


@pytest.mark.parametrize(
    "text", ["8-20", "08:00", "25:00-26:00", "08:60-09:00", "09:00-09:00", "00:00-24:00"]
)
def test_bad_hour_windows_are_refused(text: str) -> None:
    with pytest.raises(InvalidInputError):
        HourWindow.parse(text)


def test_bounds_are_checked_when_made() -> None:
    assert CadenceBounds.of() is None
    with pytest.raises(InvalidInputError, match="longer than cadence_max"):
        CadenceBounds.of("2h", "1h")
    with pytest.raises(InvalidInputError):
        CadenceBounds(min=timedelta(0))


BOUNDS = CadenceBounds.of("30m", "6h", "08:00-20:00")
UNBOUNDED_HOURS = CadenceBounds.of("30m", "6h")

# (bounds, the new next fire, in UTC from T0; the job's zone; None = allowed, else the refusal)
TABLE = [
    (BOUNDS, 3 * H, "UTC", None),
    (BOUNDS, 30 * M, "UTC", None),  # exactly the minimum
    (BOUNDS, 29 * M, "UTC", "sooner than cadence_min"),
    (BOUNDS, 6 * H, "UTC", None),  # exactly the maximum: 18:00
    (BOUNDS, 6 * H + M, "UTC", "later than cadence_max"),
    (BOUNDS, -H, "UTC", "not in the future"),
    (BOUNDS, timedelta(0), "UTC", "not in the future"),
    (BOUNDS, 6 * H, "Europe/Berlin", None),  # 19:00 in Berlin
    (CadenceBounds.of("30m", "8h", "08:00-20:00"), 7 * H, "Europe/Berlin", "outside the allowed"),
    (CadenceBounds.of("30m", "8h", "08:00-20:00"), 7 * H, "UTC", None),  # 19:00 UTC
    (UNBOUNDED_HOURS, 5 * H, "Asia/Tokyo", None),  # 02:00 in Tokyo: no window, allowed
    (CadenceBounds.of(allowed_hours="08:00-20:00"), 200 * 24 * H, "UTC", None),  # no max
    (CadenceBounds.of(allowed_hours="08:00-20:00"), 400 * 24 * H, "UTC", "later than"),
    (None, 3 * H, "UTC", "has no cadence bounds"),
]


@pytest.mark.parametrize(("bounds", "ahead", "tz", "refused"), TABLE)
def test_which_moves_the_bounds_allow(
    bounds: CadenceBounds | None, ahead: timedelta, tz: str, refused: str | None
) -> None:
    if refused is None:
        check_move(bounds, T0, T0 + ahead, tz)
        return
    with pytest.raises(CadenceRefusedError, match=refused):
        check_move(bounds, T0, T0 + ahead, tz)


def test_a_refusal_says_the_time_in_the_jobs_zone_and_what_is_allowed() -> None:
    with pytest.raises(CadenceRefusedError) as caught:
        check_move(BOUNDS, T0, T0 + 10 * M, "Europe/Berlin")
    assert str(caught.value) == (
        "2026-11-22 13:10 (Europe/Berlin) is sooner than cadence_min allows (allowed: at least "
        "30m from now, at most 6h from now, between 08:00-20:00 local time)"
    )


def test_a_move_is_kept_as_json_and_read_back() -> None:
    move = Reschedule("J1", T0 + H, T0 + 3 * H, "quiet", T0, "R1")
    assert Reschedule.of_data(move.to_data()) == move
    assert Reschedule.of_data({**move.to_data(), "from": None}).from_at is None
