"""Deterministic, bounded jitter: spreads fires of many jobs without ever passing the next fire."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from agentcron.schedule.spec import AtSpec, CronSpec, DaysSpec, EverySpec, next_fire

DEFAULT_FRACTION = 0.1
DEFAULT_CAP = timedelta(minutes=5)


def jitter_fraction(key: str) -> float:
    """A stable value in [0, 1) derived from `key` (e.g. a job id), equal in every process."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def jitter_offset(
    spec: CronSpec | EverySpec | AtSpec | DaysSpec,
    fire_at: datetime,
    key: str,
    *,
    fraction: float = DEFAULT_FRACTION,
    cap: timedelta = DEFAULT_CAP,
) -> timedelta:
    """The delay to add to `fire_at` for job `key`.

    Bounded by `fraction` (< 1) of the gap to the following fire and by `cap`, so a jittered
    fire always lands before the next one. One-shots get none: they have no period to spread in.
    """
    if not 0 <= fraction < 1:
        raise ValueError(f"jitter fraction must be in [0, 1), got {fraction}")
    following = None if isinstance(spec, AtSpec) else next_fire(spec, fire_at)
    if following is None:
        return timedelta(0)
    bound = min((following - fire_at) * fraction, cap)
    # Whole milliseconds keep stored instants readable and the result reproducible.
    return timedelta(milliseconds=int(bound / timedelta(milliseconds=1) * jitter_fraction(key)))


def jittered(
    spec: CronSpec | EverySpec | AtSpec | DaysSpec,
    fire_at: datetime,
    key: str,
    *,
    fraction: float = DEFAULT_FRACTION,
    cap: timedelta = DEFAULT_CAP,
) -> datetime:
    """`fire_at` moved later by the job's deterministic jitter."""
    return fire_at + jitter_offset(spec, fire_at, key, fraction=fraction, cap=cap)
