"""The built-in runner: runs a session turn on a pydantic-ai agent and streams what happens."""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import traceback
import uuid
from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic_ai import Agent, RunContext, capture_run_messages
from pydantic_ai.exceptions import ModelConnectionError, UsageLimitExceeded
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    PartDeltaEvent,
    PartStartEvent,
    SystemPromptPart,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, infer_model
from pydantic_ai.settings import ModelSettings
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.usage import RunUsage, UsageLimits

from agentcron.agent.gate import (
    AllowedFn,
    CallLog,
    ToolLike,
    build_toolset,
    call_log,
    turn_tools,
)
from agentcron.agent.offline import (
    OFFLINE_MODEL_NAME,
    RECALL_CONTEXT_HEADER,
    SUMMARY_HEADER,
    SUMMARY_INSTRUCTIONS,
    OfflineModel,
    parse_wps,
)
from agentcron.agent.pricing import PriceTable, cost_usd, load_prices
from agentcron.agent.runner import (
    NO_RESULT,
    HistoryEntry,
    Outcome,
    SessionInfo,
    ToolRecord,
    TurnEvents,
    TurnInput,
    tool_ran,
)
from agentcron.config.agent import (
    MODEL_ENV,
    AgentSettings,
    ProviderSettings,
    provider_from_env,
)
from agentcron.config.env import or_environ
from agentcron.domain.approvals import Approver, Policy
from agentcron.domain.attachments import attachment_note

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "BuiltinRunner",
    "history_to_messages",
    "resolve_model",
    "summary_prompt",
    "tool_records",
]

_OPENAI_PREFIXES = ("openai:", "openai-chat:")
_ANTHROPIC_PREFIX = "anthropic:"
_ANTHROPIC_KEY_ENV = "ANTHROPIC_API_KEY"
_NO_KEY = "api-key-not-set"  # what the OpenAI provider sends without a key
_MAX_ERROR_CHARS = 300

DEFAULT_SYSTEM_PROMPT = (
    "You are the assistant of a chat session run by agentcron. "
    "When the user asks for something at a later time or on a schedule, use your tools: `cron` "
    "for automations (reminders, recurring checks), `schedule_recall` for a follow-up you schedule "
    "for yourself, `manage_recall` to list, cancel or resume it. Pass times as the user said them "
    '("in 10 minutes", "every weekday at 9"); never compute dates yourself. '
    "A turn marked [scheduled] was started by a schedule: do the task and report the result. "
    "Keep answers short."
)

DepsFactory = Callable[[SessionInfo, TurnInput], Any]
logger = logging.getLogger(__name__)
_ERRNO = re.compile(r"^\[Errno -?\d+\]\s*")


def _unreachable(exc: ModelConnectionError, model: Model) -> str:
    """Why the model could not be reached, for people: "cannot reach the model at URL:
    Name or service not known" (the innermost cause: the resolver's, the socket's; the URL
    without any user or password in it).
    """
    cause: BaseException = exc
    for _ in range(20):  # a chain of causes is short; never follow a loop
        deeper = cause.__cause__ or cause.__context__
        if deeper is None:
            break
        cause = deeper
    lines = str(cause).strip().splitlines()
    reason = _ERRNO.sub("", lines[0]) if lines else type(cause).__name__
    if isinstance(cause, OSError):  # the system's words: "Connection refused", the resolver's
        code = cause.errno if isinstance(cause.errno, int) else 0
        reason = os.strerror(code) if code > 0 else cause.strerror or reason
    parts = urlsplit(model.base_url or "")
    if not parts.netloc:
        return f"cannot reach the model: {reason}"
    url = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl().rstrip("/")
    return f"cannot reach the model at {url}: {reason}"


