"""parse_when: tables of accepted phrases with their specs (every class of the phrases people
type, in fixed zones and across DST changes), refusals with their one-line reasons and
suggestions, and the phrase corpus (tests/unit/schedule/phrase_corpus.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcron.schedule import (
    ACCEPTED_FORMS,
    AtSpec,
    CronSpec,
    DaysSpec,
    EverySpec,
    InvalidSpecError,
    InvalidZoneError,
    PastInstantError,
    ScheduleError,
    WhenParseError,
    parse_when,
    upcoming,
)
from agentcron.schedule.phrases import VOCABULARY
from tests.unit.schedule.phrase_corpus import CORPUS, REFUSE, ZONE, short

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
    ("in 10 minutes from now", at("2026-11-22T14:10Z")),
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
    ("this sunday at 18:00", at("2026-11-22T18:00+01:00")),  # today, still ahead
    ("next sunday at 18:00", at("2026-11-29T18:00+01:00")),  # said on a sunday: a week on
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
    ("", WhenParseError, "cannot read '' as a time: empty"),
    ("soon", WhenParseError, "cannot read 'soon' as a time; accepted forms"),
    ("tomorrow", WhenParseError, "add a time of day, e.g. 'tomorrow at 9am'"),
    (
        "yesterday at 9",
        WhenParseError,
        "cannot read 'yesterday at 9' as a time: unknown word 'yesterday'",
    ),
    ("at 25:00", WhenParseError, "unknown time of day '25:00'"),
    ("13pm", WhenParseError, "unknown time of day '13pm'"),
    ("every blursday at 9", WhenParseError, "unknown word 'blursday'"),
    ("every day at 7:61", WhenParseError, "unknown time of day '7:61'"),
    ("every 0s", WhenParseError, "the interval must be at least 1 second"),
    ("2026-12-01", WhenParseError, "a date alone is ambiguous"),
    ("2026-13-01T09:00", WhenParseError, "not a valid ISO 8601 date-time"),
    ("tomorrow at 9 Mars/Phobos", WhenParseError, "unknown time zone 'Mars/Phobos'"),
    ("today at 9", PastInstantError, "2026-11-22 09:00 Europe/Berlin is in the past"),
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


@pytest.mark.parametrize("text", ["soon", "whenever", "", "next week"])
def test_phrases_with_nothing_known_name_a_few_accepted_forms(text: str) -> None:
    with pytest.raises(WhenParseError) as info:
        parse_when(text, NOW, B)
    assert (ACCEPTED_FORMS in str(info.value)) is (text != "")


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


# --- every class of the phrases people type (issue 28), read at NOW in Berlin ----------------

# Sunday 2026-11-22 15:00 in Berlin (+01:00). Short forms as in phrase_corpus.short.
PHRASES = [
    # monthly, yearly and n-th weekday rules (cron has L and #)
    ("monthly on the 1st at 9am", "cron 0 9 1 * *"),
    ("first monday of every month at 9", "cron 0 9 * * 1#1"),
    ("last friday of every month at 5pm", "cron 0 17 * * 5L"),
    ("first of every month at 9", "cron 0 9 1 * *"),
    ("every 15th at 9", "cron 0 9 15 * *"),
    ("every first monday at 9", "cron 0 9 * * 1#1"),
    ("every hour at :15", "cron 15 * * * *"),
    ("the last day of every month at 18:00", "cron 0 18 L * *"),
    ("every year on dec 25 at 9", "cron 0 9 25 12 *"),
    # day parts (morning 09:00, afternoon 15:00, evening 18:00, night 21:00, end of day 17:00)
    ("tomorrow morning", "at 2026-11-23 09:00"),
    ("tonight", "at 2026-11-22 21:00"),
    ("end of day", "at 2026-11-22 17:00"),
    ("day after tomorrow at 10", "at 2026-11-24 10:00"),
    ("tomorrow evening at 7", "at 2026-11-23 19:00"),
    ("this afternoon at 4", "at 2026-11-22 16:00"),
    ("this evening at 4", "at 2026-11-22 16:00"),
    ("tonight at 1", "at 2026-11-23 01:00"),  # the night's small hours: the next date
    ("midnight tonight", "at 2026-11-23 00:00"),
    ("friday night at 1", "at 2026-11-28 01:00"),
    ("friday night at 11", "at 2026-11-27 23:00"),
    ("at 5 in the morning", "at 2026-11-23 05:00"),
    ("every night at 1", "cron 0 1 * * *"),
    # zones as people write them
    ("9am PST", "at 2026-11-22 09:00 @America/Los_Angeles"),
    ("at 9am Tokyo time", "at 2026-11-23 09:00 @Asia/Tokyo"),
    ("at 8 UTC+2", "at 2026-11-23 08:00 @Etc/GMT-2"),
    ("at 8 utc-5", "at 2026-11-23 08:00 @Etc/GMT+5"),
    ("18:00 CET", "at 2026-11-22 18:00"),
    ("9am EST every weekday", "cron 0 9 * * 1-5 @America/New_York"),
    ("noon in Sydney", "at 2026-11-23 12:00 @Australia/Sydney"),
    ("at 9am new york time", "at 2026-11-23 09:00 @America/New_York"),
    ("every day at 8 in london", "cron 0 8 * * * @Europe/London"),
    # dates in words and ordinals
    ("on dec 25 at 9", "at 2026-12-25 09:00"),
    ("the 3rd at 14:00", "at 2026-12-03 14:00"),
    ("March 5th 9am", "at 2027-03-05 09:00"),
    ("the 25th of december at 9am", "at 2026-12-25 09:00"),
    ("jan 1 2027 at 0:00", "at 2027-01-01 00:00"),
    ("feb 29 at 9", "at 2028-02-29 09:00"),  # the next february that has one
    # other ways to say repeat; the time before the repeat
    ("daily at 8", "cron 0 8 * * *"),
    ("weekly on sunday at 10", "cron 0 10 * * 0"),
    ("mondays at 10", "cron 0 10 * * 1"),
    ("weekdays at 7:45", "cron 45 7 * * 1-5"),
    ("every morning at 7", "cron 0 7 * * *"),
    ("at 3pm every day", "cron 0 15 * * *"),
    ("9am every weekday", "cron 0 9 * * 1-5"),
    ("mon-fri at 9", "cron 0 9 * * 1-5"),
    ("every tuesday and every thursday at 10", "cron 0 10 * * 2,4"),
    ("every day except sunday at 9", "cron 0 9 * * 1-6"),
    ("weekdays except friday at 9", "cron 0 9 * * 1-4"),
    ("weekday mornings at 8", "cron 0 8 * * 1-5"),
    ("mornings at 7", "cron 0 7 * * *"),
    # every N days/weeks, tied to a weekday or a time: a calendar step in local time
    ("every other tuesday at 10am", "days 2 week 2 10:00 from 2026-11-24"),
    ("every 2 weeks on monday at 9", "days 2 week 1 09:00 from 2026-11-23"),
    ("every 3 days at 8am", "days 3 day 08:00 from 2026-11-23"),
    ("every 4 days at 6pm", "days 4 day 18:00 from 2026-11-22"),  # today's 18:00 is ahead
    ("fortnightly on monday at 9", "days 2 week 1 09:00 from 2026-11-23"),
    ("every 2 weeks on tuesday and thursday at 10", "days 2 week 2,4 10:00 from 2026-11-24"),
    ("every other week at 9", "days 2 week 7 09:00 from 2026-11-29"),  # on today's weekday
    # several times, or a window (the end hour is not included)
    ("every day at 9am and 5pm", "cron 0 9,17 * * *"),
    ("every hour on the half hour", "cron 30 * * * *"),
    ("every 15 minutes between 9 and 17 on weekdays", "cron */15 9-16 * * 1-5"),
    ("every 30 minutes from 9am to 5pm", "cron */30 9-16 * * *"),
    ("every 2 hours between 8 and 20", "cron 0 8-19/2 * * *"),
    ("every 2 hours between 9 and 10", "cron 0 9 * * *"),  # 09:00 only ("9-9/2" runs to 23:00)
    ("every 3 hours between 9 and 12", "cron 0 9 * * *"),
    ("every hour between 9 and 17", "cron 0 9-16 * * *"),
    ("every 30 minutes between 9 and 10", "cron */30 9 * * *"),
    # durations in words, a delay plus a time
    ("in half an hour", "at 2026-11-22 15:30"),
    ("in an hour and a half", "at 2026-11-22 16:30"),
    ("in 2 days at 10am", "at 2026-11-24 10:00"),
    ("1h30m", "at 2026-11-22 16:30"),
    ("3 days from now at noon", "at 2026-11-25 12:00"),
    # spoken and dotted clock times (a dotted one is on the 24-hour clock; a spoken one needs
    # its am or pm, or a day part: see test_a_spoken_time_without_am_or_pm_is_refused)
    ("9.30", "at 2026-11-23 09:30"),
    ("half past nine am", "at 2026-11-23 09:30"),
    ("half past nine tonight", "at 2026-11-22 21:30"),
    ("quarter to five pm", "at 2026-11-22 16:45"),
    ("quarter to one pm", "at 2026-11-23 12:45"),
    ("twenty past seven am", "at 2026-11-23 07:20"),
    ("six o'clock pm", "at 2026-11-22 18:00"),
]


@pytest.mark.parametrize(("text", "expected"), PHRASES)
def test_the_phrases_people_type(text: str, expected: str) -> None:
    assert short(parse_when(text, NOW, B)) == expected


def test_abbreviations_mean_the_places_clock_all_year() -> None:
    # "9am PST" in July is 09:00 on the Los Angeles clock (PDT then), as the writer means.
    july = datetime(2026, 7, 1, 12, tzinfo=UTC)
    assert parse_when("9am PST", july, B) == at("2026-07-01T09:00-07:00", "America/Los_Angeles")


# --- DST: the wall-clock time is kept across the switches -----------------------------------

NY, SYD = "America/New_York", "Australia/Sydney"
DST = [
    # New York springs forward on 2026-03-08 (02:00 -> 03:00), falls back on 2026-11-01.
    ("every 3 days at 8am", NY, "2026-03-06T12:00Z",
     ["2026-03-06T08:00-05:00", "2026-03-09T08:00-04:00", "2026-03-12T08:00-04:00"]),
    ("every other sunday at 2:30am", NY, "2026-03-07T12:00Z",
     ["2026-03-08T03:00-04:00", "2026-03-22T02:30-04:00"]),  # in the gap: its end
    ("tomorrow at 2:30am", NY, "2026-03-07T12:00Z", ["2026-03-08T03:00-04:00"]),
    ("tomorrow at 1:30am", NY, "2026-10-31T12:00Z", ["2026-11-01T01:30-04:00"]),  # fold: first
    ("every day at 9am and 5pm", NY, "2026-10-31T20:00Z",
     ["2026-10-31T17:00-04:00", "2026-11-01T09:00-05:00", "2026-11-01T17:00-05:00"]),
    ("every 2 weeks on sunday at 1:30", NY, "2026-10-31T12:00Z",
     ["2026-11-01T01:30-04:00", "2026-11-15T01:30-05:00"]),
    ("in 2 days at 10am", NY, "2026-03-07T12:00Z", ["2026-03-09T10:00-04:00"]),
    # Berlin: 2026-03-29 (02:00 -> 03:00) and 2026-10-25 (03:00 -> 02:00).
    ("every other day at 02:30", B, "2026-03-26T12:00Z",
     ["2026-03-27T02:30+01:00", "2026-03-29T03:00+02:00", "2026-03-31T02:30+02:00"]),
    ("every 2 weeks on sunday at 2:30", B, "2026-10-24T12:00Z",
     ["2026-10-25T02:30+02:00", "2026-11-08T02:30+01:00"]),
    ("last sunday of every month at 2:30", B, "2026-10-01T00:00Z",
     ["2026-10-25T02:30+02:00", "2026-11-29T02:30+01:00"]),
    ("tonight", B, "2026-03-29T10:00Z", ["2026-03-29T21:00+02:00"]),
    ("every weekday at 9 in berlin", B, "2026-03-27T12:00Z",
     ["2026-03-30T09:00+02:00", "2026-03-31T09:00+02:00"]),
    # Sydney falls back on 2026-04-05 (03:00 -> 02:00), springs forward on 2026-10-04.
    ("every other sunday at 2:30am", SYD, "2026-04-04T00:00Z",
     ["2026-04-05T02:30+11:00", "2026-04-19T02:30+10:00"]),
    ("every other day at 2:30am", SYD, "2026-10-02T20:00Z",
     ["2026-10-04T03:00+11:00", "2026-10-06T02:30+11:00"]),
    ("tomorrow morning", SYD, "2026-10-03T00:00Z", ["2026-10-04T09:00+11:00"]),
    ("every 3 weeks on monday at 9", SYD, "2026-03-29T12:00Z",
     ["2026-03-30T09:00+11:00", "2026-04-20T09:00+10:00"]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "tz", "now", "fires"), DST)
def test_phrases_keep_their_wall_clock_time_across_dst(
    text: str, tz: str, now: str, fires: list[str]
) -> None:
    spec = parse_when(text, datetime.fromisoformat(now), tz)
    got = upcoming(spec, datetime.fromisoformat(now), len(fires))
    assert got == [datetime.fromisoformat(fire) for fire in fires]


def test_a_calendar_step_is_not_a_fixed_number_of_seconds() -> None:
    # An `every` of 3 * 86400 s would fire at 09:00 after New York's spring-forward change.
    spec = parse_when("every 3 days at 8am", datetime(2026, 3, 6, 12, tzinfo=UTC), NY)
    assert isinstance(spec, DaysSpec)
    assert parse_when("every 3 days", NOW, NY) == EverySpec(seconds=3 * 86400, anchor=NOW, tz=NY)


# --- refusals: one line, the reason and the nearest phrase that works --------------------------

REFUSALS = [
    ("twice a day", "name the times, e.g. 'every day at 9am and 5pm'"),
    ("3 times a week", "name the times"),
    ("biweekly on monday", "say 'every 2 weeks on monday at 9' or 'every monday and thursday at 9'"),
    ("every second tuesday at 10", "say 'every other tuesday' (every 2 weeks) or 'the second tuesday of every month'"),
    ("evry day", "did you mean 'every day'?"),
    ("evry day at 9", "did you mean 'every day at 9'?"),
    ("tommorow", "did you mean 'tomorrow'?"),
    ("tommorow at 9", "did you mean 'tomorrow at 9'?"),
    ("every mondya at 9", "did you mean 'every monday at 9'?"),
    ("feb 30", "February 30 does not exist"),
    ("feb 30 at 9", "February 30 does not exist"),
    ("april 31 at 9", "April 31 does not exist"),
    ("feb 29 2027 at 9", "February 29 does not exist"),
    ("the 32nd at 9", "there is no day 32 in a month"),
    ("every month on the 31st at 9", "not every month has a day 31: say 'on the last day of every month'"),
    ("every year on feb 29 at 9", "february 29 comes only in leap years"),
    ("9am IST", "'IST' is ambiguous as a time zone: name the zone, e.g. Asia/Kolkata"),
    ("at 9 CST", "'CST' is ambiguous as a time zone: name the zone, e.g. America/Chicago"),
    ("9am BST", "'BST' is ambiguous as a time zone"),
    ("9am MST", "America/Denver or America/Phoenix"),
    ("at 8 UTC+5:30", "name the place's zone instead, e.g. 'Asia/Kolkata'"),
    ("12/25 at 9", "a numeric date can be day/month or month/day: write 'dec 25'"),
    ("tomorrow", "add a time of day, e.g. 'tomorrow at 9am'"),
    ("on friday", "add a time of day, e.g. 'on friday at 9am'"),
    ("monthly on the 1st", "add a time of day, e.g. 'monthly on the 1st at 9am'"),
    ("the 1st of the month at 9", "say 'of every month' for a repeat"),
    ("every day at 9:30 and 17:00", "these times do not share their minutes: make one job per time"),
    ("every 7 minutes between 9 and 17", "the interval must divide an hour"),
    ("tomorrow at 9 and 17", "several times of day need a repeat"),
    ("every day at 9 and 5", "is 5 in the morning meant? write 5am or 17:00"),
    ("every other weekday at 9", "say 'every weekday', 'every other day' or 'every 2 weeks on weekdays'"),
    ("on the 2nd and 16th of every month at 9", "two days of the month: make one job per day"),
    ("dec 25 and dec 26 at 9", "two dates: make one job per date"),
    ("every hour at :75", "one minute of the hour, 0 to 59"),
    ("tomorrow afternoon at 7", "07:00 is not in the afternoon"),
    ("every friday night at 1", "name the day the time falls on, e.g. 'every saturday at 1am'"),
    ("end of day at 5", "end of day is 17:00"),
    ("every day and every monday at 9", "two repeats"),
    ("every 0 minutes between 9 and 17", "in a window the interval is at least a minute"),
    ("tomorrow except sunday at 9", "'except' goes with days that repeat"),
    ("weekends except saturday and sunday at 9", "no day is left"),
    ("at 9 on christmas", "unknown word 'christmas'"),  # a word, not Indian/Christmas
    ("9am tokyo", "unknown word 'tokyo'"),  # a place is marked: 'in tokyo', 'tokyo time'
    ("at 9 christmas time", "unknown time zone"),
    ("every 2 weeks on monday at 9am and 5pm", "takes one time of day"),
    ("tomorrow morning at 19:00", "19:00 is not in the morning"),
    ("every 5 minutes between 17 and 9", "a window must end after it starts"),
    ("9am PST CET", "two time zones"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "reason"), REFUSALS)
def test_refusals_say_why_in_one_line(text: str, reason: str) -> None:
    with pytest.raises(WhenParseError) as info:
        parse_when(text, NOW, B)
    message = str(info.value)
    assert reason in message
    assert "\n" not in message
    assert len(message) < 200


def test_a_typo_is_never_read_silently() -> None:
    for text in ("evry day at 9", "tommorow at 9", "every mondya at 9"):
        with pytest.raises(WhenParseError, match="did you mean"):
            parse_when(text, NOW, B)


def test_a_past_instant_is_named_in_its_zone_without_microseconds() -> None:
    now = datetime(2026, 11, 25, 14, 1, 59, 329740, tzinfo=UTC)
    with pytest.raises(PastInstantError) as info:
        parse_when("2020-01-01T14:00", now, "UTC")
    assert str(info.value) == (
        "2020-01-01 14:00 UTC is in the past: a one-shot time must be in the future"
    )
    with pytest.raises(PastInstantError, match=r"^2026-11-22 09:00 UTC\+2 is in the past"):
        parse_when("today at 9 utc+2", NOW, B)


# --- the corpus: >= 90 % read, none read wrong ------------------------------------------------


def test_the_phrase_corpus() -> None:
    assert len(CORPUS) >= 150
    meant = [(text, reading) for text, reading in CORPUS if reading is not REFUSE]
    read, wrong = 0, []
    for text, reading in CORPUS:
        try:
            got = short(parse_when(text, NOW, ZONE))
        except WhenParseError:
            continue
        if got != reading:
            wrong.append((text, got, reading))
        else:
            read += 1
    assert wrong == []
    assert read / len(meant) >= 0.9, f"read {read} of {len(meant)}"


# --- any string of phrase words: a spec that fires after now, or a ScheduleError -------------

_WORDS = [
    *sorted(VOCABULARY),
    "9", "5pm", "17:30", "2", "15", "1st", "3rd", "31st", "32nd", "29", "25", "2027", "9.30",
    "12am", "noon", "mon-fri", "dec", "feb", "pst", "cst", "ist", "utc+2", "gmt-5", "utc+5:30",
    "tokyo", "christmas", "europe/berlin", "in", "time", "-", "/", "@daily",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(_WORDS), min_size=1, max_size=7),
    st.datetimes(datetime(2001, 1, 1), datetime(2037, 12, 31), timezones=st.just(UTC)),
    st.sampled_from([B, "UTC", "America/New_York", "Australia/Sydney", "Pacific/Chatham"]),
)
def test_any_words_give_a_future_spec_or_a_schedule_error(
    words: list[str], now: datetime, tz: str
) -> None:
    try:
        spec = parse_when(" ".join(words), now, tz)
    except ScheduleError as exc:
        refusal = str(exc)
    else:
        refusal = ""
    if refusal:
        assert "\n" not in refusal
        return
    fires = upcoming(spec, now, 1)
    assert all(fire > now for fire in fires)
    assert fires or isinstance(spec, AtSpec)


@pytest.mark.parametrize(
    ("text", "times"),
    [
        ("every 2 hours between 8 and 20", ["08:00", "10:00", "12:00", "14:00", "16:00", "18:00"]),
        ("every 3 hours between 9 and 17", ["09:00", "12:00", "15:00"]),
        ("every 2 hours between 9 and 10", ["09:00"]),
        ("every hour between 9 and 12", ["09:00", "10:00", "11:00"]),
        ("every 20 minutes between 9 and 10", ["09:00", "09:20", "09:40"]),
        ("every 30 minutes from 9am to 11am", ["09:00", "09:30", "10:00", "10:30"]),
        ("every day at 9am and 5pm", ["09:00", "17:00"]),
    ],
)
def test_a_day_of_fires_stays_in_its_window(text: str, times: list[str]) -> None:
    # Monday 2026-11-23 in Berlin, from its start: the fires of that one day.
    start = datetime(2026, 11, 22, 23, 0, tzinfo=UTC)
    spec = parse_when(text, start, B)
    fires = [f for f in upcoming(spec, start, 50) if f < start + timedelta(days=1)]
    assert [f"{f.astimezone(ZoneInfo(B)):%H:%M}" for f in fires] == times


def _doc_phrases(section: str, column: int) -> list[str]:
    """The backticked phrases of one column of a table in docs/schedules.md."""
    doc = (Path(__file__).parents[3] / "docs" / "schedules.md").read_text()
    table = doc.split(section, 1)[1].split("\n#", 1)[0]
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| ")][1:]
    return [phrase for row in rows for phrase in re.findall(r"`([^`]+)`", row[column])]


def test_the_docs_phrases_read_and_refuse_as_documented() -> None:
    read = _doc_phrases("## What is read", 2)
    refused = _doc_phrases("## What is refused, and why", 1)
    assert len(read) > 60
    assert len(refused) > 15
    for phrase in read:
        parse_when(phrase, NOW, B)
    for phrase in refused:
        with pytest.raises(WhenParseError):
            parse_when(phrase, NOW, B)


@pytest.mark.parametrize(
    "text", ["quarter to five", "half past nine", "twenty past seven", "quarter to one", "ten to 8"]
)
def test_a_spoken_time_without_am_or_pm_is_refused(text: str) -> None:
    """'quarter to five' is 04:45 or 16:45 alike: refused with what to add, never guessed."""
    with pytest.raises(WhenParseError, match="add am or pm"):
        parse_when(text, NOW, B)


@pytest.mark.parametrize(
    ("text", "same_as"),
    [
        ("remind me tomorrow at 9am", "tomorrow at 9am"),
        ("please remind me every weekday at 9", "every weekday at 9"),
        ("ping me in 2 hours", "in 2 hours"),
    ],
)
def test_the_request_around_a_time_is_read_as_the_time(text: str, same_as: str) -> None:
    assert parse_when(text, NOW, B) == parse_when(same_as, NOW, B)


def test_a_request_with_more_than_a_time_is_still_refused() -> None:
    with pytest.raises(WhenParseError):
        parse_when("remind me to call mom at 5pm", NOW, B)
