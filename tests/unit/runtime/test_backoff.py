"""The outage backoff (runtime/backoff.py): doubling pauses, capped, reset after a landed try."""

from __future__ import annotations

import asyncio

import pytest

from agentcron.runtime.backoff import FIRST_S, MOST_S, Backoff


def test_pauses_double_up_to_the_cap() -> None:
    backoff = Backoff()
    pauses = [backoff.pause() for _ in range(9)]
    assert pauses == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    assert (FIRST_S, MOST_S) == (0.1, 5.0)


def test_reset_starts_again_from_the_first_pause() -> None:
    backoff = Backoff(0.05, 0.2)
    assert [backoff.pause() for _ in range(4)] == [0.05, 0.1, 0.2, 0.2]
    backoff.reset()
    assert backoff.pause() == 0.05


@pytest.mark.parametrize(("first", "most"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_a_backoff_that_never_waits_or_shrinks_is_refused(first: float, most: float) -> None:
    with pytest.raises(ValueError, match="0 < first <= most"):
        Backoff(first, most)


async def test_sleep_waits_the_next_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def record(delay: float) -> None:
        slept.append(delay)

    monkeypatch.setattr(asyncio, "sleep", record)
    backoff = Backoff(0.1, 0.3)
    for _ in range(3):
        await backoff.sleep()
    assert slept == [0.1, 0.2, 0.3]
