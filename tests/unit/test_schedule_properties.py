"""Property tests (hypothesis) for next_fire / upcoming over many zones and expressions."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from agentcron.schedule import CronSpec, EverySpec, next_fire, upcoming

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
