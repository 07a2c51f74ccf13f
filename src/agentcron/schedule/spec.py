"""Schedule specs (cron, every, at, days) as validated, JSON-stable models; next_fire, upcoming."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from datetime import time as dt_time
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from agentcron.schedule.cron import cron_next, parse_cron
from agentcron.schedule.errors import InvalidSpecError, ScheduleError
from agentcron.schedule.zones import (
    DstFold,
    DstGap,
    get_zone,
    require_aware,
    resolve_wall,
    to_wall,
)

MAX_INTERVAL_S = 3653 * 86400  # an `every` interval: at most 10 years
MAX_AHEAD = timedelta(days=36525)  # a one-time fire parse_when accepts: at most 100 years ahead
MAX_DAY_STEP = 366  # a `days` spec: every N days, N <= 366
MAX_WEEK_STEP = 52  # ... or every N weeks, N <= 52
_HH_MM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


class _SpecBase(BaseModel):
    # Instants are normalised to UTC by their validators, so JSON always shows "...Z".
    model_config = ConfigDict(frozen=True, extra="forbid")


def _check_tz(value: str) -> str:
    get_zone(value)
    return value


def _check_aware(value: datetime) -> datetime:
    return require_aware(value, "instant")


DST_GAP_HELP = (
    "a wall-clock time the clocks skip (spring forward): shift (the default) fires at the "
    "first valid instant after it, skip does not fire that day"
)
DST_FOLD_HELP = (
    "a wall-clock time the clocks repeat (fall back): first (the default) fires at its first "
    "occurrence (an every-hour schedule at both: each is a real hour), last at the second, "
    "both at both"
)


def _gap_field() -> Any:
    # The default is left out of the JSON, so a spec without a policy of its own reads, is
    # stored and is shown exactly as before there was one.
    return Field(
        default=DstGap.SHIFT,
        exclude_if=lambda value: value == DstGap.SHIFT,
        description=DST_GAP_HELP,
    )


def _fold_field() -> Any:
    return Field(
        default=DstFold.FIRST,
        exclude_if=lambda value: value == DstFold.FIRST,
        description=DST_FOLD_HELP,
    )


class CronSpec(_SpecBase):
    """Fires when the wall clock in `tz` matches the 5-field cron expression `expr`; on the
    days daylight saving time skips or repeats a matching time, as `dst_gap` / `dst_fold` say.
    """

    kind: Literal["cron"] = "cron"
    expr: str
    tz: str = "UTC"
    dst_gap: DstGap = _gap_field()
    dst_fold: DstFold = _fold_field()

    @field_validator("expr")
    @classmethod
    def _normal_expr(cls, value: str) -> str:
        return parse_cron(value).expr

    _tz = field_validator("tz")(_check_tz)


class EverySpec(_SpecBase):
    """Fires at `anchor + k * seconds` (k >= 0): no drift from run time or restarts.

    `parse_when("every 2h", now)` anchors at `now`, so the first fire after `now` is now + 2h.
    """

    kind: Literal["every"] = "every"
    seconds: int = Field(gt=0, le=MAX_INTERVAL_S, description="interval in whole seconds")
    anchor: datetime
    tz: str = "UTC"  # only for display; the grid is absolute time

    _anchor = field_validator("anchor")(_check_aware)
    _tz = field_validator("tz")(_check_tz)

    @property
    def interval(self) -> timedelta:
        return timedelta(seconds=self.seconds)


class AtSpec(_SpecBase):
    """Fires once, at `at`."""

    kind: Literal["at"] = "at"
    at: datetime
    tz: str = "UTC"  # the zone the user meant; used for display

    _at = field_validator("at")(_check_aware)
    _tz = field_validator("tz")(_check_tz)


class DaysSpec(_SpecBase):
    """Fires at the wall-clock time `time` in `tz` on a calendar step counted from `start`.

    `unit="day"`: on `start` and every `step`-th local date after it ("every 3 days at 8am").
    `unit="week"`: on the ISO weekdays `on` (1 = Monday .. 7 = Sunday) of every `step`-th week,
    weeks starting on Monday and counted from the week of `start` ("every other tuesday at 10").
    The dates are local calendar dates, so a fire keeps its wall-clock time across DST changes
    (an `every` of N*86400 seconds would drift an hour); a time in a spring-forward gap or a
    fall-back fold fires as `dst_gap` / `dst_fold` say (by default: at the first valid instant
    after the gap; at the first occurrence in the fold).
    """

    kind: Literal["days"] = "days"
    step: int = Field(ge=1, le=MAX_DAY_STEP)
    unit: Literal["day", "week"] = "day"
    on: tuple[int, ...] = ()
    time: str = Field(description="wall-clock time HH:MM")
    start: date
    tz: str = "UTC"
    dst_gap: DstGap = _gap_field()
    dst_fold: DstFold = _fold_field()

    _tz = field_validator("tz")(_check_tz)

    @field_validator("time")
    @classmethod
    def _hh_mm(cls, value: str) -> str:
        if not _HH_MM.match(value):
            raise ValueError(f"time must be HH:MM (24-hour), got {value!r}")
        return value

    @field_validator("on")
    @classmethod
    def _weekdays(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(not 1 <= day <= 7 for day in value):
            raise ValueError("weekdays are 1 (Monday) .. 7 (Sunday)")
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _unit_fits(self) -> DaysSpec:
        if self.unit == "week" and not self.on:
            raise ValueError("a weekly step needs weekdays in `on`")
        if self.unit == "week" and self.step > MAX_WEEK_STEP:
            raise ValueError(f"a weekly step must be at most {MAX_WEEK_STEP}")
        if self.unit == "day" and self.on:
            raise ValueError("`on` (weekdays) only goes with unit 'week'")
        return self

    @property
    def wall_time(self) -> dt_time:
        hour, minute = self.time.split(":")
        return dt_time(int(hour), int(minute))

    def fires_on(self, day: date) -> bool:
        """True when the local date `day` is one of this spec's dates."""
        if day < self.start:
            return False
        if self.unit == "day":
            return (day - self.start).days % self.step == 0
        first_monday = self.start - timedelta(days=self.start.weekday())
        week = (day - first_monday).days // 7
        return week % self.step == 0 and day.isoweekday() in self.on