def resolve_model(
    model: str | Model | None = None,
    env: Mapping[str, str] | None = None,
    *,
    provider: ProviderSettings | None = None,
) -> tuple[Model, str]:
    """The model to run and its id for pricing ("provider:name"); no network is touched.

    Order: `model`, else env AGENTCRON_MODEL, else the offline model. With a `base_url` (the
    `provider`'s; without one, env AGENTCRON_BASE_URL), an "anthropic:"-prefixed name runs on
    that Anthropic Messages API (a proxy or gateway; the URL without `/v1`), any other name
    (optionally "openai:"-prefixed) on that OpenAI-compatible server (Ollama, vLLM, llama.cpp,
    a LiteLLM proxy), each with the provider's API key, if any.
    """
    env = or_environ(env)
    provider = provider_from_env(env) if provider is None else provider
    if isinstance(model, OfflineModel):
        return model, OFFLINE_MODEL_NAME
    if isinstance(model, Model):
        name = model.model_name
        return model, name if name.startswith(f"{model.system}:") else f"{model.system}:{name}"
    spec = (model or env.get(MODEL_ENV) or OFFLINE_MODEL_NAME).strip()
    if spec.lower() == OFFLINE_MODEL_NAME:
        return OfflineModel(parse_wps(provider.offline_wps)), OFFLINE_MODEL_NAME
    base_url = provider.base_url
    if base_url and spec.startswith(_ANTHROPIC_PREFIX):
        # Imported here: only this path needs the Anthropic SDK loaded.
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        name = spec[len(_ANTHROPIC_PREFIX) :]
        # A proxy may need no key (as the OpenAI provider allows); Anthropic's own env key
        # still counts when AGENTCRON_API_KEY is unset.
        key = provider.api_key or env.get(_ANTHROPIC_KEY_ENV) or _NO_KEY
        gateway = AnthropicProvider(base_url=base_url, api_key=key)
        return AnthropicModel(name, provider=gateway), spec
    if base_url:
        # Imported here: only this path needs the OpenAI SDK loaded.
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        name = next((spec[len(p) :] for p in _OPENAI_PREFIXES if spec.startswith(p)), spec)
        server = OpenAIProvider(base_url=base_url, api_key=provider.api_key)
        return OpenAIChatModel(name, provider=server), f"openai:{name}"
    return infer_model(spec), spec


def prompt_with_files(turn: TurnInput) -> str:
    """The turn's prompt, then a note of each file it came with (kind, name, type, size, URL:
    the model reads what was attached; the bytes stay with the turn for tools of your own).
    """
    if not turn.attachments:
        return turn.prompt
    return f"{turn.prompt}\n\n{attachment_note(turn.attachments)}"


def _with_file_note(entry: HistoryEntry) -> str:
    """An earlier message's text, with a note of the files it carried (its meta says which)."""
    files = entry.meta.get("attachments")
    if not isinstance(files, list) or not files:
        return entry.content
    return f"{entry.content}\n\n{attachment_note([f for f in files if isinstance(f, dict)])}"


def history_to_messages(history: Sequence[HistoryEntry]) -> list[ModelMessage]:
    """Transcript entries as pydantic-ai messages; neighbours of one side share a message.

    A `tool` entry becomes the call (in a response) and its return (in the next request); a
    `summary` entry a system part that says what it is.
    """
    messages: list[ModelMessage] = []
    request: list[ModelRequestPart] = []
    response: list[ModelResponsePart] = []
    for entry in history:
        if entry.role == "tool":
            if request:
                messages.append(ModelRequest(parts=request))
                request = []
            meta = entry.meta
            name = str(meta.get("name") or "tool")
            call_id = str(meta.get("call_id") or f"call-{len(messages)}")
            args = meta.get("args")
            response.append(ToolCallPart(name, args if isinstance(args, dict) else {}, call_id))
            messages.append(ModelResponse(parts=response))
            response = []
            request.append(ToolReturnPart(name, entry.content, call_id))
            continue
        if not entry.content.strip():
            continue
        if entry.role == "assistant":
            if request:
                messages.append(ModelRequest(parts=request))
                request = []
            response.append(TextPart(_with_file_note(entry)))
            continue
        if response:
            messages.append(ModelResponse(parts=response))
            response = []
        if entry.role == "summary":
            request.append(SystemPromptPart(f"{SUMMARY_HEADER}\n{entry.content}"))
        elif entry.role == "system":
            request.append(SystemPromptPart(entry.content))
        else:
            request.append(UserPromptPart(_with_file_note(entry)))
    if request:
        messages.append(ModelRequest(parts=request))
    if response:
        messages.append(ModelResponse(parts=response))
    return messages


