"""The DST policy (`DstGap` x `DstFold`) held to vector tables: every policy, in six zones
(northern and southern hemisphere, a 30-minute shift, a 45-minute offset), for each form of a
wall-clock schedule (a cron expression, the phrases that read as cron, the `days` kind), with
the expected instants written by hand; `resolve_wall` itself; and properties (hypothesis):
fires strictly increase, `both` fires each repeated wall time twice, `skip` never fires in a
gap, `last` only at the second pass, and the default is the behaviour without a policy.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcron.schedule import (
    AtSpec,
    CronSpec,
    DaysSpec,
    DstFold,
    DstGap,
    EverySpec,
    InvalidSpecError,
    describe,
    next_fire,
    parse_when,
    spec_from_data,
    spec_to_data,
    upcoming,
    with_dst,
)
from agentcron.schedule.zones import resolve_wall, wall_instants


@dataclass(frozen=True)
class Zone:
    """One zone's 2026 transitions, written by hand: a wall time the spring-forward change
    skips and where that gap ends, and a wall time the fall-back change repeats, with both of
    its instants. Every transition here falls on a Sunday.
    """

    name: str
    gap_day: date
    gap_time: str  # HH:MM inside the gap
    gap_end: str  # the first valid instant after it (what `shift` fires at)
    gap_offset: str  # the UTC offset on the days after the gap
    fold_day: date
    fold_time: str  # HH:MM inside the fold
    fold_first: str  # its first occurrence
    fold_second: str  # its second occurrence
    fold_offset: str  # the UTC offset on the days after the fold


ZONES = [
    # New York: 2026-03-08 02:00 -> 03:00, 2026-11-01 02:00 -> 01:00
    Zone("America/New_York", date(2026, 3, 8), "02:30", "2026-03-08T03:00-04:00", "-04:00",
         date(2026, 11, 1), "01:30", "2026-11-01T01:30-04:00", "2026-11-01T01:30-05:00", "-05:00"),
    # London: 2026-03-29 01:00 -> 02:00, 2026-10-25 02:00 -> 01:00
    Zone("Europe/London", date(2026, 3, 29), "01:30", "2026-03-29T02:00+01:00", "+01:00",
         date(2026, 10, 25), "01:30", "2026-10-25T01:30+01:00", "2026-10-25T01:30+00:00", "+00:00"),
    # Berlin: 2026-03-29 02:00 -> 03:00, 2026-10-25 03:00 -> 02:00
    Zone("Europe/Berlin", date(2026, 3, 29), "02:30", "2026-03-29T03:00+02:00", "+02:00",
         date(2026, 10, 25), "02:30", "2026-10-25T02:30+02:00", "2026-10-25T02:30+01:00", "+01:00"),
    # Lord Howe (a 30-minute shift): 2026-10-04 02:00 -> 02:30, 2026-04-05 02:00 -> 01:30
    Zone("Australia/Lord_Howe", date(2026, 10, 4), "02:15", "2026-10-04T02:30+11:00", "+11:00",
         date(2026, 4, 5), "01:45", "2026-04-05T01:45+11:00", "2026-04-05T01:45+10:30", "+10:30"),
    # Chatham (UTC+12:45 / +13:45): 2026-09-27 02:45 -> 03:45, 2026-04-05 03:45 -> 02:45
    Zone("Pacific/Chatham", date(2026, 9, 27), "03:00", "2026-09-27T03:45+13:45", "+13:45",
         date(2026, 4, 5), "03:00", "2026-04-05T03:00+13:45", "2026-04-05T03:00+12:45", "+12:45"),
    # Sydney (southern hemisphere): 2026-10-04 02:00 -> 03:00, 2026-04-05 03:00 -> 02:00
    Zone("Australia/Sydney", date(2026, 10, 4), "02:30", "2026-10-04T03:00+11:00", "+11:00",
         date(2026, 4, 5), "02:30", "2026-04-05T02:30+11:00", "2026-04-05T02:30+10:00", "+10:00"),
]  # fmt: skip


@dataclass(frozen=True)
class Form:
    """A way to write a schedule that fires at HH:MM on the transition Sunday, and how many
    days later its next fire is.
    """

    name: str
    step_days: int
    label: str

    def spec(self, zone: str, hh_mm: str, day: date) -> CronSpec | DaysSpec:
        hour, minute = (int(part) for part in hh_mm.split(":"))
        # Asked on the Saturday before, at noon local time.
        now = datetime.combine(day - timedelta(days=1), datetime.min.time().replace(hour=12))
        now = now.replace(tzinfo=ZoneInfo(zone)).astimezone(UTC)
        if self.name == "cron":
            return CronSpec(expr=f"{minute} {hour} * * *", tz=zone)
        if self.name == "days":
            return DaysSpec(step=3, time=hh_mm, start=day - timedelta(days=3), tz=zone)
        spec = parse_when(self.name.format(time=hh_mm), now, zone)
        if not isinstance(spec, CronSpec | DaysSpec):
            raise TypeError(f"{self.name!r} read as {spec!r}")
        return spec


FORMS = [
    Form("cron", 1, "cron"),  # "M H * * *"
    Form("every day at {time}", 1, "daily"),  # a phrase read as cron
    Form("every sunday at {time}", 7, "weekly"),  # a phrase read as cron, weekly
    Form("every 2 weeks on sunday at {time}", 14, "fortnightly"),  # read as the days kind
    Form("days", 3, "days"),  # the days kind: every 3rd local date
]


def _later(zone: Zone, hh_mm: str, day: date, offset: str) -> datetime:
    return datetime.fromisoformat(f"{day.isoformat()}T{hh_mm}{offset}")


def _noon_before(zone: Zone, day: date) -> datetime:
    return datetime.combine(day - timedelta(days=1), datetime.min.time().replace(hour=12)).replace(
        tzinfo=ZoneInfo(zone.name)
    )


GAP_CASES = [
    pytest.param(zone, form, gap, id=f"{zone.name}-{form.label}-{gap}")
    for zone in ZONES
    for form in FORMS
    for gap in DstGap
]
FOLD_CASES = [
    pytest.param(zone, form, fold, id=f"{zone.name}-{form.label}-{fold}")
    for zone in ZONES
    for form in FORMS
    for fold in DstFold
]


@pytest.mark.parametrize(("zone", "form", "gap"), GAP_CASES)
def test_a_time_the_clocks_skip(zone: Zone, form: Form, gap: DstGap) -> None:
    spec = with_dst(form.spec(zone.name, zone.gap_time, zone.gap_day), gap=gap)
    after = _noon_before(zone, zone.gap_day)
    following = zone.gap_day + timedelta(days=form.step_days)
    expected = {
        DstGap.SHIFT: [datetime.fromisoformat(zone.gap_end)],  # the gap's end, that day
        DstGap.SKIP: [],  # not that day
    }[gap] + [_later(zone, zone.gap_time, following, zone.gap_offset)]
    assert upcoming(spec, after, len(expected)) == expected


@pytest.mark.parametrize(("zone", "form", "fold"), FOLD_CASES)
def test_a_time_the_clocks_repeat(zone: Zone, form: Form, fold: DstFold) -> None:
    spec = with_dst(form.spec(zone.name, zone.fold_time, zone.fold_day), fold=fold)
    after = _noon_before(zone, zone.fold_day)
    first, second = (
        datetime.fromisoformat(zone.fold_first),
        datetime.fromisoformat(zone.fold_second),
    )
    following = zone.fold_day + timedelta(days=form.step_days)
    expected = {
        DstFold.FIRST: [first],
        DstFold.LAST: [second],
        DstFold.BOTH: [first, second],
    }[fold] + [_later(zone, zone.fold_time, following, zone.fold_offset)]
    assert upcoming(spec, after, len(expected)) == expected
    # asked from between the two passes: only what is still to come
    between = first + (second - first) / 2
    still = [fire for fire in expected if fire > between]
    assert upcoming(spec, between, len(still)) == still


@pytest.mark.parametrize("zone", ZONES, ids=[zone.name for zone in ZONES])
def test_the_default_policy_is_the_policy_without_one(zone: Zone) -> None:
    for form, (hh_mm, day) in itertools.product(
        FORMS, [(zone.gap_time, zone.gap_day), (zone.fold_time, zone.fold_day)]
    ):
        plain = form.spec(zone.name, hh_mm, day)
        explicit = with_dst(plain, gap=DstGap.SHIFT, fold=DstFold.FIRST)
        assert explicit == plain
        assert spec_to_data(explicit) == spec_to_data(plain)  # nothing new in the JSON
        assert "dst" not in str(spec_to_data(plain))
        after = _noon_before(zone, day)
        assert upcoming(explicit, after, 4) == upcoming(plain, after, 4)


# Every-hour cron schedules: under the default (`first`) they keep firing each real hour
# through a fold, as they always have; `last` and `skip` apply to them as to any other.
HOURLY = [
    ("0 * * * *", "America/New_York", "2026-11-01T00:30-04:00", DstGap.SHIFT, DstFold.FIRST,
     ["2026-11-01T01:00-04:00", "2026-11-01T01:00-05:00", "2026-11-01T02:00-05:00"]),
    ("0 * * * *", "America/New_York", "2026-11-01T00:30-04:00", DstGap.SHIFT, DstFold.BOTH,
     ["2026-11-01T01:00-04:00", "2026-11-01T01:00-05:00", "2026-11-01T02:00-05:00"]),
    ("0 * * * *", "America/New_York", "2026-11-01T00:30-04:00", DstGap.SHIFT, DstFold.LAST,
     ["2026-11-01T01:00-05:00", "2026-11-01T02:00-05:00"]),
    ("*/30 * * * *", "Europe/Berlin", "2026-10-25T01:45+02:00", DstGap.SHIFT, DstFold.LAST,
     ["2026-10-25T02:00+01:00", "2026-10-25T02:30+01:00", "2026-10-25T03:00+01:00"]),
    ("15 * * * *", "Australia/Lord_Howe", "2026-10-04T01:20+10:30", DstGap.SHIFT, DstFold.FIRST,
     ["2026-10-04T02:30+11:00", "2026-10-04T03:15+11:00"]),
    ("15 * * * *", "Australia/Lord_Howe", "2026-10-04T01:20+10:30", DstGap.SKIP, DstFold.FIRST,
     ["2026-10-04T03:15+11:00", "2026-10-04T04:15+11:00"]),
    ("*/20 2 * * *", "Europe/Berlin", "2026-03-29T01:50+01:00", DstGap.SHIFT, DstFold.FIRST,
     ["2026-03-29T03:00+02:00", "2026-03-30T02:00+02:00"]),
    ("*/20 2 * * *", "Europe/Berlin", "2026-03-29T01:50+01:00", DstGap.SKIP, DstFold.FIRST,
     ["2026-03-30T02:00+02:00", "2026-03-30T02:20+02:00"]),
    ("*/20 2 * * *", "Europe/Berlin", "2026-10-25T01:50+02:00", DstGap.SHIFT, DstFold.BOTH,
     ["2026-10-25T02:00+02:00", "2026-10-25T02:20+02:00", "2026-10-25T02:40+02:00",
      "2026-10-25T02:00+01:00", "2026-10-25T02:20+01:00", "2026-10-25T02:40+01:00",
      "2026-10-26T02:00+01:00"]),
    ("*/20 2 * * *", "Europe/Berlin", "2026-10-25T01:50+02:00", DstGap.SHIFT, DstFold.LAST,
     ["2026-10-25T02:00+01:00", "2026-10-25T02:20+01:00", "2026-10-25T02:40+01:00",
      "2026-10-26T02:00+01:00"]),
    ("45 3 * * 0", "Pacific/Chatham", "2026-04-04T12:00+13:45", DstGap.SHIFT, DstFold.BOTH,
     ["2026-04-05T03:45+12:45", "2026-04-12T03:45+12:45"]),  # 03:45 is after the fold: once
]  # fmt: skip


@pytest.mark.parametrize(("expr", "tz", "after", "gap", "fold", "fires"), HOURLY)
def test_cron_schedules_of_many_times_an_hour(
    expr: str, tz: str, after: str, gap: DstGap, fold: DstFold, fires: list[str]
) -> None:
    spec = CronSpec(expr=expr, tz=tz, dst_gap=gap, dst_fold=fold)
    expected = [datetime.fromisoformat(fire) for fire in fires]
    assert upcoming(spec, datetime.fromisoformat(after), len(expected)) == expected


# -- resolve_wall and the spec's fields ------------------------------------------------------


def test_resolve_wall_under_each_policy() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    in_gap, in_fold, plain = (
        datetime(2026, 3, 29, 2, 30),
        datetime(2026, 10, 25, 2, 30),
        datetime(2026, 7, 1, 2, 30),
    )
    first, second = wall_instants(in_fold, berlin)
    assert resolve_wall(in_gap, berlin) == (datetime(2026, 3, 29, 1, tzinfo=UTC),)
    assert resolve_wall(in_gap, berlin, gap=DstGap.SKIP) == ()
    assert resolve_wall(in_fold, berlin) == (first,)
    assert resolve_wall(in_fold, berlin, fold=DstFold.LAST) == (second,)
    assert resolve_wall(in_fold, berlin, fold=DstFold.BOTH) == (first, second)
    for gap, fold in itertools.product(DstGap, DstFold):
        assert resolve_wall(plain, berlin, gap=gap, fold=fold) == (
            datetime(2026, 7, 1, 0, 30, tzinfo=UTC),
        )


def test_the_policy_is_kept_in_the_spec_json() -> None:
    spec = CronSpec(expr="30 2 * * *", tz="Europe/Berlin", dst_gap="skip", dst_fold="both")
    data = spec_to_data(spec)
    assert data == {
        "kind": "cron",
        "expr": "30 2 * * *",
        "tz": "Europe/Berlin",
        "dst_gap": "skip",
        "dst_fold": "both",
    }
    assert spec_from_data(data) == spec
    days = DaysSpec(step=2, time="02:30", start=date(2026, 3, 1), dst_fold=DstFold.LAST)
    assert spec_to_data(days)["dst_fold"] == "last"
    assert "dst_gap" not in spec_to_data(days)
    assert spec_from_data(spec_to_data(days)) == days


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "cron", "expr": "0 2 * * *", "dst_gap": "later"}, "dst_gap"),
        ({"kind": "cron", "expr": "0 2 * * *", "dst_fold": "second"}, "dst_fold"),
        ({"kind": "every", "seconds": 60, "anchor": "2026-01-01T00:00Z", "dst_gap": "skip"},
         "dst_gap"),
    ],
)  # fmt: skip
def test_a_policy_out_of_place_is_refused(data: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidSpecError, match=message):
        spec_from_data(data)


def test_with_dst_refuses_absolute_schedules_and_unknown_values() -> None:
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    every, once = EverySpec(seconds=3600, anchor=anchor), AtSpec(at=anchor)
    with pytest.raises(InvalidSpecError, match="this is an interval, which runs in absolute"):
        with_dst(every, gap="skip")
    with pytest.raises(InvalidSpecError, match="this is a one-time schedule"):
        with_dst(once, fold="both")
    assert with_dst(every, gap="shift", fold="first") == every  # the default: nothing to refuse
    assert with_dst(once) == once
    with pytest.raises(InvalidSpecError, match="dst_fold one of: first, last, both"):
        with_dst(CronSpec(expr="0 9 * * *"), fold="twice")


def test_with_dst_keeps_what_is_not_given() -> None:
    spec = CronSpec(expr="30 2 * * *", dst_gap=DstGap.SKIP, dst_fold=DstFold.LAST)
    assert with_dst(spec, fold="both") == CronSpec(
        expr="30 2 * * *", dst_gap=DstGap.SKIP, dst_fold=DstFold.BOTH
    )


@pytest.mark.parametrize(
    ("gap", "fold", "suffix"),
    [
        ("shift", "first", ""),
        ("skip", "first", "; not on a day the clocks skip its time"),
        ("shift", "last", "; the second time when the clocks repeat it"),
        ("skip", "both", "; not on a day the clocks skip its time, both times when the clocks "
         "repeat it"),
    ],
)  # fmt: skip
def test_describe_says_a_policy_other_than_the_default(gap: str, fold: str, suffix: str) -> None:
    cron = CronSpec(expr="30 2 * * *", tz="Europe/Berlin", dst_gap=gap, dst_fold=fold)
    assert describe(cron) == "every day at 02:30 (Europe/Berlin)" + suffix
    days = DaysSpec(step=2, time="02:30", start=date(2026, 3, 1), dst_gap=gap, dst_fold=fold)
    assert describe(days) == "every other day at 02:30, from 2026-03-01 (UTC)" + suffix


# -- properties (hypothesis) ------------------------------------------------------------------

DST_ZONES = [zone.name for zone in ZONES] + ["America/Santiago", "Antarctica/Troll"]
EXPRESSIONS = [
    "30 2 * * *", "15 2 * * *", "30 1 * * *", "0 3 * * *", "45 2 * * 0", "*/20 2 * * *",
    "0 * * * *", "*/15 * * * *", "5 1-3 * * *", "0 0 * * *",
]  # fmt: skip
# Around the 2026 transitions of every zone above (and of the years after, by the hypothesis).
starts = st.datetimes(
    min_value=datetime(2026, 1, 1), max_value=datetime(2031, 1, 1), timezones=st.just(UTC)
)


def _fires_over_a_year(spec: CronSpec | DaysSpec, start: datetime) -> list[datetime]:
    end = start + timedelta(days=366)
    fires: list[datetime] = []
    cursor = start
    while (fire := next_fire(spec, cursor)) is not None and fire <= end:
        fires.append(fire)
        cursor = fire
    return fires


def _named(expr: str, wall: datetime) -> bool:
    """True when the wall-clock time `wall` is one the cron expression names."""
    as_utc = wall.replace(tzinfo=UTC)
    return next_fire(CronSpec(expr=expr), as_utc - timedelta(seconds=1)) == as_utc


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(EXPRESSIONS),
    st.sampled_from(DST_ZONES),
    st.sampled_from(list(DstGap)),
    st.sampled_from(list(DstFold)),
    starts,
)
def test_cron_fires_under_any_policy(
    expr: str, zone: str, gap: DstGap, fold: DstFold, start: datetime
) -> None:
    tz = ZoneInfo(zone)
    spec = CronSpec(expr=expr, tz=zone, dst_gap=gap, dst_fold=fold)
    fires = upcoming(spec, start, 200)
    assert all(a < b for a, b in itertools.pairwise(fires))  # strictly increasing
    walls = [fire.astimezone(tz).replace(tzinfo=None) for fire in fires]
    for fire, wall in zip(fires, walls, strict=True):
        repeated = len(wall_instants(wall, tz)) == 2
        if gap is DstGap.SKIP:
            assert _named(expr, wall)  # none moved out of a gap
        if repeated and fold is DstFold.LAST:
            assert fire == wall_instants(wall, tz)[1]  # only the second pass
    if fold is DstFold.BOTH:
        # a repeated wall time fires twice: each pass once
        fired = set(fires)
        for wall in walls:
            passes = wall_instants(wall, tz)
            if len(passes) == 2 and passes[0] > start and passes[1] <= fires[-1]:
                assert passes[0] in fired
                assert passes[1] in fired


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(DST_ZONES),
    st.integers(0, 3),
    st.sampled_from([0, 15, 30, 45]),
    st.sampled_from(list(DstGap)),
    st.sampled_from(list(DstFold)),
    starts,
)
def test_days_fires_under_any_policy(
    zone: str, hour: int, minute: int, gap: DstGap, fold: DstFold, start: datetime
) -> None:
    tz = ZoneInfo(zone)
    time = f"{hour:02d}:{minute:02d}"
    spec = DaysSpec(step=1, time=time, start=date(2026, 1, 1), tz=zone, dst_gap=gap, dst_fold=fold)
    fires = _fires_over_a_year(spec, start)
    assert all(a < b for a, b in itertools.pairwise(fires))
    per_day: dict[date, list[datetime]] = {}
    for fire in fires:
        per_day.setdefault(fire.astimezone(tz).date(), []).append(fire)
    first_day, last_day = min(per_day), max(per_day)
    day = first_day + timedelta(days=1)
    while day < last_day:  # whole days inside the year: each as the policy says
        wall = datetime.combine(day, spec.wall_time)
        passes = wall_instants(wall, tz)
        got = per_day.get(day, [])
        if not passes:
            assert len(got) == (0 if gap is DstGap.SKIP else 1)
        elif len(passes) == 2:
            wanted = {DstFold.FIRST: passes[:1], DstFold.LAST: passes[1:], DstFold.BOTH: passes}
            assert got == list(wanted[fold])
        else:
            assert got == list(passes)
        day += timedelta(days=1)
