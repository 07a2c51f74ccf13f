"""describe(): how a spec reads in plain words."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentcron.schedule import AtSpec, CronSpec, EverySpec, describe

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        (CronSpec(expr="0 9 * * 1-5", tz="Europe/Berlin"), "every weekday at 09:00 (Europe/Berlin)"),
        (CronSpec(expr="30 7 * * *"), "every day at 07:30 (UTC)"),
        (CronSpec(expr="0 8 * * 1"), "every Monday at 08:00 (UTC)"),
        (CronSpec(expr="0 18 * * 1,3,5"), "every Monday, Wednesday and Friday at 18:00 (UTC)"),
        (CronSpec(expr="0 10 * * 0,6"), "every weekend day at 10:00 (UTC)"),
        (CronSpec(expr="@hourly"), "every hour (UTC)"),
        (CronSpec(expr="0 0 L * *"), "at 00:00 on the last day of every month (cron '0 0 L * *') (UTC)"),
        (EverySpec(seconds=7200, anchor=T0), "every 2 hours"),
        (EverySpec(seconds=60, anchor=T0), "every minute"),
        (EverySpec(seconds=5400, anchor=T0), "every 90 minutes"),
        (EverySpec(seconds=3661, anchor=T0), "every 1h 1m 1s"),
        (AtSpec(at=T0, tz="Europe/Berlin"), "once at 2026-11-22 13:00 (Europe/Berlin)"),
    ],
)  # fmt: skip
def test_describe(spec: object, text: str) -> None:
    assert describe(spec) == text  # type: ignore[arg-type]
