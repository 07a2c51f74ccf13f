"""The API's request bodies for jobs: create and change, bounded and strict (unknown fields
are refused by name)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentcron.domain.jobs import Catchup, Overlap
from agentcron.limits import MAX_RUNS, MessageText, NameText, RunnerUrl, ShortText, ZoneText
from agentcron.session_keys import SessionKey

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
DELETE_AFTER_RUN_HELP = (
    "remove the job once its last fire ends; false (the default) keeps it, done, for "
    "`retention_age` (default 30 days)"
)


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

    @model_validator(mode="after")
    def _null_only_where_it_means_something(self) -> JobPatch:
        # null is a value for max_runs, end_at (no limit), model and runner_url (the
        # default); elsewhere leave the field out to keep it
        nulls = sorted(
            name
            for name in self.model_fields_set - {"max_runs", "end_at", "model", "runner_url"}
            if getattr(self, name) is None
        )
        if nulls:
            raise ValueError(f"{', '.join(nulls)}: cannot be null (leave it out to keep it)")
        return self
