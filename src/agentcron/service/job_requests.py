"""The requests for jobs: the API's bodies for create and change, bounded and strict (unknown
fields are refused by name), and the one minimum interval every surface that takes a schedule
from a person or an agent holds it to (`check_interval`)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentcron.config.engine import MIN_INTERVAL_SETTING
from agentcron.domain.budgets import Budget, ContextMode
from agentcron.domain.jobs import AnySpec, Catchup, Overlap
from agentcron.domain.notify import Notify
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
    budget: BudgetIn | None = Field(default=None, description=BUDGET_HELP)
    context: ContextMode = Field(default=ContextMode.CONTINUE, description=CONTEXT_HELP)
    history_tokens: int | None = Field(
        default=None, ge=1, le=MAX_HISTORY_TOKENS, description=HISTORY_TOKENS_HELP
    )
    tools: list[ShortText] | None = Field(
        default=None, max_length=MAX_JOB_TOOLS, description=TOOLS_HELP
    )


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
        # default), budget, history_tokens and tools (none); elsewhere leave the field out
        # to keep it
        nullable = {"max_runs", "end_at", "model", "runner_url"}
        nullable |= {"budget", "history_tokens", "tools"}
        nulls = sorted(
            name for name in self.model_fields_set - nullable if getattr(self, name) is None
        )
        if nulls:
            raise ValueError(f"{', '.join(nulls)}: cannot be null (leave it out to keep it)")
        return self
