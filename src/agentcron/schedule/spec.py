"""Schedule specs (cron, every, at) as validated, JSON-stable models, and next_fire / upcoming."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from agentcron.schedule.cron import cron_next, parse_cron
from agentcron.schedule.errors import InvalidSpecError, ScheduleError
from agentcron.schedule.zones import get_zone, require_aware

MAX_INTERVAL_S = 3653 * 86400  # an `every` interval: at most 10 years
MAX_AHEAD = timedelta(days=36525)  # a one-time fire parse_when accepts: at most 100 years ahead


class _SpecBase(BaseModel):
    # Instants are normalised to UTC by their validators, so JSON always shows "...Z".
    model_config = ConfigDict(frozen=True, extra="forbid")


def _check_tz(value: str) -> str:
    get_zone(value)
    return value


def _check_aware(value: datetime) -> datetime:
    return require_aware(value, "instant")


class CronSpec(_SpecBase):
    """Fires when the wall clock in `tz` matches the 5-field cron expression `expr`."""

    kind: Literal["cron"] = "cron"
    expr: str
    tz: str = "UTC"

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


Spec = Annotated[CronSpec | EverySpec | AtSpec, Field(discriminator="kind")]
_SPEC_ADAPTER: TypeAdapter[CronSpec | EverySpec | AtSpec] = TypeAdapter(Spec)


def spec_from_data(data: dict[str, Any] | str | bytes) -> CronSpec | EverySpec | AtSpec:
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


def spec_to_data(spec: CronSpec | EverySpec | AtSpec) -> dict[str, Any]:
    """The JSON-ready dict a store keeps for `spec`."""
    return spec.model_dump(mode="json")


def spec_to_json(spec: CronSpec | EverySpec | AtSpec) -> str:
    """Compact JSON text for `spec`."""
    return spec.model_dump_json()


def next_fire(spec: CronSpec | EverySpec | AtSpec, after: datetime) -> datetime | None:
    """The first fire of `spec` strictly after the aware instant `after`, in UTC; None if none."""
    after = require_aware(after, "after")
    if isinstance(spec, CronSpec):
        return cron_next(spec.expr, spec.tz, after)
    if isinstance(spec, EverySpec):
        anchor = spec.anchor.astimezone(UTC)
        if after < anchor:
            return anchor
        k = (after - anchor) // spec.interval + 1
        return anchor + k * spec.interval
    at = spec.at.astimezone(UTC)
    return at if at > after else None


def upcoming(spec: CronSpec | EverySpec | AtSpec, after: datetime, n: int) -> list[datetime]:
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
