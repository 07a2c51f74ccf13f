"""The requests for jobs: the API's bodies for create and change, bounded and strict (unknown
fields are refused by name), and the one minimum interval every surface that takes a schedule
from a person or an agent holds it to (`check_interval`)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentcron.config.engine import MIN_INTERVAL_SETTING
from agentcron.domain.budgets import Budget, ContextMode
from agentcron.domain.cadence import CadenceBounds
from agentcron.domain.gates import (
    DEFAULT_MAX_OUTPUT,
    DEFAULT_TIMEOUT_S,
    MAX_MAX_OUTPUT,
    MAX_TIMEOUT_S,
    Gate,
    GateError,
    GateKind,
)
from agentcron.domain.grants import (
    MAX_GRANT_AHEAD,
    MAX_GRANTED_BY_CHARS,
    MAX_PATTERN_ARGS,
    MAX_TOOL_CHARS,
)
from agentcron.domain.jobs import AnySpec, Catchup, Overlap
from agentcron.domain.notify import Notify
from agentcron.domain.quiet import QuietMode
from agentcron.errors import InvalidInputError
from agentcron.limits import (
    MAX_BUDGET_TOKENS,
    MAX_BUDGET_USD,
    MAX_HISTORY_TOKENS,
    MAX_JOB_TOOLS,
    MAX_RUNS,
    MessageText,
    NameText,
    RunnerUrl,
    ShortText,
    ZoneText,
)
from agentcron.schedule import AtSpec, DstFold, DstGap, EverySpec, upcoming
from agentcron.schedule.spec import DST_FOLD_HELP, DST_GAP_HELP
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
WALL_CLOCK_ONLY = (
    "; for a wall-clock `when` only (a cron expression, a time of day): an interval or a "
    "one-time schedule runs in absolute time and refuses another value (422)"
)
KEPT_WITH_NEW_WHEN = "; a new wall-clock `when` keeps the job's policy"
QUIET_HELP = (
    "what a fire in its session's quiet hours does: hold (the default: it runs, its channel "
    "delivery waits until they end), silent (it runs, never delivered), wait (it runs when "
    "they end); its run's delivery record says which"
)
DELETE_AFTER_RUN_HELP = (
    "remove the job once its last fire ends; false (the default) keeps it, done, for "
    "`retention_age` (default 30 days)"
)

BUDGET_HELP = (
    "its caps (each optional): usd_run, usd_day, usd_month (dollars, from the runs' reported "
    "cost) and tokens_run, tokens_day, tokens_month (input + output); days and months are "
    "UTC. A fire whose estimate (the mean of its recent runs) would pass a cap is skipped; a "
    "run that reaches one pauses the job until it is resumed. null (on update) = no budget"
)
CONTEXT_HELP = (
    "what history its turns get: continue (the conversation, the default), summary (only the "
    "session's latest summary), fresh (none: only its message)"
)
HISTORY_TOKENS_HELP = (
    "its turns' history budget in tokens (past it the older part is left out or summarized); "
    "null = the runner's"
)
TOOLS_HELP = (
    "the only tools the built-in agent may use in its turns (names as `agentcron tools list` "
    "shows them); null = every tool; an unknown name is refused"
)


class BudgetIn(BaseModel):
    """A job's budget in a request: the caps to set (at least one)."""

    model_config = ConfigDict(extra="forbid")

    usd_run: float | None = Field(default=None, gt=0, le=MAX_BUDGET_USD)
    usd_day: float | None = Field(default=None, gt=0, le=MAX_BUDGET_USD)
    usd_month: float | None = Field(default=None, gt=0, le=MAX_BUDGET_USD)
    tokens_run: int | None = Field(default=None, ge=1, le=MAX_BUDGET_TOKENS)
    tokens_day: int | None = Field(default=None, ge=1, le=MAX_BUDGET_TOKENS)
    tokens_month: int | None = Field(default=None, ge=1, le=MAX_BUDGET_TOKENS)

    @model_validator(mode="after")
    def _some_cap(self) -> BudgetIn:
        if self.budget() is None:
            raise ValueError("a budget needs at least one cap (or null for none)")
        return self

    def budget(self) -> Budget | None:
        return Budget.of(self.model_dump())


def check_budget(budget: Budget | None) -> Budget | None:
    """A budget from the library, held to the API's bounds (InvalidInputError); an empty one
    is none.
    """
    if budget is None or budget.empty:
        return None
    try:
        return BudgetIn.model_validate(budget.as_dict()).budget()
    except ValueError as exc:
        raise InvalidInputError(f"budget: {exc}") from None


