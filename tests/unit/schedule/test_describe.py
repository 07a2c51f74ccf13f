"""describe(): how a spec reads in plain words."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from agentcron.schedule import AtSpec, CronSpec, DaysSpec, EverySpec, describe

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
        (AtSpec(at=T0, tz="Etc/GMT-2"), "once at 2026-11-22 14:00 (UTC+2)"),
        (CronSpec(expr="0 8 * * *", tz="Etc/GMT+5"), "every day at 08:00 (UTC-5)"),
        (CronSpec(expr="0 9,17 * * *"), "at 09:00 and 17:00 every day (cron '0 9,17 * * *') (UTC)"),
        (DaysSpec(step=2, unit="week", on=(2,), time="10:00", start=date(2026, 11, 24),
                  tz="America/New_York"),
         "every other week on Tuesday at 10:00, from the week of 2026-11-24 (America/New_York)"),
        (DaysSpec(step=3, unit="week", on=(1, 7), time="09:00", start=date(2026, 11, 23)),
         "every 3 weeks on Monday and Sunday at 09:00, from the week of 2026-11-23 (UTC)"),
        (DaysSpec(step=1, unit="week", on=(5,), time="16:00", start=date(2026, 11, 27)),
         "every week on Friday at 16:00, from the week of 2026-11-27 (UTC)"),
        (DaysSpec(step=3, time="08:00", start=date(2026, 11, 23), tz="Europe/Berlin"),
         "every 3 days at 08:00, from 2026-11-23 (Europe/Berlin)"),
        (DaysSpec(step=2, time="07:00", start=date(2026, 11, 23)),
         "every other day at 07:00, from 2026-11-23 (UTC)"),
    ],
)  # fmt: skip
def test_describe(spec: object, text: str) -> None:
    assert describe(spec) == text  # type: ignore[arg-type]
