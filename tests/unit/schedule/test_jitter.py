"""Jitter bounds and determinism."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentcron.schedule import AtSpec, CronSpec, EverySpec, jitter_offset, next_fire

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def test_jitter_is_deterministic_per_key_and_varies_between_keys() -> None:
    spec = CronSpec(expr="0 * * * *")
    offsets = {jitter_offset(spec, T0, f"job-{i}") for i in range(50)}
    assert jitter_offset(spec, T0, "job-1") == jitter_offset(spec, T0, "job-1")
    assert len(offsets) > 40  # spread, not a constant


@pytest.mark.parametrize(
    ("spec", "cap"),
    [
        (EverySpec(seconds=10, anchor=T0), timedelta(seconds=1)),  # 10% of the period
        (CronSpec(expr="* * * * *"), timedelta(seconds=6)),
        (CronSpec(expr="0 9 * * *"), timedelta(minutes=5)),  # absolute cap
    ],
)
def test_jitter_is_bounded_and_never_passes_the_next_fire(spec: object, cap: timedelta) -> None:
    for i in range(200):
        offset = jitter_offset(spec, T0, f"job-{i}")  # type: ignore[arg-type]
        assert timedelta(0) <= offset <= cap
        following = next_fire(spec, T0)  # type: ignore[arg-type]
        assert following is not None
        assert T0 + offset < following


def test_one_shots_are_not_jittered() -> None:
    assert jitter_offset(AtSpec(at=T0), T0, "job-1") == timedelta(0)


def test_jitter_rejects_bad_fraction() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        jitter_offset(CronSpec(expr="* * * * *"), T0, "k", fraction=1.0)