def check_history_tokens(tokens: int | None) -> int | None:
    if tokens is not None and not 1 <= tokens <= MAX_HISTORY_TOKENS:
        raise InvalidInputError(
            f"history_tokens must be between 1 and {MAX_HISTORY_TOKENS} (got {tokens})"
        )
    return tokens


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
    quiet: QuietMode = Field(default=QuietMode.HOLD, description=QUIET_HELP)
    dst_gap: DstGap = Field(default=DstGap.SHIFT, description=DST_GAP_HELP + WALL_CLOCK_ONLY)
    dst_fold: DstFold = Field(default=DstFold.FIRST, description=DST_FOLD_HELP + WALL_CLOCK_ONLY)
    cadence: CadenceIn | None = Field(default=None, description=CADENCE_HELP)
    gate: GateIn | None = Field(default=None, description=GATE_HELP)

    budget: BudgetIn | None = Field(default=None, description=BUDGET_HELP)
    context: ContextMode = Field(default=ContextMode.CONTINUE, description=CONTEXT_HELP)
    history_tokens: int | None = Field(
        default=None, ge=1, le=MAX_HISTORY_TOKENS, description=HISTORY_TOKENS_HELP
    )
    tools: list[ShortText] | None = Field(
        default=None, max_length=MAX_JOB_TOOLS, description=TOOLS_HELP
    )


class JobRenew(BaseModel):
    """`POST /api/jobs/{id}/renew`: a later end, more runs, or both (one at least)."""

    model_config = ConfigDict(extra="forbid")

    end_at: datetime | None = Field(default=None, description=f"the new end: {END_AT_HELP}")
    runs: int | None = Field(
        default=None, ge=1, le=MAX_RUNS, description="runs added to its limit (max_runs)"
    )

    @model_validator(mode="after")
    def _something_to_renew(self) -> JobRenew:
        if self.end_at is None and self.runs is None:
            raise ValueError("give end_at, runs, or both")
        return self


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
    quiet: QuietMode | None = Field(default=None, description=QUIET_HELP)
    dst_gap: DstGap | None = Field(
        default=None, description=DST_GAP_HELP + WALL_CLOCK_ONLY + KEPT_WITH_NEW_WHEN
    )
    dst_fold: DstFold | None = Field(
        default=None, description=DST_FOLD_HELP + WALL_CLOCK_ONLY + KEPT_WITH_NEW_WHEN
    )
    cadence: CadenceIn | None = Field(default=None, description=CADENCE_HELP)
    gate: GateIn | None = Field(default=None, description=GATE_HELP)
    budget: BudgetIn | None = Field(default=None, description=BUDGET_HELP)
    context: ContextMode | None = Field(default=None, description=CONTEXT_HELP)
    history_tokens: int | None = Field(
        default=None, ge=1, le=MAX_HISTORY_TOKENS, description=HISTORY_TOKENS_HELP
    )
    tools: list[ShortText] | None = Field(
        default=None, max_length=MAX_JOB_TOOLS, description=TOOLS_HELP
    )

    @model_validator(mode="after")
    def _null_only_where_it_means_something(self) -> JobPatch:
        # null is a value for max_runs, end_at (no limit), model and runner_url (the
        # default), cadence (no bounds), gate, budget, history_tokens and tools (none);
        # elsewhere leave the field out to keep it
        nullable = {"max_runs", "end_at", "model", "runner_url", "cadence", "gate"}
        nullable |= {"budget", "history_tokens", "tools"}
        nulls = sorted(
            name for name in self.model_fields_set - nullable if getattr(self, name) is None
        )
        if nulls:
            raise ValueError(f"{', '.join(nulls)}: cannot be null (leave it out to keep it)")
        return self


GRANT_EXPIRES_HELP = (
    "when the grant stops matching (with its zone or offset); or give `expires_in_s`"
)
GRANT_ARGS_HELP = (
    "argument name -> a glob (fnmatch, case-sensitive; matches string arguments only) or an "
    "exact number, true, false or null; arguments not named may be anything; {} = any call"
)


class GrantCreate(BaseModel):
    """A standing approval for a job's scheduled runs (`POST /api/jobs/{id}/grants`)."""

    model_config = ConfigDict(extra="forbid")

    tool: str = Field(min_length=1, max_length=MAX_TOOL_CHARS, description="one tool, exactly")
    args: dict[str, str | bool | int | float | None] = Field(
        default_factory=dict, max_length=MAX_PATTERN_ARGS, description=GRANT_ARGS_HELP
    )
    expires_at: datetime | None = Field(default=None, description=GRANT_EXPIRES_HELP)
    expires_in_s: int | None = Field(
        default=None,
        ge=60,
        le=int(MAX_GRANT_AHEAD.total_seconds()),
        description="seconds from now until it stops matching (instead of `expires_at`)",
    )
    by: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_GRANTED_BY_CHARS,
        description="who grants it (recorded; default: api)",
    )

    @model_validator(mode="after")
    def _one_expiry(self) -> GrantCreate:
        if (self.expires_at is None) == (self.expires_in_s is None):
            raise ValueError("give expires_at or expires_in_s (one of them)")
        return self

    def expiry(self, now: datetime) -> datetime:
        """When the grant expires, from `now` for `expires_in_s`."""
        if self.expires_at is not None:
            return self.expires_at
        return now + timedelta(seconds=self.expires_in_s or 0)