Spec = Annotated[CronSpec | EverySpec | AtSpec | DaysSpec, Field(discriminator="kind")]
_SPEC_ADAPTER: TypeAdapter[CronSpec | EverySpec | AtSpec | DaysSpec] = TypeAdapter(Spec)


def spec_from_data(data: dict[str, Any] | str | bytes) -> CronSpec | EverySpec | AtSpec | DaysSpec:
    """Build a spec from its JSON text or decoded JSON object; raise InvalidSpecError."""
    try:
        if isinstance(data, str | bytes):
            return _SPEC_ADAPTER.validate_json(data)
        return _SPEC_ADAPTER.validate_python(data)
    except ValidationError as exc:
        # A ScheduleError raised inside a validator carries the clearest message.
        for err in exc.errors():
            cause = err.get("ctx", {}).get("error")
            if isinstance(cause, ScheduleError):
                raise type(cause)(str(cause)) from exc
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or 'spec'}: {err['msg']}"
            for err in exc.errors()
        )
        raise InvalidSpecError(f"invalid schedule spec: {problems}") from exc


def spec_to_data(spec: CronSpec | EverySpec | AtSpec | DaysSpec) -> dict[str, Any]:
    """The JSON-ready dict a store keeps for `spec`."""
    return spec.model_dump(mode="json")


def spec_to_json(spec: CronSpec | EverySpec | AtSpec | DaysSpec) -> str:
    """Compact JSON text for `spec`."""
    return spec.model_dump_json()


