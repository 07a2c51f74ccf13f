"""The requests for jobs: the API's bodies for create and change, bounded and strict (unknown
fields are refused by name), and the one minimum interval every surface that takes a schedule
from a person or an agent holds it to (`check_interval`)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentcron.config.engine import MIN_INTERVAL_SETTING
from agentcron.domain.cadence import CadenceBounds
from agentcron.domain.jobs import AnySpec, Catchup, Overlap
from agentcron.domain.notify import Notify
from agentcron.errors import InvalidInputError
from agentcron.limits import MAX_RUNS, MessageText, NameText, RunnerUrl, ShortText, ZoneText
from agentcron.schedule import AtSpec, EverySpec, upcoming
from agentcron.session_keys import SessionKey


class TooFrequentError(InvalidInputError):
    """A recurring schedule fires more often than the minimum interval allows."""


def shortest_gap(spec: AnySpec, now: datetime) -> timedelta | None:
    """The shortest time between two fires of `spec` from `now` (None: it fires at most once).
    A cron expression's gaps differ ("0,5 9 * * *"): the shortest of its next few counts.
    """
    if isinstance(spec, AtSpec):
        return None
    if isinstance(spec, EverySpec):
        return spec.interval
    fires = upcoming(spec, now, 6)
    return min(b - a for a, b in itertools.pairwise(fires)) if len(fires) > 1 else None


def _span(gap: timedelta) -> str:
    """A gap in words: "5 minutes", "1 minute", "30 seconds", "1.5 seconds"."""
    total = gap.total_seconds()
    if total >= 60 and total % 60 == 0:
        minutes = int(total // 60)
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{total:g} second{'s' if total != 1 else ''}"


def check_interval(spec: AnySpec, now: datetime, minimum: timedelta) -> None:
    """Refuse (`TooFrequentError`) a schedule that recurs more often than `minimum`, the
    setting `[engine] min_interval` ($AGENTCRON_MIN_INTERVAL; default 5 minutes; 0: none).
    The API, the CLI, the web UI's form and the agent's tools all go through here.
    """
    gap = shortest_gap(spec, now)
    if gap is not None and gap < minimum:
        raise TooFrequentError(
            f"recurring automations may run at most every {_span(minimum)} "
            f"({MIN_INTERVAL_SETTING}); this one runs every {_span(gap)}"
        )


WHEN_HELP = (
    'anything parse_when reads: "in 30m", "tomorrow at 9", "every weekday at 9", '
    '"every 2h", a cron expression such as "0 9 * * 1-5"'
)
MODEL_HELP = (
    'the model its turns run on, "provider:name" (e.g. "openai:gpt-4o") or "offline"; '
    "null (on update) = the default model"
)
RUNNER_URL_HELP = (
    "the runner its fires run on: your own agent's http(s) URL, signed with the server's "
    "runner secret; null = its session's runner URL, else the server's runner"
)
END_AT_HELP = "the instant after which it no longer fires, with a UTC offset; in the future"
NOTIFY_HELP = (
    "when its outcomes are delivered: always (the default), changes (not one equal to the "
    "last delivered), never-empty (not an empty one); an outcome the agent starts with "
    "[SILENT] is never delivered. Every outcome is kept on its run record"
)
DELETE_AFTER_RUN_HELP = (
    "remove the job once its last fire ends; false (the default) keeps it, done, for "
    "`retention_age` (default 30 days)"
)


CADENCE_HELP = (
    "how far the agent may move this job's next fire itself (the cron tool's reschedule): "
    "at least `min` and at most `max` from the time it asks, inside `allowed_hours` of the "
    "job's zone; null (the default) = the agent may not move it"
)


class CadenceIn(BaseModel):
    """A job's cadence bounds as the API takes them (at least one given)."""

    model_config = ConfigDict(extra="forbid")

    min: ShortText | int | None = Field(
        default=None, description="a duration: seconds, or 90s, 30m, 2h, 1d, 1h30m"
    )
    max: ShortText | int | None = Field(default=None, description="a duration, as `min`")
    allowed_hours: ShortText | None = Field(
        default=None, description="local hours of the job's zone, e.g. 08:00-20:00"
    )

    @model_validator(mode="after")
    def _valid(self) -> CadenceIn:
        if self.bounds() is None:
            raise ValueError("give at least one of min, max, allowed_hours (or null: none)")
        return self

    def bounds(self) -> CadenceBounds | None:
        """The bounds (InvalidInputError, a ValueError: a 422 from the validator)."""
        return CadenceBounds.of(self.min, self.max, self.allowed_hours)


class JobCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    session_key: SessionKey = Field(description="the session the job belongs to (it must exist)")
    name: NameText
    message: MessageText = Field(description="what the agent should do when it fires")
    when: ShortText = Field(description=WHEN_HELP)
    tz: ZoneText | None = Field(default=None, description="IANA zone; default: the session's")
    overlap: Overlap = Overlap.BUFFER_ONE
    catchup: Catchup = Catchup.LATEST
    max_runs: int | None = Field(default=None, ge=1, le=MAX_RUNS)
    end_at: datetime | None = Field(default=None, description=END_AT_HELP)
    idempotency_key: ShortText | None = None
    model: ShortText | None = Field(default=None, description=MODEL_HELP)
    runner_url: RunnerUrl | None = Field(default=None, description=RUNNER_URL_HELP)
    delete_after_run: bool = Field(default=False, description=DELETE_AFTER_RUN_HELP)
    notify: Notify = Field(default=Notify.ALWAYS, description=NOTIFY_HELP)
    cadence: CadenceIn | None = Field(default=None, description=CADENCE_HELP)


class JobPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: NameText | None = None
    message: MessageText | None = None
    when: ShortText | None = Field(default=None, description=WHEN_HELP)
    tz: ZoneText | None = None
    overlap: Overlap | None = None
    catchup: Catchup | None = None
    max_runs: int | None = Field(default=None, ge=1, le=MAX_RUNS)
    end_at: datetime | None = Field(default=None, description=END_AT_HELP)
    enabled: bool | None = Field(default=None, description="false pauses, true resumes")
    model: ShortText | None = Field(default=None, description=MODEL_HELP)
    runner_url: RunnerUrl | None = Field(default=None, description=RUNNER_URL_HELP)
    notify: Notify | None = Field(default=None, description=NOTIFY_HELP)
    cadence: CadenceIn | None = Field(default=None, description=CADENCE_HELP)

    @model_validator(mode="after")
    def _null_only_where_it_means_something(self) -> JobPatch:
        # null is a value for max_runs, end_at (no limit), model and runner_url (the
        # default) and cadence (no bounds); elsewhere leave the field out to keep it
        nulls = sorted(
            name
            for name in self.model_fields_set
            - {"max_runs", "end_at", "model", "runner_url", "cadence"}
            if getattr(self, name) is None
        )
        if nulls:
            raise ValueError(f"{', '.join(nulls)}: cannot be null (leave it out to keep it)")
        return self
