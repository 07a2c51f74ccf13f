"""The offline model: a deterministic, no-network pydantic-ai model that is the embedded default."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import (
    InstructionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RequestUsage

from agentcron.agent.offline_parse import (
    ToolIntent,
    is_history_question,
    parse_request,
    parse_tool_call,
)
from agentcron.config.agent import WPS_ENV, provider_from_env

__all__ = [
    "OFFLINE_MODEL_NAME",
    "RECALL_CONTEXT_HEADER",
    "SUMMARY_HEADER",
    "SUMMARY_INSTRUCTIONS",
    "WPS_ENV",
    "OfflineModel",
    "Reply",
    "offline_reply",
    "parse_wps",
]

OFFLINE_MODEL_NAME = "offline"
_SCHEDULING_TOOLS = frozenset({"cron", "schedule_recall", "manage_recall"})
DEFAULT_WPS = 20.0
PREFIX = "(offline model)"
# The built-in runner puts a recall's self-instruction after this line, last in its instructions;
# the offline model reads it from there (a real model just reads the instructions).
RECALL_CONTEXT_HEADER = "Recall self-instruction (you wrote this earlier; do it now):"
# A compaction's request (agent.builtin.summary_prompt) carries these instructions; the history
# a later turn gets starts with the summary under SUMMARY_HEADER.
SUMMARY_INSTRUCTIONS = (
    "Summarize the conversation below for your own memory: the user's requests, decisions, "
    "facts and names to remember, schedules made and what tools found. Keep the earlier "
    "summary's points that still matter. Write plain sentences, no preamble."
)
SUMMARY_HEADER = "Summary of the earlier conversation (you wrote it; older entries are folded):"
_SUMMARY_QUOTES = 5
_SUMMARY_QUOTE_CHARS = 80
_SUMMARY_EARLIER_CHARS = 400
# pydantic-ai's own guess at per-request overhead; kept so both request paths report alike.
_REQUEST_OVERHEAD_TOKENS = 50

SleepFn = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Reply:
    """What the offline model answers: text, or one tool call."""

    text: str = ""
    tool: ToolIntent | None = None


# --- replies (pure) ----------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return " ".join(item for item in content if isinstance(item, str))
    return ""


def _user_texts(messages: Sequence[ModelMessage]) -> list[str]:
    return [
        _text_of(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


def _scheduled_task(prompt: str, instructions: str) -> tuple[str, str] | None:
    """(kind, task) when this turn was started by a fire, else None."""
    _, sep, context = instructions.partition(RECALL_CONTEXT_HEADER)
    if sep:
        return "Follow-up", context.strip()
    if "Scheduled automation triggered:" not in prompt and "[scheduled]" not in prompt:
        return None
    recall = "This is a recall" in prompt or "Scheduled recall triggered:" in prompt
    kind = "Follow-up" if recall else "Reminder"
    if "\nTask:" in prompt:
        return kind, prompt.split("\nTask:", 1)[1].strip()
    for marker in ("Scheduled automation triggered:", "Scheduled recall triggered:"):
        if marker in prompt:
            name, _, message = prompt.split(marker, 1)[1].partition("\n")
            return kind, (message.strip() or name.strip())
    return kind, prompt.replace("[scheduled]", "").strip()


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if text[-1:] in ".!?" else text + "."


_FAILED_STARTS = ("error", "failed", "denied")
# The built-in scheduling tools (agent/tools.py): a fired turn never calls them.
_SCHEDULING_TOOLS = frozenset({"cron", "schedule_recall", "manage_recall"})


def _tool_summary(parts: Sequence[ToolReturnPart]) -> str:
    lines = []
    for part in parts:
        result = part.model_response_str(wrap_if_error=False).strip() or "(no result)"
        failed = part.outcome != "success" or result.lower().startswith(
            ("error", "failed", "denied")
        )
        lines.append(f"{'That did not work' if failed else 'Done'}: {result}")
    return f"{PREFIX} " + "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def offline_summary(prompt: str) -> str:
    """A deterministic summary of a compaction request: how much it folds, the user's latest
    words, the tools called, and the start of the earlier summary.
    """
    earlier, _, rest = prompt.partition("Conversation (")
    earlier = earlier.removeprefix("Earlier summary:").strip()
    said: list[str] = []
    tools: dict[str, int] = {}
    entries = 0
    for line in rest.splitlines()[1:]:
        role, sep, text = line.partition(": ")
        if line.startswith("tool "):
            entries += 1
            name = line[5:].partition("(")[0]
            tools[name] = tools.get(name, 0) + 1
        elif sep and role in {"user", "assistant", "system"}:
            entries += 1
            if role == "user" and text.strip():
                said.append(f'"{_clip(text, _SUMMARY_QUOTE_CHARS)}"')
    parts = [f"{PREFIX} Summary of {entries} earlier entries."]
    if said:
        parts.append("The user said: " + "; ".join(said[-_SUMMARY_QUOTES:]) + ".")
    if tools:
        parts.append("Tools called: " + ", ".join(f"{n} ({c}x)" for n, c in tools.items()) + ".")
    if earlier:
        parts.append(f"Before that: {_clip(earlier, _SUMMARY_EARLIER_CHARS)}")
    return " ".join(parts)


def offline_reply(
    messages: Sequence[ModelMessage], tool_names: Sequence[str], instructions: str | None = None
) -> Reply:
    """What the offline model says next, given the conversation and the tools it may call."""
    last = messages[-1] if messages else None
    if not isinstance(last, ModelRequest):
        return Reply(f"{PREFIX} I have nothing to answer.")
    if instructions and SUMMARY_INSTRUCTIONS in instructions:
        prompts = [_text_of(p.content) for p in last.parts if isinstance(p, UserPromptPart)]
        return Reply(offline_summary("\n".join(prompts)))
    returns = [part for part in last.parts if isinstance(part, ToolReturnPart)]
    if returns:
        return Reply(_tool_summary(returns))
    prompts = [_text_of(p.content) for p in last.parts if isinstance(p, UserPromptPart)]
    system = [p.content for p in last.parts if isinstance(p, SystemPromptPart)]
    prompt = "\n".join(prompts).strip()
    if not prompt:
        return Reply(f"{PREFIX} I could not finish that.")
    scheduled = _scheduled_task(prompt, "\n".join([instructions or "", *system]))
    if scheduled is not None:
        # Never call the scheduling tools here: a reminder must not schedule more reminders
        # when it fires. A task that names another tool ("use check_build") calls it.
        kind, task = scheduled
        work = [name for name in tool_names if name not in _SCHEDULING_TOOLS]
        direct = parse_tool_call(task, work) if work and task else None
        if direct is not None:
            return Reply(tool=direct)
        return Reply(f"{PREFIX} {kind}: {_sentence(task)}" if task else "")
    if is_history_question(prompt):
        earlier = [text for text in _user_texts(messages[:-1]) if text.strip()]
        if not earlier:
            return Reply(f"{PREFIX} You have not said anything before this in this session.")
        return Reply(f'{PREFIX} Before this you said: "{earlier[-1].strip()}"')
    direct = parse_tool_call(prompt, tool_names)
    if direct is not None:
        return Reply(tool=direct)
    intent = parse_request(prompt)
    if intent is None:
        return Reply(
            f'{PREFIX} You said: "{" ".join(prompt.split())}". I am the built-in offline model: '
            'try "remind me in 10 minutes to stretch", "every weekday at 9 check the build" '
            'or "list my automations".'
        )
    if intent.tool not in tool_names:
        return Reply(
            f"{PREFIX} I cannot do that here: the `{intent.tool}` tool is not available "
            "in this session."
        )
    return Reply(tool=intent)


# --- the model ---------------------------------------------------------------------------------


def parse_wps(value: str | float | None) -> float:
    """Words per second from a number or text; 0 or 'inf' means no delay (returned as inf)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return DEFAULT_WPS
    try:
        wps = float(value)
    except ValueError:
        raise ValueError(
            f"{WPS_ENV} must be a number of words per second (0 or 'inf' for no delay), "
            f"got {value!r}"
        ) from None
    if math.isnan(wps) or wps < 0:
        raise ValueError(f"words per second must be >= 0 (0 = no delay), got {value!r}")
    return math.inf if wps == 0 else wps


