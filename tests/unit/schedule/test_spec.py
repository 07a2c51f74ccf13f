"""Spec models: validation, stable JSON shape, and next_fire for `every`, `at` and `days`."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcron.schedule import (
    AtSpec,
    CronSpec,
    DaysSpec,
    EverySpec,
    InvalidCronError,
    InvalidSpecError,
    InvalidZoneError,
    next_fire,
    spec_from_data,
    spec_to_data,
    spec_to_json,
    upcoming,
)
from agentcron.schedule.zones import resolve_wall

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("spec", "data"),
    [
        (CronSpec(expr="@daily", tz="Europe/Berlin"),
         {"kind": "cron", "expr": "0 0 * * *", "tz": "Europe/Berlin"}),
        (EverySpec(seconds=7200, anchor=datetime(2026, 1, 1, 9, tzinfo=ZoneInfo("Europe/Berlin"))),
         {"kind": "every", "seconds": 7200, "anchor": "2026-01-01T08:00:00Z", "tz": "UTC"}),
        (AtSpec(at=datetime(2026, 12, 1, 9, 30, 15, tzinfo=UTC), tz="Asia/Tokyo"),
         {"kind": "at", "at": "2026-12-01T09:30:15Z", "tz": "Asia/Tokyo"}),
        (DaysSpec(step=2, unit="week", on=(4, 2), time="10:00", start=date(2026, 11, 24),
                  tz="America/New_York"),
         {"kind": "days", "step": 2, "unit": "week", "on": [2, 4], "time": "10:00",
          "start": "2026-11-24", "tz": "America/New_York"}),
        (DaysSpec(step=3, time="08:00", start=date(2026, 11, 23)),
         {"kind": "days", "step": 3, "unit": "day", "on": [], "time": "08:00",
          "start": "2026-11-23", "tz": "UTC"}),
    ],
)  # fmt: skip
def test_json_shape_is_stable_and_round_trips(spec: object, data: dict[str, object]) -> None:
    assert spec_to_data(spec) == data  # type: ignore[arg-type]
    assert spec_from_data(data) == spec
    assert spec_from_data(spec_to_json(spec)) == spec  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        ({"kind": "cron", "expr": "0 0 * * * *"}, InvalidCronError, "6 fields"),
        ({"kind": "cron", "expr": "* * * * *", "tz": "Mars/Base"}, InvalidZoneError, "Mars/Base"),
        ({"kind": "at", "at": "2026-01-01T00:00:00"}, InvalidSpecError, "timezone-aware"),
        ({"kind": "every", "seconds": 0, "anchor": "2026-01-01T00:00:00Z"}, InvalidSpecError,
         "every.seconds: Input should be greater than 0"),
        ({"kind": "weekly"}, InvalidSpecError, "'cron', 'every', 'at', 'days'"),
        ({"kind": "days", "step": 2, "unit": "week", "time": "10:00", "start": "2026-11-24"},
         InvalidSpecError, "a weekly step needs weekdays in `on`"),
        ({"kind": "days", "step": 2, "on": [1], "time": "10:00", "start": "2026-11-24"},
         InvalidSpecError, "`on` (weekdays) only goes with unit 'week'"),
        ({"kind": "days", "step": 53, "unit": "week", "on": [1], "time": "10:00",
          "start": "2026-11-24"}, InvalidSpecError, "a weekly step must be at most 52"),
        ({"kind": "days", "step": 0, "time": "10:00", "start": "2026-11-24"}, InvalidSpecError,
         "days.step: Input should be greater than or equal to 1"),
        ({"kind": "days", "step": 2, "time": "9:00", "start": "2026-11-24"}, InvalidSpecError,
         "time must be HH:MM (24-hour), got '9:00'"),
        ({"kind": "days", "step": 2, "unit": "week", "on": [8], "time": "10:00",
          "start": "2026-11-24"}, InvalidSpecError, "weekdays are 1 (Monday) .. 7 (Sunday)"),
        ({"kind": "days", "step": 2, "time": "10:00", "start": "2026-11-24", "tz": "Mars/Base"},
         InvalidZoneError, "Mars/Base"),
        ({"kind": "cron", "expr": "* * * * *", "color": "red"}, InvalidSpecError, "color"),
        ('{"kind": "at", "at": ', InvalidSpecError, "invalid schedule spec"),
    ],
)  # fmt: skip
def test_bad_specs_raise_typed_errors(data: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        spec_from_data(data)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_every_fires_on_the_anchor_grid_without_drift() -> None:
    spec = EverySpec(seconds=3600, anchor=T0)
    assert next_fire(spec, T0 - timedelta(days=1)) == T0
    assert next_fire(spec, T0) == T0 + timedelta(hours=1)
    # a late finish (run took 40 minutes) does not shift the grid
    assert next_fire(spec, T0 + timedelta(hours=1, minutes=40)) == T0 + timedelta(hours=2)
    # a restart days later resumes on the grid
    later = T0 + timedelta(days=3, minutes=1, microseconds=5)
    assert next_fire(spec, later) == T0 + timedelta(days=3, hours=1)
    assert upcoming(spec, T0, 3) == [T0 + timedelta(hours=h) for h in (1, 2, 3)]


def test_every_is_absolute_time_across_dst() -> None:
    anchor = datetime(2026, 10, 24, 12, tzinfo=ZoneInfo("Europe/Berlin"))
    fires = upcoming(EverySpec(seconds=86400, anchor=anchor), anchor, 2)
    assert fires[1] - fires[0] == timedelta(days=1)
    assert fires[1].astimezone(ZoneInfo("Europe/Berlin")).hour == 11  # wall clock moved, grid not


def _local(fires: list[datetime], tz: str) -> list[str]:
    return [f"{fire.astimezone(ZoneInfo(tz)):%a %Y-%m-%d %H:%M%z}" for fire in fires]


def test_days_steps_count_local_dates_from_start() -> None:
    spec = DaysSpec(step=3, time="08:00", start=date(2026, 3, 6), tz="America/New_York")
    before = datetime(2026, 3, 1, tzinfo=UTC)
    assert _local(upcoming(spec, before, 3), spec.tz) == [
        "Fri 2026-03-06 08:00-0500",
        "Mon 2026-03-09 08:00-0400",  # 08:00 on the clock after the spring-forward change
        "Thu 2026-03-12 08:00-0400",
    ]
    # from inside the cycle: the next date on the step, not the next day
    assert next_fire(spec, datetime(2026, 3, 9, 13, tzinfo=UTC)) == datetime(
        2026, 3, 12, 12, tzinfo=UTC
    )


def test_days_weeks_count_from_the_week_of_start() -> None:
    spec = DaysSpec(step=2, unit="week", on=(2, 4), time="10:00", start=date(2026, 11, 26))
    # the Tuesday of the start week is before start: the first fire is that Thursday
    assert _local(upcoming(spec, datetime(2026, 11, 20, tzinfo=UTC), 4), "UTC") == [
        "Thu 2026-11-26 10:00+0000",
        "Tue 2026-12-08 10:00+0000",
        "Thu 2026-12-10 10:00+0000",
        "Tue 2026-12-22 10:00+0000",
    ]


@pytest.mark.parametrize(
    ("time", "start", "after", "fires"),
    [
        # Berlin's spring-forward gap (2026-03-29 02:00 -> 03:00): the first instant after it
        ("02:30", date(2026, 3, 27), "2026-03-28T12:00Z",
         ["Sun 2026-03-29 03:00+0200", "Tue 2026-03-31 02:30+0200"]),
        # the fall-back fold (2026-10-25 03:00 -> 02:00): the first 02:30 only
        ("02:30", date(2026, 10, 23), "2026-10-24T12:00Z",
         ["Sun 2026-10-25 02:30+0200", "Tue 2026-10-27 02:30+0100"]),
        # asked from between the two 02:30s: the fire already passed, the next is 2 days on
        ("02:30", date(2026, 10, 23), "2026-10-25T00:45Z", ["Tue 2026-10-27 02:30+0100"]),
    ],
)  # fmt: skip
def test_days_follow_the_dst_policy(time: str, start: date, after: str, fires: list[str]) -> None:
    spec = DaysSpec(step=2, time=time, start=start, tz="Europe/Berlin")
    got = upcoming(spec, datetime.fromisoformat(after), len(fires))
    assert _local(got, spec.tz) == fires


def test_at_fires_once() -> None:
    spec = AtSpec(at=T0)
    assert next_fire(spec, T0 - timedelta(seconds=1)) == T0
    assert next_fire(spec, T0) is None
    assert upcoming(spec, T0 - timedelta(days=1), 5) == [T0]


def test_next_fire_rejects_naive_after() -> None:
    with pytest.raises(InvalidSpecError, match="timezone-aware"):
        next_fire(AtSpec(at=T0), datetime(2026, 1, 1))


def test_upcoming_rejects_negative_count() -> None:
    with pytest.raises(InvalidSpecError, match="n must be >= 0"):
        upcoming(AtSpec(at=T0), T0, -1)


def test_output_is_utc() -> None:
    berlin_after = datetime(2026, 11, 22, 8, tzinfo=ZoneInfo("Europe/Berlin"))
    fire = next_fire(CronSpec(expr="0 9 * * *", tz="Europe/Berlin"), berlin_after)
    assert fire == datetime(2026, 11, 22, 8, tzinfo=UTC)
    assert fire is not None
    assert fire.tzinfo is UTC


# -- properties (hypothesis) ------------------------------------------------------------------

instants = st.datetimes(
    min_value=datetime(2001, 1, 1), max_value=datetime(2037, 12, 31), timezones=st.just(UTC)
)


@settings(max_examples=300, deadline=None)
@given(
    instants, st.integers(1, 10 * 86400), st.timedeltas(timedelta(days=-30), timedelta(days=400))
)
def test_every_fires_land_on_the_anchor_grid(
    anchor: datetime, seconds: int, delta: timedelta
) -> None:
    spec = EverySpec(seconds=seconds, anchor=anchor)
    after = anchor + delta
    fire = next_fire(spec, after)
    assert fire is not None
    assert fire > after
    assert (fire - anchor) % timedelta(seconds=seconds) == timedelta(0)
    assert fire == anchor or fire - timedelta(seconds=seconds) <= after


zones = st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Australia/Sydney"])


@settings(max_examples=300, deadline=None)
@given(
    st.dates(date(2001, 1, 1), date(2036, 12, 31)),
    st.integers(1, 30),
    st.sampled_from(["day", "week"]),
    st.sets(st.integers(1, 7), min_size=1),
    st.times(),
    zones,
    st.timedeltas(timedelta(days=-30), timedelta(days=400)),
)
def test_days_fires_are_on_the_step_at_the_wall_time(
    start: date,
    step: int,
    unit: str,
    on: set[int],
    wall: object,
    tz: str,
    delta: timedelta,
) -> None:
    spec = DaysSpec(
        step=step,
        unit=unit,  # type: ignore[arg-type]
        on=tuple(on) if unit == "week" else (),
        time=f"{wall:%H:%M}",
        start=start,
        tz=tz,
    )
    after = datetime.combine(start, datetime.min.time(), tzinfo=UTC) + delta
    fire = next_fire(spec, after)
    assert fire is not None
    assert fire > after
    local = fire.astimezone(ZoneInfo(tz))
    assert spec.fires_on(local.date())
    # the wall time on that date, under the DST policy (a gap: the first instant after it)
    assert fire == resolve_wall(datetime.combine(local.date(), spec.wall_time), ZoneInfo(tz))[0]
    # no date on the step between `after` and the fire was skipped
    day = max(start, after.astimezone(ZoneInfo(tz)).date())
    while day < local.date():
        if spec.fires_on(day):
            skipped = datetime.combine(day, spec.wall_time, tzinfo=ZoneInfo(tz))
            assert skipped.astimezone(UTC) <= after or skipped.astimezone(UTC) >= fire
        day += timedelta(days=1)
