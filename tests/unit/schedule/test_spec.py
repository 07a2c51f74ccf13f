"""Spec models: validation, stable JSON shape, and next_fire for `every` and `at`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcron.schedule import (
    AtSpec,
    CronSpec,
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
        ({"kind": "weekly"}, InvalidSpecError, "'cron', 'every', 'at'"),
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
