"""Cron expressions: validation (5 fields, macros, L and #) and next fire under a DST policy."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

from cronsim import CronSim, CronSimError

from agentcron.schedule.errors import InvalidCronError
from agentcron.schedule.zones import (
    MAX_SHIFT,
    DstFold,
    DstGap,
    get_zone,
    near_transition,
    resolve_wall,
    to_wall,
)

MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
_ACCEPTED = (
    "5 fields 'minute hour day-of-month month day-of-week' with * , - / and names, "
    "L (last day / last weekday of month), # (nth weekday), or one of " + " ".join(sorted(MACROS))
)
# A Jenkins 'H' token: H, H/5, H(0-29); day names such as THU also contain an H.
_HASHED = re.compile(r"(^|[,/-])H($|[,/(-])")
_EPOCH = datetime(2000, 1, 1)


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A validated 5-field cron expression."""

    expr: str
    # True when the hour field matches every hour: under the default fold policy (`first`)
    # such schedules follow real time in a DST fold (both passes fire) so that `0 * * * *`
    # fires every real hour.
    every_hour: bool


def _reject_unsupported(expr: str, fields: list[str]) -> None:
    if len(fields) != 5:
        if len(fields) == 6:
            detail = "6 fields (a seconds or year field) are not supported"
        else:
            detail = f"{len(fields)} fields given"
        raise InvalidCronError(f"invalid cron expression {expr!r}: {detail}; expected {_ACCEPTED}")
    for name, field in zip(FIELD_NAMES, fields, strict=True):
        upper = field.upper()
        if "?" in upper:
            raise InvalidCronError(
                f"invalid cron expression {expr!r}: '?' in the {name} field is Quartz syntax "
                "and is not supported; use '*'"
            )
        if _HASHED.search(upper):
            raise InvalidCronError(
                f"invalid cron expression {expr!r}: 'H' (hashed value) in the {name} field is "
                "not supported; agentcron spreads load with per-job jitter instead"
            )
        if name == "day-of-month" and re.search(r"\dW", upper):
            raise InvalidCronError(
                f"invalid cron expression {expr!r}: 'W' (nearest weekday) in the {name} field "
                "is not supported; 'LW' (last weekday of the month) is"
            )


@lru_cache(maxsize=4096)
def parse_cron(expr: str) -> CronExpr:
    """Validate `expr` and return its normal form; raise InvalidCronError naming the problem."""
    text = " ".join(expr.split())
    if not text:
        raise InvalidCronError(f"empty cron expression; expected {_ACCEPTED}")
    if text.startswith("@"):
        macro = text.lower()
        if macro == "@reboot":
            raise InvalidCronError(
                "'@reboot' is not supported: agentcron schedules are time-based; "
                f"expected {_ACCEPTED}"
            )
        if macro not in MACROS:
            raise InvalidCronError(f"unknown cron macro {text!r}; expected {_ACCEPTED}")
        text = MACROS[macro]
    fields = text.split(" ")
    _reject_unsupported(expr, fields)
    # A one-value range with a step ("9-9/2") is that value; cronsim would read it as "9/2"
    # (9, 11, ... 23).
    fields = [re.sub(r"(?<![\w-])(\d+)-\1/\d+(?![\w-])", r"\1", field) for field in fields]
    text = " ".join(fields)
    try:
        sim = CronSim(text, _EPOCH)
        next(sim)
    except CronSimError as exc:
        raise InvalidCronError(f"invalid cron expression {expr!r}: {exc}") from exc
    except StopIteration as exc:
        raise InvalidCronError(f"cron expression {expr!r} never fires") from exc
    return CronExpr(expr=text, every_hour=sim.hours == set(range(24)))


def cron_next(
    expr: str,
    tz_name: str,
    after: datetime,
    *,
    gap: DstGap = DstGap.SHIFT,
    fold: DstFold = DstFold.FIRST,
) -> datetime | None:
    """The first fire of `expr` in zone `tz_name` strictly after the aware instant `after`.

    Wall-clock times are matched on the local calendar, then resolved to instants by
    `zones.resolve_wall` under the DST policy `gap` / `fold`. With `fold` `first` (the
    default) an every-hour schedule still fires in both passes of a fold: each is a real hour,
    so that `0 * * * *` fires every real hour.
    """
    cron = parse_cron(expr)
    tz = get_zone(tz_name)
    if cron.every_hour and fold is DstFold.FIRST:
        fold = DstFold.BOTH
    after = after.astimezone(UTC)
    start = to_wall(after, tz)
    if near_transition(after, tz):
        # In or just after a fold, wall times before `after`'s own can still occur later.
        start -= MAX_SHIFT
    best: datetime | None = None
    best_wall: datetime | None = None
    # cronsim iterates naive wall-clock times (plain calendar math) and stops after 50 idle years.
    for wall in CronSim(cron.expr, start):
        if best_wall is not None and wall - best_wall > MAX_SHIFT:
            break
        for instant in resolve_wall(wall, tz, gap=gap, fold=fold):
            if instant > after and (best is None or instant < best):
                best = instant
                best_wall = to_wall(instant, tz)
        if best is not None and not near_transition(best, tz):
            break
    return best
