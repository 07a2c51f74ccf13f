"""The requests for jobs: the API's bodies for create and change, bounded and strict (unknown
fields are refused by name), and the one minimum interval every surface that takes a schedule
from a person or an agent holds it to (`check_interval`)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentcron.config.engine import MIN_INTERVAL_SETTING
from agentcron.domain.gates import (
    DEFAULT_MAX_OUTPUT,
    DEFAULT_TIMEOUT_S,
    MAX_MAX_OUTPUT,
    MAX_TIMEOUT_S,
    Gate,
    GateError,
    GateKind,
)
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


GATE_HELP = (
    "a pre-check run before the agent (operators only: the agent's tools cannot set one): "
    "the turn happens only when it says so, and its output is the prompt's `gate_output`; "
    "null (on update) removes it"
)


class GateIn(BaseModel):
    """A job's gate as a request gives it (domain/gates.py)."""

    model_config = ConfigDict(extra="forbid")

    kind: GateKind = Field(
        description="command (exit 0 runs, 1 skips), http (a GET: 2xx runs, 204/304/404/409/"
        '412/423 skip), python ("module:function": truthy runs, or (bool, text)); command '
        "and python need the setting [engine] gates"
    )
    target: list[str] | str = Field(
        description='a command\'s argv (a list, no shell), an http(s) URL, or "module:function"'
    )
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S)
    max_output: int = Field(default=DEFAULT_MAX_OUTPUT, ge=1, le=MAX_MAX_OUTPUT)
    notice: bool = Field(
        default=False, description="a gated-out fire leaves a short entry in the transcript"
    )
    no_llm: bool = Field(
        default=False, description="the gate is the whole job: no turn, the run ends on it"
    )

    def to_gate(self) -> Gate:
        """The domain's gate (`InvalidInputError` when it is out of its bounds)."""
        try:
            return Gate.of(self.model_dump())
        except GateError as exc:
            raise InvalidInputError(str(exc)) from exc


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
    gate: GateIn | None = Field(default=None, description=GATE_HELP)


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
    gate: GateIn | None = Field(default=None, description=GATE_HELP)

    @model_validator(mode="after")
    def _null_only_where_it_means_something(self) -> JobPatch:
        # null is a value for max_runs, end_at (no limit), model and runner_url (the
        # default) and gate (none); elsewhere leave the field out to keep it
        nulls = sorted(
            name
            for name in self.model_fields_set
            - {"max_runs", "end_at", "model", "runner_url", "gate"}
            if getattr(self, name) is None
        )
        if nulls:
            raise ValueError(f"{', '.join(nulls)}: cannot be null (leave it out to keep it)")
        return self
