"""What the scheduling tools know about a turn, and their limits (no agent framework needed)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from agentcron.domain.budgets import ContextMode
from agentcron.domain.jobs import AnySpec, CreatedBy, Job, JobKind, Recall, RecallCallType
from agentcron.domain.notify import Notify
from agentcron.domain.policy import PolicyDecision, PolicyRequest
from agentcron.domain.quiet import QuietMode
from agentcron.domain.sessions import MemoryScope


class JobsAPI(Protocol):
    """The part of `AgentCron.jobs` the tools use."""

    async def create(
        self,
        *,
        name: str,
        spec: AnySpec,
        message: str,
        session_key: str | None,
        kind: JobKind,
        created_by: CreatedBy,
        idempotency_key: str | None = ...,
        delete_after_run: bool = ...,
        notify: Notify = ...,
        quiet: QuietMode = ...,
        context: ContextMode = ...,
        call_type: RecallCallType | None = ...,
        internal_comment: str | None = ...,
    ) -> Job: ...
    async def list(self, *, session_key: str | None = ...) -> list[Job]: ...
    async def update(self, job_id: str, **kw: Any) -> Job: ...
    async def pause(self, job_id: str, reason: str = ...) -> Job: ...
    async def resume(self, job_id: str) -> Job: ...
    async def delete(self, job_id: str, *, allow_system: bool = ...) -> Job: ...
    async def skip_next(self, job_id: str) -> Job: ...
    async def get(self, job_id: str) -> Job: ...
    async def reschedule(
        self, job_id: str, to: datetime, *, reason: str, run_id: str | None = ...
    ) -> Job: ...
    def check_interval(self, spec: AnySpec) -> None: ...
    async def recalls(self, session_key: str, *, limit: int = ...) -> Sequence[Recall]: ...


class PolicyHook(Protocol):
    """The policy hook as the tools ask it (agent/policy_hook.py); it never raises."""

    async def decide(self, request: PolicyRequest) -> PolicyDecision: ...


HookFunction = Callable[[PolicyRequest], PolicyDecision | Awaitable[PolicyDecision]]
"""A Python policy hook: a request in, a decision out (sync or async)."""


class SessionsAPI(Protocol):
    """The part of `AgentCron.sessions` the tools use: whether a named session exists."""

    async def get(self, key: str) -> object: ...


@dataclass(frozen=True, slots=True)
class ToolLimits:
    """Guard rails for agent-created jobs."""

    max_jobs_per_session: int = 20
    allow_add_from_scheduled_turn: bool = False
    # (how often a job may recur is the setting `[engine] min_interval`, the same for every
    # surface: `JobsAPI.check_interval`)


@dataclass(frozen=True, slots=True)
class ToolDeps:
    """What a tool knows about the turn that calls it (from the request context)."""

    jobs: JobsAPI
    session_key: str | None  # the session of this turn; recalls bind here
    now: datetime
    tz: str = "UTC"
    in_scheduled_turn: bool = False
    limits: ToolLimits = field(default_factory=ToolLimits)
    # Where new automations bind, when not to this session (unified mode: "unified:default").
    automation_key: str | None = None
    turn_id: str | None = None  # the turn calling (approvals name it)
    # The other sessions whose recalls `manage_recall(session_id=...)` may reach: those that
    # share this one's memory (unified mode: `unified:default` and every web chat), the same
    # person's; None = this session only.
    recall_scope: MemoryScope | None = None
    sessions: SessionsAPI | None = None  # to tell a named session that does not exist
    # The fire this turn is (None: a person's message, a hook): its run keeps the agent's
    # moves of a next fire (`cron(action="reschedule")`); its job is "this job".
    run_id: str | None = None
    job_id: str | None = None
    # Asked before the agent creates, updates or reschedules a job (None: no hook).
    policy: PolicyHook | None = None

    @property
    def owner(self) -> str | None:
        """The session new automations bind to."""
        return self.automation_key or self.session_key