_SUMMARY_ENTRY_CHARS = 2_000  # of one entry, in a summary request
_SUMMARY_INPUT_CHARS = 60_000  # of a whole summary request (the newest part kept)


def summary_prompt(entries: Sequence[HistoryEntry], previous: str | None, max_tokens: int) -> str:
    """The text a model summarizes: the earlier summary, then the entries as labelled lines."""
    lines = []
    for entry in entries:
        text = " ".join(entry.content.split())
        if len(text) > _SUMMARY_ENTRY_CHARS:
            text = text[: _SUMMARY_ENTRY_CHARS - 1] + "…"
        if entry.role == "tool":
            name = entry.meta.get("name", "tool")
            lines.append(f"tool {name}({json.dumps(entry.meta.get('args', {}))}) -> {text}")
        else:
            lines.append(f"{entry.role}: {text}")
    body = "\n".join(lines)
    if len(body) > _SUMMARY_INPUT_CHARS:
        body = "…" + body[-_SUMMARY_INPUT_CHARS:]
    head = f"Earlier summary:\n{previous.strip()}\n\n" if previous and previous.strip() else ""
    return f"{head}Conversation ({len(entries)} entries, oldest first):\n{body}\n\n" + (
        f"Write the new summary in at most {max_tokens * 3 // 4} words."
    )


def tool_records(
    messages: Sequence[ModelMessage], run_id: str, log: CallLog | None = None
) -> tuple[ToolRecord, ...]:
    """The tool calls one run made (its responses' calls), each with its return or error, and
    from the gate's `log` its duration and whether it was denied.
    """
    log = log or CallLog()
    returns: dict[str, ToolReturnPart] = {}
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart) and part.tool_call_id:
                    returns[part.tool_call_id] = part  # a retried call: its last answer
    records = []
    for message in messages:
        if not isinstance(message, ModelResponse) or message.run_id != run_id:
            continue
        for call in message.parts:
            if not isinstance(call, ToolCallPart):
                continue
            answer = returns.get(call.tool_call_id)
            if answer is not None:
                ok = answer.outcome == "success"
                result = answer.model_response_str(wrap_if_error=False)
            else:
                ok, result = False, NO_RESULT
            try:
                args = call.args_as_dict()
            except ValueError:
                args = {"_raw": str(call.args)}
            call_id = call.tool_call_id
            records.append(
                ToolRecord(
                    call_id,
                    call.tool_name,
                    args,
                    result,
                    ok and call_id not in log.denied and call_id not in log.failed,
                    log.duration_ms.get(call_id),
                )
            )
    return tuple(records)


