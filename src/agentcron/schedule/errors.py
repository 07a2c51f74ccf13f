"""Typed errors raised by the pure schedule layer."""

from agentcron.errors import AgentcronError


class ScheduleError(AgentcronError, ValueError):
    """Base class: a schedule could not be built or evaluated from the given input."""


class InvalidCronError(ScheduleError):
    """A cron expression is malformed or uses syntax agentcron does not support."""


class InvalidZoneError(ScheduleError):
    """A time-zone name is not a known IANA zone."""


class InvalidSpecError(ScheduleError):
    """A spec's fields are inconsistent (naive datetime, non-positive interval, ...)."""


class WhenParseError(ScheduleError):
    """A plain-language time phrase could not be read."""


class PastInstantError(WhenParseError):
    """A one-shot time resolved to an instant that is not in the future."""
