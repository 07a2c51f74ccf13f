"""Public: pure schedule math: specs, next_fire/upcoming, plain-language parsing, jitter, describe,
the DST policy.

Public names: every name of this package's `__all__`, e.g. `agentcron.schedule.parse_when`,
`agentcron.schedule.next_fire`; its errors are also re-exported from `agentcron`
(`agentcron.ScheduleError`, ...).
"""

from agentcron.schedule.cron import MACROS, parse_cron
from agentcron.schedule.describe import describe
from agentcron.schedule.errors import (
    InvalidCronError,
    InvalidSpecError,
    InvalidZoneError,
    PastInstantError,
    ScheduleError,
    WhenParseError,
)
from agentcron.schedule.jitter import jitter_offset, jittered
from agentcron.schedule.spec import (
    AtSpec,
    CronSpec,
    DaysSpec,
    EverySpec,
    Spec,
    carry_dst,
    next_fire,
    spec_from_data,
    spec_to_data,
    spec_to_json,
    upcoming,
    with_dst,
)
from agentcron.schedule.when import ACCEPTED_FORMS, parse_when
from agentcron.schedule.zones import DstFold, DstGap

__all__ = [
    "ACCEPTED_FORMS",
    "MACROS",
    "AtSpec",
    "CronSpec",
    "DaysSpec",
    "DstFold",
    "DstGap",
    "EverySpec",
    "InvalidCronError",
    "InvalidSpecError",
    "InvalidZoneError",
    "PastInstantError",
    "ScheduleError",
    "Spec",
    "WhenParseError",
    "carry_dst",
    "describe",
    "jitter_offset",
    "jittered",
    "next_fire",
    "parse_cron",
    "parse_when",
    "spec_from_data",
    "spec_to_data",
    "spec_to_json",
    "upcoming",
    "with_dst",
]