def model_settings(settings: AgentSettings) -> ModelSettings | None:
    """The pydantic-ai model settings of the agent's (those left None: the model's defaults)."""
    found = ModelSettings()
    if settings.temperature is not None:
        found["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        found["max_tokens"] = settings.max_tokens
    if settings.thinking is not None:
        level = settings.thinking
        found["thinking"] = level == "on" if level in {"on", "off"} else level  # type: ignore[typeddict-item]
    return found or None


def _zone(name: str) -> tuple[tzinfo, str]:
    try:
        return ZoneInfo(name), name
    except (ZoneInfoNotFoundError, ValueError):
        return UTC, "UTC"


class _Relay:
    """Turns pydantic-ai stream events into the runner protocol's event dicts, and reports
    each tool call as it starts and as it answers (`runner.tool_ran`): a turn cut before the
    agent's run returns keeps them.
    """

    def __init__(self, events: TurnEvents, log: CallLog) -> None:
        self._events = events
        self._log = log
        self._args: dict[str, dict[str, Any]] = {}

    async def __call__(self, ctx: RunContext[Any], stream: AsyncIterable[AgentStreamEvent]) -> None:
        async for event in stream:
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                if event.part.content:
                    await self._events.emit({"type": "text_delta", "text": event.part.content})
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                if event.delta.content_delta:
                    text = event.delta.content_delta
                    await self._events.emit({"type": "text_delta", "text": text})
            elif isinstance(event, PartStartEvent) and isinstance(event.part, ThinkingPart):
                if event.part.content:
                    await self._events.emit({"type": "thinking_delta", "text": event.part.content})
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, ThinkingPartDelta):
                if event.delta.content_delta:
                    text = event.delta.content_delta
                    await self._events.emit({"type": "thinking_delta", "text": text})
            elif isinstance(event, FunctionToolCallEvent):
                call = event.part
                args = call.args_as_dict()
                self._args[call.tool_call_id] = args
                tool_ran(ToolRecord(call.tool_call_id, call.tool_name, args, NO_RESULT, False))
                await self._events.emit(
                    {"type": "tool_started", "name": call.tool_name, "args": args}
                )
            elif isinstance(event, FunctionToolResultEvent):
                part = event.part
                call_id = part.tool_call_id
                args = self._args.get(call_id, {})
                result = part.model_response_str(wrap_if_error=False)
                refused = call_id in self._log.denied or call_id in self._log.failed
                ok = part.outcome == "success" and not refused
                duration = self._log.duration_ms.get(call_id)
                tool_ran(ToolRecord(call_id, part.tool_name, args, result, ok, duration))
                await self._events.emit(
                    {"type": "tool_call", "name": part.tool_name, "args": args, "result": result}
                )