def _words(text: str) -> list[str]:
    """The chunks to stream: each word with the whitespace after it (so newlines survive)."""
    leading = text[: len(text) - len(text.lstrip())]
    chunks = re.findall(r"\S+\s*", text)
    if leading and chunks:
        chunks[0] = leading + chunks[0]
    return chunks or ([text] if text else [])


def _count_words(text: str) -> int:
    return len(text.split())


def _input_tokens(messages: Sequence[ModelMessage], instructions: str | None) -> int:
    """A word-count estimate of what a request sends (instructions, prompts, tool results)."""
    total = _REQUEST_OVERHEAD_TOKENS + _count_words(instructions or "")
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart | SystemPromptPart):
                total += _count_words(_text_of(part.content))
            elif isinstance(part, ToolReturnPart):
                total += _count_words(part.model_response_str())
            elif isinstance(part, TextPart):
                total += _count_words(part.content)
    return total


def _tool_call_id(messages: Sequence[ModelMessage]) -> str:
    """Deterministic and unique within a run: one more than the calls made so far."""
    calls = sum(
        isinstance(part, ToolCallPart)
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
    )
    return f"offline-call-{calls + 1}"


class OfflineModel(FunctionModel):
    """The offline model: answers, restates scheduled tasks and calls the scheduling tools.

    `words_per_second` (default: env AGENTCRON_OFFLINE_WPS, else 20; 0 or inf = no delay) paces
    the streamed reply through `sleep`, which tests replace.
    """

    def __init__(
        self,
        words_per_second: float | None = None,
        *,
        sleep: SleepFn = asyncio.sleep,
    ) -> None:
        given = provider_from_env().offline_wps if words_per_second is None else words_per_second
        self.words_per_second = parse_wps(given)
        self._sleep = sleep
        super().__init__(self._respond, stream_function=self._stream, model_name=OFFLINE_MODEL_NAME)

    @property
    def system(self) -> str:
        return OFFLINE_MODEL_NAME

    def _reply(self, messages: list[ModelMessage], info: AgentInfo) -> Reply:
        names = [tool.name for tool in info.function_tools]
        return offline_reply(messages, names, info.instructions)

    async def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        reply = self._reply(messages, info)
        if reply.tool is not None:
            part: TextPart | ToolCallPart = ToolCallPart(
                reply.tool.tool, dict(reply.tool.args), _tool_call_id(messages)
            )
            output = 1 + _count_words(json.dumps(reply.tool.args))
        else:
            part, output = TextPart(reply.text), _count_words(reply.text)
        usage = RequestUsage(
            input_tokens=_input_tokens(messages, info.instructions), output_tokens=output
        )
        return ModelResponse(parts=[part], usage=usage)

    async def _stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        reply = self._reply(messages, info)
        if reply.tool is not None:
            call = DeltaToolCall(
                reply.tool.tool, json.dumps(reply.tool.args), tool_call_id=_tool_call_id(messages)
            )
            yield {0: call}
            return
        delay = 0.0 if math.isinf(self.words_per_second) else 1.0 / self.words_per_second
        # An empty reply still needs one chunk: a stream must yield something.
        for index, chunk in enumerate(_words(reply.text) or [""]):
            if index and delay:
                await self._sleep(delay)
            yield chunk

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncGenerator[StreamedResponse]:
        async with super().request_stream(
            messages, model_settings, model_request_parameters, run_context
        ) as response:
            # FunctionModel counts only a fixed overhead as a streamed request's input; count the
            # words sent, as the non-streamed path does, so cost accounting sees plausible numbers.
            parts = model_request_parameters.instruction_parts
            instructions = InstructionPart.join(parts) if parts else None
            response._usage = RequestUsage(  # the protected field every model subclass sets
                input_tokens=_input_tokens(messages, instructions)
            )
            yield response
