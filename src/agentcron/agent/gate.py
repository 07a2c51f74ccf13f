"""The built-in agent's tools behind one gate: per-call policy, approvals, timing.

Library tools (plain functions, `pydantic_ai.Tool`s or `UserTool`s) sit beside the scheduling
tools in one toolset; every call passes `GatedToolset.call_tool`, which applies the policy
(allow / approve / deny), waits for a person when approval is needed (an `Approver`: the
durable broker of `agentcron.service.approvals`) and records how long the call took.
pydantic-ai's own deferred approval (`requires_approval` -> the run ends with
`DeferredToolRequests`) is not used: a tool's `requires_approval=True` is read as our rule
and the call waits inside the turn instead.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic_ai import RunContext, Tool
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from agentcron.agent.runner import paused
from agentcron.agent.tool_rules import Layered
from agentcron.domain.approvals import (
    DENIED_BY_POLICY,
    Approver,
    Policy,
    RequiresApproval,
    denial_text,
    resolve_policy,
)

__all__ = [
    "NO_APPROVER",
    "AllowedFn",
    "CallLog",
    "GatedToolset",
    "ToolLike",
    "UserTool",
    "build_toolset",
    "call_log",
]

NO_APPROVER = "Denied: this tool needs a person's approval and no one can be asked here."


@dataclass(frozen=True, slots=True)
class UserTool:
    """A library tool with its approval rule: always (`True`), never, or per call
    (`requires_approval(args) -> bool`); `approval_timeout` how long a call waits for a
    decision (None: the AgentCron default).
    """

    tool: Tool[Any] | Callable[..., Any]
    requires_approval: RequiresApproval = False
    approval_timeout: timedelta | None = None


ToolLike = Tool[Any] | Callable[..., Any] | UserTool


@dataclass(slots=True)
class CallLog:
    """What the gate saw of one run's calls, by tool call id: durations and denials; and the
    calls a tool said failed while answering the model in words (`failed`).
    """

    duration_ms: dict[str, int] = field(default_factory=dict)
    denied: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)


# The current run's log (set by the runner around `agent.run`; tool tasks inherit it).
call_log: ContextVar[CallLog | None] = ContextVar("agentcron_call_log", default=None)
# The tools the turn running in this context may use (its job's allow-list, set by the
# built-in runner around a turn); None: every tool.
turn_tools: ContextVar[frozenset[str] | None] = ContextVar("agentcron_turn_tools", default=None)


@dataclass
class GatedToolset(WrapperToolset[Any]):
    """Applies each call's policy before the wrapped tool runs; times every call."""

    rules: Mapping[str, RequiresApproval] = field(default_factory=dict)
    policies: Mapping[str, Policy] = field(default_factory=dict)
    approvals: Approver | None = None
    timeouts: Mapping[str, timedelta] = field(default_factory=dict)  # per tool; else default

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        started = time.perf_counter()
        log = call_log.get()
        try:
            refusal = await self._refusal(name, tool_args, ctx)
            if refusal is not None:
                if log is not None and ctx.tool_call_id:
                    log.denied.add(ctx.tool_call_id)
                return refusal
            return await super().call_tool(name, tool_args, ctx, tool)
        finally:
            if log is not None and ctx.tool_call_id:
                log.duration_ms[ctx.tool_call_id] = round((time.perf_counter() - started) * 1000)

    async def _refusal(self, name: str, args: dict[str, Any], ctx: RunContext[Any]) -> str | None:
        """The text the model gets instead of running the tool, or None to run it."""
        rule = self.rules.get(name, False)
        policy = resolve_policy(name, args, policies=self.policies, requires_approval=rule)
        if policy == "allow":
            return None
        if policy == "deny":
            return DENIED_BY_POLICY
        if self.approvals is None:
            return NO_APPROVER
        async with paused():  # the turn holds its session, not an engine slot, while it waits
            approval = await self.approvals.request(
                tool=name,
                args=args,
                session_key=getattr(ctx.deps, "session_key", None),
                turn_id=getattr(ctx.deps, "turn_id", None),
                wait=self.timeouts.get(name),
            )
        return denial_text(approval)


def _as_tool(item: ToolLike) -> tuple[Tool[Any], RequiresApproval, timedelta | None]:
    rule: RequiresApproval = False
    timeout = None
    if isinstance(item, UserTool):
        rule, timeout, item = item.requires_approval, item.approval_timeout, item.tool
    if isinstance(item, Tool):
        tool = copy.copy(item)
        rule = rule or item.requires_approval
    elif callable(item):
        tool = Tool(item)
    else:
        raise TypeError(f"a tool is a function, a pydantic_ai.Tool or a UserTool, got {item!r}")
    # The gate decides: pydantic-ai must not end the run to defer this call.
    tool.requires_approval = False
    return tool, rule, timeout


# May the session (its key, or None outside a session) be offered the tool of this name?
AllowedFn = Callable[[str | None, str], bool]


def build_toolset(
    tools: Sequence[ToolLike],
    *,
    policies: Mapping[str, Policy] | None = None,
    approvals: Approver | None = None,
    timeouts: Mapping[str, timedelta] | None = None,
    toolsets: Sequence[AbstractToolset[Any]] = (),
    allowed: AllowedFn | None = None,
) -> GatedToolset:
    """One gated toolset of `tools` and of other `toolsets` (MCP servers), so their calls pass
    the same gate (names must be unique; policies may name any of them; `timeouts` per tool
    name, over a `UserTool`'s own `approval_timeout`; both may be mappings whose lookup matches
    globs, `agent.tool_rules.GlobTable`). `allowed(session_key, tool)` leaves a tool out of a
    run whose deps' `session_key` may not use it: the model is not offered it; so does a
    turn's allow-list (`turn_tools`, its job's `tools`).
    """
    converted = [_as_tool(item) for item in tools]
    policies = policies if policies is not None else {}
    for name, policy in policies.items():
        resolve_policy(name, {}, policies={name: policy})  # rejects a bad policy early
    own = {tool.name: t for tool, _, t in converted if t is not None}
    # `timeouts` first (with its own lookup: a GlobTable matches globs), then the tools' own.
    waits = Layered(timeouts, own) if timeouts else own
    for name, wait in waits.items():
        if wait <= timedelta(0):
            raise ValueError(f"approval timeout of {name} must be positive, got {wait}")
    inner: AbstractToolset[Any] = FunctionToolset([tool for tool, _, _ in converted])
    if toolsets:
        inner = CombinedToolset([inner, *toolsets])
    check = allowed

    def offered(ctx: RunContext[Any], tool_def: ToolDefinition) -> bool:
        # A job's allow-list first: the model is not offered (nor can call) any other tool.
        only = turn_tools.get()
        if only is not None and tool_def.name not in only:
            return False
        return check is None or check(getattr(ctx.deps, "session_key", None), tool_def.name)

    inner = inner.filtered(offered)
    return GatedToolset(
        inner,
        rules={tool.name: rule for tool, rule, _ in converted if rule},
        policies=policies,
        approvals=approvals,
        timeouts=waits,
    )