class BuiltinRunner:
    """Runs each turn on a pydantic-ai agent: history in, streamed text and tool events out.

    `tools` are pydantic-ai tools (functions, `Tool`s, `UserTool`s) whose deps come from
    `deps_factory(session, turn)`; every call passes the gate (`agent.gate`): `tool_policy` maps
    a tool name to allow / approve / deny, and an `approve` call waits for `approvals` (none: it
    is denied) for its `tool_timeouts` entry, else the broker's timeout. `toolsets` (MCP
    servers) pass the same gate; `tool_allowed(session_key, name)` hides a tool from a session.
    A turn makes at most `max_steps` model requests; reaching that bound still counts as success.
    """

    def __init__(
        self,
        model: str | Model | None = None,
        *,
        tools: Sequence[ToolLike] = (),
        tool_policy: Mapping[str, Policy] | None = None,
        approvals: Approver | None = None,
        toolsets: Sequence[AbstractToolset[Any]] = (),
        tool_timeouts: Mapping[str, timedelta] | None = None,
        tool_allowed: AllowedFn | None = None,
        deps_factory: DepsFactory | None = None,
        max_steps: int | None = None,
        system_prompt: str | None = None,
        prices: PriceTable | None = None,
        history_budget: int | None = None,
        settings: AgentSettings | None = None,
        provider: ProviderSettings | None = None,
    ) -> None:
        settings = settings or AgentSettings()
        # Where named models run and the offline model's pace (None: the environment's).
        self.provider = provider_from_env() if provider is None else provider
        max_steps = settings.max_steps if max_steps is None else max_steps
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        model = model if model is not None else settings.model
        system_prompt = system_prompt if system_prompt is not None else settings.system_prompt
        if history_budget is not None and history_budget < 1:
            raise ValueError(f"history_budget must be at least 1 token, got {history_budget}")
        self.model, self.model_id = resolve_model(model, provider=self.provider)
        self._model_given = isinstance(model, Model)  # its clients are its owner's to close
        # Models served by the provider's base_url (Ollama, vLLM, ...): a name like
        # "gpt-4.1-mini" there is not OpenAI's, so only the override table prices them.
        self._own_endpoint: set[str] = set()
        if not isinstance(model, Model) and self.provider.base_url:
            self._own_endpoint.add(self.model_id)
        # This model's history budget in tokens (None: the engine setting's).
        self.history_budget = history_budget
        self.settings = settings
        self.model_settings = model_settings(settings)
        self._models: dict[str, tuple[Model, str]] = {}  # jobs' own models, by name
        self.max_steps = max_steps
        self.system_prompt = DEFAULT_SYSTEM_PROMPT if system_prompt is None else system_prompt
        self.prices = load_prices(prices)
        self._deps_factory = deps_factory
        # `None` allowed: a model with nothing to report answers empty (an `empty` outcome) instead
        # of being re-prompted until it says something.
        self._agent: Agent[Any, str | None] = Agent(
            self.model,
            output_type=[str, type(None)],
            deps_type=object,
            toolsets=[
                build_toolset(
                    tools,
                    policies=tool_policy,
                    approvals=approvals,
                    toolsets=toolsets,
                    timeouts=tool_timeouts,
                    allowed=tool_allowed,
                )
            ],
            name="agentcron",
        )
        self._summarizer: Agent[None, str] = Agent(
            self.model, output_type=str, instructions=SUMMARY_INSTRUCTIONS, name="agentcron-memory"
        )

    async def aclose(self) -> None:
        """Close the HTTP clients of the models this runner resolved by name (their servers'
        pooled connections); a later turn opens new ones. Models passed in are left alone.
        """
        for model in self._resolved_models():
            # Leaving a model's context closes the client its provider made for it.
            async with model:
                pass

    def _resolved_models(self) -> list[Model]:
        found = [] if self._model_given else [self.model]
        return found + [model for model, _ in self._models.values()]

    async def summarize(
        self, entries: Sequence[HistoryEntry], *, previous: str | None, max_tokens: int
    ) -> str:
        """A summary of the older conversation (the earlier summary + `entries`), written by
        this runner's model in at most about `max_tokens` tokens.
        """
        result = await self._summarizer.run(
            summary_prompt(entries, previous, max_tokens),
            model_settings={"max_tokens": max_tokens},
        )
        return result.output

    def instructions(self, session: SessionInfo, turn: TurnInput) -> str:
        """This turn's instructions: system prompt, local time and zone, recall self-instruction."""
        now = turn.now or datetime.now(UTC)
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        zone, tz_name = _zone(session.tz)
        local = now.astimezone(zone)
        parts = [
            self.system_prompt,
            f"Current time: {local:%A %Y-%m-%d %H:%M} in {tz_name}, the session's time zone "
            f"({now.astimezone(UTC):%Y-%m-%dT%H:%MZ} UTC).",
            f"Session: {session.title or session.key}.",
        ]
        if turn.system_context and turn.system_context.strip():
            # Last on purpose: the offline model reads the self-instruction up to the end.
            parts.append(f"{RECALL_CONTEXT_HEADER}\n{turn.system_context.strip()}")
        return "\n\n".join(part for part in parts if part.strip())

    def _usage(self, usage: RunUsage, model_id: str | None = None) -> dict[str, Any]:
        model_id = model_id or self.model_id
        return {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "requests": usage.requests,
            "tool_calls": usage.tool_calls,
            "model": model_id,
            "cost_usd": cost_usd(
                self.prices,
                model_id,
                usage.input_tokens,
                usage.output_tokens,
                maintained=model_id not in self._own_endpoint,
            ),
        }

    def model_for(self, name: str | None) -> tuple[Model, str]:
        """The model a turn runs on: a job's own (resolved once per name), else the default."""
        if name is None or name == self.model_id:
            return self.model, self.model_id
        found = self._models.get(name)
        if found is None:
            found = self._models[name] = resolve_model(name, provider=self.provider)
            if self.provider.base_url and found[1] != OFFLINE_MODEL_NAME:
                self._own_endpoint.add(found[1])
        return found

    async def run_turn(self, session: SessionInfo, turn: TurnInput, events: TurnEvents) -> Outcome:
        run_id = str(uuid.uuid4())
        log = CallLog()
        log_token = call_log.set(log)
        tools_token = turn_tools.set(None if turn.tools is None else frozenset(turn.tools))
        try:
            return await self._run_turn(session, turn, events, run_id, log)
        finally:
            turn_tools.reset(tools_token)
            call_log.reset(log_token)

    async def _run_turn(
        self, session: SessionInfo, turn: TurnInput, events: TurnEvents, run_id: str, log: CallLog
    ) -> Outcome:
        model, model_id = self.model, self.model_id
        with capture_run_messages() as captured:
            try:
                model, model_id = self.model_for(turn.model)
                deps = self._deps_factory(session, turn) if self._deps_factory else None
                if inspect.isawaitable(deps):
                    deps = await deps
                result = await self._agent.run(
                    prompt_with_files(turn),
                    model=model,
                    message_history=history_to_messages(turn.history) or None,
                    instructions=self.instructions(session, turn),
                    deps=deps,
                    usage_limits=UsageLimits(request_limit=self.max_steps),
                    model_settings=self.model_settings,
                    event_stream_handler=_Relay(events, log),
                    run_id=run_id,
                )
            except UsageLimitExceeded:
                # The step bound is a budget, not an error (as for recalls): keep what was said.
                responses = self._responses(captured, run_id)
                text = "\n\n".join(
                    part.content.strip()
                    for response in responses
                    for part in response.parts
                    if isinstance(part, TextPart) and part.content.strip()
                )
                return Outcome.succeeded(
                    text or f"(stopped after {self.max_steps} steps)",
                    usage=self._usage(self._sum_usage(responses), model_id),
                    extra={"stopped": "max_steps", "max_steps": self.max_steps},
                    tools=tool_records(captured, run_id, log),
                )
            except Exception as exc:  # CancelledError is a BaseException: it propagates
                first = (str(exc).strip().splitlines() or [""])[0]
                details: dict[str, Any] = {
                    "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
                    "message": str(exc),
                    "traceback": "".join(traceback.format_exception(exc)),
                }
                if isinstance(exc, ModelConnectionError):  # the cause, said where it is seen
                    first = details["cause"] = _unreachable(exc, model)
                    logger.warning("turn %s of %s: %s", turn.turn_id, session.key, first)
                error = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
                if len(error) > _MAX_ERROR_CHARS:
                    error = error[: _MAX_ERROR_CHARS - 1] + "…"
                return Outcome.failed(
                    error,
                    error_details=details,
                    usage=self._usage(self._sum_usage(self._responses(captured, run_id)), model_id),
                    tools=tool_records(captured, run_id, log),
                )
        usage = self._usage(result.usage, model_id)
        tools = tool_records(result.all_messages(), run_id, log)
        output = result.output
        if output is None or not output.strip():
            return Outcome.empty(usage=usage, tools=tools)
        return Outcome.succeeded(output, usage=usage, tools=tools)

    @staticmethod
    def _responses(messages: Sequence[ModelMessage], run_id: str) -> list[ModelResponse]:
        """This run's model responses (history messages carry no run id of ours)."""
        return [m for m in messages if isinstance(m, ModelResponse) and m.run_id == run_id]

    @staticmethod
    def _sum_usage(responses: Sequence[ModelResponse]) -> RunUsage:
        usage = RunUsage(requests=len(responses))
        for response in responses:
            usage.input_tokens += response.usage.input_tokens
            usage.output_tokens += response.usage.output_tokens
        return usage
