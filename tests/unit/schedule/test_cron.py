"""Cron next-fire tables, including DST transitions in four zones (expected instants by hand),
and properties (hypothesis) of next_fire / upcoming over many zones and expressions."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcron.schedule import CronSpec, InvalidCronError, next_fire, parse_cron, upcoming

B, NY, LH, SY = "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Australia/Sydney"

# (expr, zone, after, expected next fires) — instants written with the local UTC offset.
# 2026 transitions: Berlin 03-29 02:00->03:00, 10-25 03:00->02:00; New York 03-08 02:00->03:00,
# 11-01 02:00->01:00; Lord Howe 04-05 02:00->01:30, 10-04 02:00->02:30;
# Sydney 04-05 03:00->02:00, 10-04 02:00->03:00.
CASES = [
    # Berlin spring-forward: a fixed time in the gap fires at the first valid instant after it
    ("30 2 * * *", B, "2026-03-28T12:00+01:00",
     ["2026-03-29T03:00+02:00", "2026-03-30T02:30+02:00", "2026-03-31T02:30+02:00"]),
    ("59 1 * * *", B, "2026-03-28T12:00+01:00",
     ["2026-03-29T01:59+01:00", "2026-03-30T01:59+02:00"]),
    ("0 3 * * *", B, "2026-03-28T12:00+01:00", ["2026-03-29T03:00+02:00", "2026-03-30T03:00+02:00"]),
    ("0 2 * * 0", B, "2026-03-28T00:00+01:00", ["2026-03-29T03:00+02:00", "2026-04-05T02:00+02:00"]),
    ("*/20 2 * * *", B, "2026-03-29T01:50+01:00", ["2026-03-29T03:00+02:00", "2026-03-30T02:00+02:00"]),
    # hourly schedules: every real hour; a gap minute lands on the gap's end
    ("0 * * * *", B, "2026-03-29T01:30+01:00", ["2026-03-29T03:00+02:00", "2026-03-29T04:00+02:00"]),
    ("30 * * * *", B, "2026-03-29T01:45+01:00", ["2026-03-29T03:00+02:00", "2026-03-29T03:30+02:00"]),
    # Berlin fall-back: a fixed time in the fold fires once (first occurrence)
    ("30 2 * * *", B, "2026-10-24T12:00+02:00",
     ["2026-10-25T02:30+02:00", "2026-10-26T02:30+01:00", "2026-10-27T02:30+01:00"]),
    ("30 2 * * *", B, "2026-10-25T02:40+02:00", ["2026-10-26T02:30+01:00"]),
    ("15 2 * * *", B, "2026-10-25T02:10+01:00", ["2026-10-26T02:15+01:00"]),
    ("15 2 * * *", B, "2026-10-25T02:20+01:00", ["2026-10-26T02:15+01:00"]),
    ("0 0 * * *", B, "2026-10-24T12:00+02:00", ["2026-10-25T00:00+02:00", "2026-10-26T00:00+01:00"]),
    ("0 3 * * *", B, "2026-10-24T12:00+02:00", ["2026-10-25T03:00+01:00"]),
    ("*/20 2 * * *", B, "2026-10-25T01:50+02:00",
     ["2026-10-25T02:00+02:00", "2026-10-25T02:20+02:00", "2026-10-25T02:40+02:00",
      "2026-10-26T02:00+01:00"]),
    # ... while every-hour schedules fire in both passes of the fold
    ("0 * * * *", B, "2026-10-25T01:30+02:00",
     ["2026-10-25T02:00+02:00", "2026-10-25T02:00+01:00", "2026-10-25T03:00+01:00"]),
    ("0 * * * *", B, "2026-10-25T02:30+02:00", ["2026-10-25T02:00+01:00", "2026-10-25T03:00+01:00"]),
    ("0 * * * *", B, "2026-10-25T02:30+01:00", ["2026-10-25T03:00+01:00"]),
    ("*/30 * * * *", B, "2026-10-25T01:45+02:00",
     ["2026-10-25T02:00+02:00", "2026-10-25T02:30+02:00", "2026-10-25T02:00+01:00",
      "2026-10-25T02:30+01:00", "2026-10-25T03:00+01:00"]),
    # New York
    ("30 2 * * *", NY, "2026-03-07T12:00-05:00", ["2026-03-08T03:00-04:00", "2026-03-09T02:30-04:00"]),
    ("0 2 * * *", NY, "2026-03-07T12:00-05:00", ["2026-03-08T03:00-04:00", "2026-03-09T02:00-04:00"]),
    ("0 9 * * 1-5", NY, "2026-03-06T10:00-05:00", ["2026-03-09T09:00-04:00", "2026-03-10T09:00-04:00"]),
    ("30 1 * * *", NY, "2026-10-31T12:00-04:00", ["2026-11-01T01:30-04:00", "2026-11-02T01:30-05:00"]),
    ("0 * * * *", NY, "2026-11-01T00:30-04:00",
     ["2026-11-01T01:00-04:00", "2026-11-01T01:00-05:00", "2026-11-01T02:00-05:00"]),
    # Lord Howe: 30-minute shifts
    ("15 2 * * *", LH, "2026-10-03T12:00+10:30", ["2026-10-04T02:30+11:00", "2026-10-05T02:15+11:00"]),
    ("0 * * * *", LH, "2026-10-04T00:30+10:30",
     ["2026-10-04T01:00+10:30", "2026-10-04T02:30+11:00", "2026-10-04T03:00+11:00"]),
    ("45 1 * * *", LH, "2026-04-04T12:00+11:00", ["2026-04-05T01:45+11:00", "2026-04-06T01:45+10:30"]),
    ("30 1 * * *", LH, "2026-04-04T12:00+11:00", ["2026-04-05T01:30+11:00", "2026-04-06T01:30+10:30"]),
    ("0 * * * *", LH, "2026-04-05T00:30+11:00", ["2026-04-05T01:00+11:00", "2026-04-05T02:00+10:30"]),
    ("*/15 * * * *", LH, "2026-04-05T01:20+11:00",
     ["2026-04-05T01:30+11:00", "2026-04-05T01:45+11:00", "2026-04-05T01:30+10:30",
      "2026-04-05T01:45+10:30", "2026-04-05T02:00+10:30"]),
    # Sydney (southern hemisphere: DST ends in April, starts in October)
    ("30 2 * * *", SY, "2026-10-03T12:00+10:00", ["2026-10-04T03:00+11:00", "2026-10-05T02:30+11:00"]),
    ("30 2 * * *", SY, "2026-04-04T12:00+11:00", ["2026-04-05T02:30+11:00", "2026-04-06T02:30+10:00"]),
    ("0 * * * *", SY, "2026-04-05T01:30+11:00",
     ["2026-04-05T02:00+11:00", "2026-04-05T02:00+10:00", "2026-04-05T03:00+10:00"]),
    ("0 0 L * *", SY, "2026-02-01T00:00+11:00",
     ["2026-02-28T00:00+11:00", "2026-03-31T00:00+11:00", "2026-04-30T00:00+10:00"]),
    # no DST involved: L, #, names, macros, leap days, half-hour zones
    ("0 0 * * 5#2", "UTC", "2026-11-01T00:00Z", ["2026-11-13T00:00Z", "2026-12-11T00:00Z"]),
    ("0 12 * * 5L", "UTC", "2026-11-01T00:00Z", ["2026-11-27T12:00Z", "2026-12-25T12:00Z"]),
    ("0 9 * * MON-FRI", "UTC", "2026-11-21T00:00Z", ["2026-11-23T09:00Z", "2026-11-24T09:00Z"]),
    ("0 9 LW * *", "UTC", "2026-11-01T00:00Z", ["2026-11-30T09:00Z", "2026-12-31T09:00Z"]),
    ("@weekly", "UTC", "2026-11-22T00:00Z", ["2026-11-29T00:00Z"]),
    ("@monthly", "UTC", "2026-11-22T00:00Z", ["2026-12-01T00:00Z", "2027-01-01T00:00Z"]),
    ("@yearly", "UTC", "2026-11-22T00:00Z", ["2027-01-01T00:00Z"]),
    ("@hourly", "UTC", "2026-11-22T10:59:59.5Z", ["2026-11-22T11:00Z", "2026-11-22T12:00Z"]),
    ("0 9 29 2 *", "UTC", "2026-03-01T00:00Z", ["2028-02-29T09:00Z", "2032-02-29T09:00Z"]),
    ("0 9 1,15 * *", "Asia/Kolkata", "2026-11-22T00:00Z", ["2026-12-01T09:00+05:30"]),
    ("0 9 * * 1", "Pacific/Chatham", "2026-11-22T00:00Z", ["2026-11-23T09:00+13:45"]),
]  # fmt: skip


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.mark.parametrize(("expr", "tz", "after", "expected"), CASES)
def test_cron_next_fires(expr: str, tz: str, after: str, expected: list[str]) -> None:
    spec = CronSpec(expr=expr, tz=tz)
    got = upcoming(spec, _at(after), len(expected))
    assert got == [_at(e) for e in expected]
    assert all(g.utcoffset() is not None and g.utcoffset().total_seconds() == 0 for g in got)


def test_next_fire_is_strictly_after_a_matching_instant() -> None:
    spec = CronSpec(expr="0 9 * * *", tz="UTC")
    assert next_fire(spec, _at("2026-11-23T09:00Z")) == _at("2026-11-24T09:00Z")


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 0 * * * *", "6 fields (a seconds or year field) are not supported"),
        ("0 0 * *", "4 fields given"),
        ("H * * * *", "'H' (hashed value) in the minute field is not supported"),
        ("0 H(0-5) * * *", "'H' (hashed value) in the hour field"),
        ("0 0 ? * MON", "'?' in the day-of-month field is Quartz syntax"),
        ("0 0 * * ?", "'?' in the day-of-week field"),
        ("@reboot", "'@reboot' is not supported"),
        ("@fortnightly", "unknown cron macro '@fortnightly'"),
        ("0 0 15W * *", "'W' (nearest weekday) in the day-of-month field is not supported"),
        ("61 * * * *", "Bad minute"),
        ("0 24 * * *", "Bad hour"),
        ("0 0 30 2 *", "Bad day-of-month"),
        ("0 0 * 13 *", "Bad month"),
        ("", "empty cron expression"),
    ],
)
def test_rejected_cron(expr: str, message: str) -> None:
    with pytest.raises(InvalidCronError) as info:
        parse_cron(expr)
    assert message in str(info.value)


def test_day_names_containing_h_are_not_hashed_values() -> None:
    assert parse_cron("0 9 * * THU").expr == "0 9 * * THU"


@pytest.mark.parametrize(
    ("expr", "normal", "hours"),
    [("0 9-9/2 * * *", "0 9 * * *", [9, 9]), ("0 1-1/3,9-9/2 * * *", "0 1,9 * * *", [1, 9]),
     ("0 9-11/2 * * *", "0 9-11/2 * * *", [9, 11]), ("0 19-19/2 * * *", "0 19 * * *", [19, 19])],
)  # fmt: skip
def test_a_one_value_range_with_a_step_is_that_value(
    expr: str, normal: str, hours: list[int]
) -> None:
    # cronsim alone reads "9-9/2" as "9/2": 9, 11, ... 23.
    assert parse_cron(expr).expr == normal
    fires = upcoming(CronSpec(expr=expr), datetime(2026, 1, 1, tzinfo=UTC), 2)
    assert [fire.hour for fire in fires] == hours


@pytest.mark.parametrize(
    ("macro", "expanded"),
    [("@hourly", "0 * * * *"), ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"),
     ("@weekly", "0 0 * * 0"), ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"),
     ("@annually", "0 0 1 1 *"), ("@DAILY", "0 0 * * *")],
)  # fmt: skip
def test_macros_expand(macro: str, expanded: str) -> None:
    assert parse_cron(macro).expr == expanded


# -- properties (hypothesis) ------------------------------------------------------------------

ZONES = [
    "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Australia/Sydney",
    "America/Santiago", "Pacific/Chatham", "Europe/London", "Antarctica/Troll",
    "Africa/Casablanca", "America/St_Johns", "Asia/Kolkata", "UTC",
]  # fmt: skip
TEN_DST_ZONES = ZONES[:10]
EXPRESSIONS = [
    "* * * * *", "*/7 * * * *", "0 * * * *", "30 * * * *", "*/20 2 * * *", "15 2 * * *",
    "30 1 * * *", "0 0 * * *", "0 9 * * 1-5", "0 3 L * *", "0 12 * * 5#3", "45 23 * * 0",
    "0 */2 * * *", "5 1-3 * * *",
]  # fmt: skip

instants = st.datetimes(
    min_value=datetime(2001, 1, 1), max_value=datetime(2037, 12, 31), timezones=st.just(UTC)
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(EXPRESSIONS), st.sampled_from(ZONES), instants, st.floats(0.001, 0.999))
def test_cron_next_fire_is_after_and_consistent(
    expr: str, zone: str, after: datetime, frac: float
) -> None:
    spec = CronSpec(expr=expr, tz=zone)
    fire = next_fire(spec, after)
    assert fire is not None
    assert fire > after
    assert fire.tzinfo is UTC
    # No fire was skipped: starting anywhere in (after, fire) finds the same fire.
    mid = after + (fire - after) * frac
    if after < mid < fire:
        assert next_fire(spec, mid) == fire


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(EXPRESSIONS), st.sampled_from(ZONES), instants)
def test_upcoming_is_strictly_increasing(expr: str, zone: str, after: datetime) -> None:
    fires = upcoming(CronSpec(expr=expr, tz=zone), after, 25)
    assert len(fires) == 25
    assert all(a < b for a, b in itertools.pairwise(fires))


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(TEN_DST_ZONES),
    st.integers(0, 23),
    st.sampled_from([0, 15, 30, 45, 59]),
    st.datetimes(
        min_value=datetime(2005, 1, 1), max_value=datetime(2034, 1, 1), timezones=st.just(UTC)
    ),
)
def test_daily_fixed_time_fires_once_per_local_day_for_three_years(
    zone: str, hour: int, minute: int, start: datetime
) -> None:
    tz = ZoneInfo(zone)
    fires = upcoming(CronSpec(expr=f"{minute} {hour} * * *", tz=zone), start, 3 * 366)
    days = [f.astimezone(tz).date() for f in fires]
    first = days[0]
    assert days == [first + timedelta(days=i) for i in range(len(days))]
    # and the local wall time is the scheduled one, or just after it when it fell in a gap
    for fire in fires:
        local = fire.astimezone(tz)
        scheduled = local.replace(hour=hour, minute=minute, second=0, microsecond=0, tzinfo=None)
        assert timedelta(0) <= local.replace(tzinfo=None) - scheduled <= timedelta(hours=3)