def with_dst(
    spec: CronSpec | EverySpec | AtSpec | DaysSpec,
    gap: DstGap | str | None = None,
    fold: DstFold | str | None = None,
) -> CronSpec | EverySpec | AtSpec | DaysSpec:
    """`spec` with the DST policy `gap` / `fold` (None: keep its own); raise InvalidSpecError
    for a policy other than the default on an interval or a one-time spec: those are absolute
    instants, which daylight saving time does not move.
    """
    try:
        gap = None if gap is None else DstGap(gap)
        fold = None if fold is None else DstFold(fold)
    except ValueError as exc:
        raise InvalidSpecError(
            f"{exc}; dst_gap is one of: shift, skip; dst_fold one of: first, last, both"
        ) from exc
    if isinstance(spec, CronSpec | DaysSpec):
        update = {"dst_gap": gap, "dst_fold": fold}
        return spec.model_copy(update={k: v for k, v in update.items() if v is not None})
    if gap not in (None, DstGap.SHIFT) or fold not in (None, DstFold.FIRST):
        what = "an interval" if isinstance(spec, EverySpec) else "a one-time schedule"
        raise InvalidSpecError(
            f"a DST policy (dst_gap, dst_fold) is for wall-clock schedules (a cron expression, "
            f"a time of day); this is {what}, which runs in absolute time"
        )
    return spec


def carry_dst(
    old: CronSpec | EverySpec | AtSpec | DaysSpec, new: CronSpec | EverySpec | AtSpec | DaysSpec
) -> CronSpec | EverySpec | AtSpec | DaysSpec:
    """`new` with `old`'s DST policy when both are wall-clock schedules: a job given a new
    time of day keeps its policy; an interval or a one-time schedule has none to keep.
    """
    if isinstance(old, CronSpec | DaysSpec) and isinstance(new, CronSpec | DaysSpec):
        return with_dst(new, old.dst_gap, old.dst_fold)
    return new


def next_fire(spec: CronSpec | EverySpec | AtSpec | DaysSpec, after: datetime) -> datetime | None:
    """The first fire of `spec` strictly after the aware instant `after`, in UTC; None if none."""
    after = require_aware(after, "after")
    if isinstance(spec, CronSpec):
        return cron_next(spec.expr, spec.tz, after, gap=spec.dst_gap, fold=spec.dst_fold)
    if isinstance(spec, EverySpec):
        anchor = spec.anchor.astimezone(UTC)
        if after < anchor:
            return anchor
        k = (after - anchor) // spec.interval + 1
        return anchor + k * spec.interval
    if isinstance(spec, DaysSpec):
        return _days_next(spec, after)
    at = spec.at.astimezone(UTC)
    return at if at > after else None


def _days_next(spec: DaysSpec, after: datetime) -> datetime:
    zone = get_zone(spec.tz)
    # The day before `after`'s local date: a fire late on it can still be after `after` in a
    # fold; the loop ends within one full cycle (step weeks or days) plus that day, or a few
    # more when `skip` drops a day the clocks skip its time.
    day = max(spec.start, to_wall(after, zone).date() - timedelta(days=1))
    if spec.unit == "day":
        behind = (day - spec.start).days % spec.step
        day += timedelta(days=(spec.step - behind) % spec.step)
    while True:
        if spec.fires_on(day):
            wall = datetime.combine(day, spec.wall_time)
            for instant in resolve_wall(wall, zone, gap=spec.dst_gap, fold=spec.dst_fold):
                if instant > after:
                    return instant
        day += timedelta(days=spec.step if spec.unit == "day" else 1)


def upcoming(
    spec: CronSpec | EverySpec | AtSpec | DaysSpec, after: datetime, n: int
) -> list[datetime]:
    """The next `n` fires of `spec` after `after` (fewer if the spec ends)."""
    if n < 0:
        raise InvalidSpecError(f"n must be >= 0, got {n}")
    out: list[datetime] = []
    cursor = after
    while len(out) < n:
        nxt = next_fire(spec, cursor)
        if nxt is None:
            break
        out.append(nxt)
        cursor = nxt
    return out
