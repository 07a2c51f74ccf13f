"""parse_when: a table of accepted phrases with expected specs, and rejected ones with messages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentcron.schedule import (
    ACCEPTED_FORMS,
    AtSpec,
    CronSpec,
    EverySpec,
    InvalidSpecError,
    InvalidZoneError,
    PastInstantError,
    WhenParseError,
    parse_when,
)

# Sunday 2026-11-22, 15:00 in Berlin (CET, +01:00).
NOW = datetime(2026, 11, 22, 14, 0, tzinfo=UTC)
B = "Europe/Berlin"


def at(iso: str, tz: str = B) -> AtSpec:
    return AtSpec(at=datetime.fromisoformat(iso), tz=tz)


ACCEPTED = [
    # delays
    ("30m", at("2026-11-22T14:30Z")),
    ("2h 15m", at("2026-11-22T16:15Z")),
    ("2h, 15m", at("2026-11-22T16:15Z")),
    ("in 3 hours", at("2026-11-22T17:00Z")),
    ("in 90 seconds", at("2026-11-22T14:01:30Z")),
    ("90s", at("2026-11-22T14:01:30Z")),
    ("1.5h", at("2026-11-22T15:30Z")),
    ("in 1 hour and 30 minutes", at("2026-11-22T15:30Z")),
    ("an hour", at("2026-11-22T15:00Z")),
    ("in a day", at("2026-11-23T14:00Z")),
    ("10 minutes from now", at("2026-11-22T14:10Z")),
    ("In 2 Weeks", at("2026-12-06T14:00Z")),
    # wall-clock one-shots (Berlin is +01:00 in November)
    ("tomorrow at 09:00", at("2026-11-23T09:00+01:00")),
    # NOW is 15:00 in Berlin: "tonight" reads a small hour as the evening
    ("tonight at 9", at("2026-11-22T21:00+01:00")),
    ("tonight at 9pm", at("2026-11-22T21:00+01:00")),
    ("tonight at 10:30", at("2026-11-22T22:30+01:00")),
    ("tonight at 23:15", at("2026-11-22T23:15+01:00")),
    ("tomorrow 9:15pm", at("2026-11-23T21:15+01:00")),
    ("at 17:30", at("2026-11-22T17:30+01:00")),  # later today
    ("at 13:00", at("2026-11-23T13:00+01:00")),  # already past today: tomorrow
    ("17:30", at("2026-11-22T17:30+01:00")),
    ("noon", at("2026-11-23T12:00+01:00")),
    ("today at 23:00", at("2026-11-22T23:00+01:00")),
    ("monday 8am", at("2026-11-23T08:00+01:00")),
    ("8am monday", at("2026-11-23T08:00+01:00")),
    ("on friday at noon", at("2026-11-27T12:00+01:00")),
    ("next friday at 5pm", at("2026-11-27T17:00+01:00")),
    ("sunday 16:00", at("2026-11-22T16:00+01:00")),  # today, still ahead
    ("sunday 10:00", at("2026-11-29T10:00+01:00")),  # today, passed: next week
    ("12am tomorrow", at("2026-11-23T00:00+01:00")),
    # ISO 8601: naive = in tz; explicit offsets respected
    ("2026-12-01T09:00", at("2026-12-01T09:00+01:00")),
    ("2026-12-01 09:00:30", at("2026-12-01T09:00:30+01:00")),
    ("2026-12-01T09:00+05:00", at("2026-12-01T04:00Z")),
    ("2026-12-01T09:00Z", at("2026-12-01T09:00Z")),
    # trailing zone
    ("tomorrow at 9 America/New_York", at("2026-11-23T09:00-05:00", "America/New_York")),
    ("2026-12-01T09:00 Asia/Tokyo", at("2026-12-01T09:00+09:00", "Asia/Tokyo")),
    ("in 30m UTC", at("2026-11-22T14:30Z", "UTC")),
    # recurring
    ("every 2h", EverySpec(seconds=7200, anchor=NOW, tz=B)),
    ("every 30 minutes", EverySpec(seconds=1800, anchor=NOW, tz=B)),
    ("every 1.5h", EverySpec(seconds=5400, anchor=NOW, tz=B)),
    ("every hour", EverySpec(seconds=3600, anchor=NOW, tz=B)),
    ("hourly", EverySpec(seconds=3600, anchor=NOW, tz=B)),
    ("every 2 days", EverySpec(seconds=172800, anchor=NOW, tz=B)),
    ("every day at 7:30", CronSpec(expr="30 7 * * *", tz=B)),
    ("every day", CronSpec(expr="0 15 * * *", tz=B)),  # at the current local time
    ("daily", CronSpec(expr="0 15 * * *", tz=B)),
    ("every weekday at 9", CronSpec(expr="0 9 * * 1-5", tz=B)),
    ("every weekdays at 9", CronSpec(expr="0 9 * * 1-5", tz=B)),
    ("every monday at 8am", CronSpec(expr="0 8 * * 1", tz=B)),
    ("each sunday at 8", CronSpec(expr="0 8 * * 0", tz=B)),
    ("every mon, wed and fri at 18:00", CronSpec(expr="0 18 * * 1,3,5", tz=B)),
    ("every mon, wed & fri at 8", CronSpec(expr="0 8 * * 1,3,5", tz=B)),
    ("every tue&thu at 7", CronSpec(expr="0 7 * * 2,4", tz=B)),
    ("every weekend at 10am", CronSpec(expr="0 10 * * 0,6", tz=B)),
    ("every weekday at 9 Europe/London", CronSpec(expr="0 9 * * 1-5", tz="Europe/London")),
    # raw cron
    ("0 9 * * 1-5", CronSpec(expr="0 9 * * 1-5", tz=B)),
    ("*/15   9-17 * * MON-FRI", CronSpec(expr="*/15 9-17 * * MON-FRI", tz=B)),
    ("@daily", CronSpec(expr="0 0 * * *", tz=B)),
    ("0 9 * * 1-5 America/New_York", CronSpec(expr="0 9 * * 1-5", tz="America/New_York")),
]


@pytest.mark.parametrize(("text", "expected"), ACCEPTED)
def test_accepted_phrases(text: str, expected: object) -> None:
    assert parse_when(text, NOW, B) == expected


def test_default_zone_is_utc() -> None:
    assert parse_when("tomorrow at 09:00", NOW) == AtSpec(at=datetime(2026, 11, 23, 9, tzinfo=UTC))


def test_wall_clock_phrases_follow_the_dst_policy() -> None:
    # 02:30 does not exist in Berlin on 2026-03-29: the first valid instant after it is 03:00 CEST.
    now = datetime(2026, 3, 28, 12, tzinfo=UTC)
    assert parse_when("tomorrow at 02:30", now, B) == at("2026-03-29T03:00+02:00")
    # 02:30 happens twice on 2026-10-25: the first occurrence (CEST) is meant.
    now = datetime(2026, 10, 24, 12, tzinfo=UTC)
    assert parse_when("tomorrow at 02:30", now, B) == at("2026-10-25T02:30+02:00")


def test_microseconds_of_now_are_kept_for_delays() -> None:
    now = NOW + timedelta(microseconds=250)
    assert parse_when("in 1 second", now) == AtSpec(at=now + timedelta(seconds=1))


REJECTED = [
    ("", WhenParseError, "cannot read '' as a time (empty)"),
    ("soon", WhenParseError, "cannot read 'soon' as a time"),
    ("tomorrow", WhenParseError, "cannot read 'tomorrow'"),
    ("yesterday at 9", WhenParseError, "cannot read 'yesterday at 9'"),
    ("at 25:00", WhenParseError, "cannot read 'at 25:00'"),
    ("13pm", WhenParseError, "cannot read '13pm'"),
    ("every blursday at 9", WhenParseError, "unknown day 'blursday'"),
    ("every day at 7:61", WhenParseError, "unknown time of day '7:61'"),
    ("every 0s", WhenParseError, "the interval must be at least 1 second"),
    ("2026-12-01", WhenParseError, "a date alone is ambiguous"),
    ("2026-13-01T09:00", WhenParseError, "not a valid ISO 8601 date-time"),
    ("tomorrow at 9 Mars/Phobos", WhenParseError, "unknown time zone 'Mars/Phobos'"),
    ("today at 9", PastInstantError, "a one-shot time must be in the future"),
    ("2025-01-01T00:00", PastInstantError, "a one-shot time must be in the future"),
    ("in 0 minutes", PastInstantError, "a delay must be positive"),
    ("0 0 * * * *", WhenParseError, "6 fields (a seconds or year field) are not supported"),
    ("H 9 * * *", WhenParseError, "'H' (hashed value) in the minute field"),
    ("0 9 ? * MON", WhenParseError, "'?' in the day-of-month field"),
    ("@reboot", WhenParseError, "'@reboot' is not supported"),
]


@pytest.mark.parametrize(("text", "error", "message"), REJECTED)
def test_rejected_phrases(text: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as info:
        parse_when(text, NOW, B)
    assert message in str(info.value)


@pytest.mark.parametrize("text", ["soon", "tomorrow", "at 25:00", "every blursday at 9", ""])
def test_unreadable_phrases_list_the_accepted_forms(text: str) -> None:
    with pytest.raises(WhenParseError) as info:
        parse_when(text, NOW, B)
    assert ACCEPTED_FORMS in str(info.value)


def test_bad_zone_argument_and_naive_now() -> None:
    with pytest.raises(InvalidZoneError):
        parse_when("30m", NOW, "Nowhere/Special")
    with pytest.raises(InvalidSpecError, match="timezone-aware"):
        parse_when("30m", datetime(2026, 1, 1))


def test_intervals_and_delays_have_upper_bounds_not_an_overflow() -> None:
    with pytest.raises(WhenParseError, match="at most 10 years"):
        parse_when("every 1000000000000 seconds", NOW)
    with pytest.raises(WhenParseError, match="at most 100 years"):
        parse_when("in 1000000000000 seconds", NOW)
    with pytest.raises(WhenParseError):
        parse_when("9999-12-31T23:59:59-01:00", NOW)
    with pytest.raises(ValueError, match="less than or equal"):
        EverySpec(seconds=10**12, anchor=NOW)
    assert parse_when("every 3653 days", NOW).kind == "every"
