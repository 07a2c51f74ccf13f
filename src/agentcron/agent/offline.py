"""The offline model: a deterministic, no-network pydantic-ai model that is the embedded default."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
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

__all__ = [
    "OFFLINE_MODEL_NAME",
    "RECALL_CONTEXT_HEADER",
    "SUMMARY_HEADER",
    "SUMMARY_INSTRUCTIONS",
    "WPS_ENV",
    "OfflineModel",
    "Reply",
    "ToolIntent",
    "offline_reply",
    "parse_request",
    "parse_wps",
]

OFFLINE_MODEL_NAME = "offline"
WPS_ENV = "AGENTCRON_OFFLINE_WPS"
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
class ToolIntent:
    """A tool call read from a sentence: the tool's name and its arguments."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Reply:
    """What the offline model answers: text, or one tool call."""

    text: str = ""
    tool: ToolIntent | None = None


# --- sentence parsing (pure) -------------------------------------------------------------------

_UNIT = r"(?:seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|weeks?|wks?|[smhdw])"  # longest first
_DUR_PART = rf"(?:\d+(?:\.\d+)?\s*{_UNIT}|an?\s+{_UNIT})\b"
_DURATION = rf"{_DUR_PART}(?:\s*(?:,|\band\b)?\s*{_DUR_PART})*"
_CLOCK = r"(?:noon|midday|midnight|\d{1,2}(?::\d{2})?(?:\s*(?:am|pm|a\.m\.|p\.m\.))?)(?!\w|:\d)"
_DAY = (
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|mon|tues?|wed|thu(?:rs?)?|fri|sat|sun)s?"
)
_DAYS = rf"(?:weekend\s+days?|weekdays?|weekends?|days?|{_DAY}(?:\s*(?:,|\band\b|&)\s*{_DAY})*)"
_ZONE = r"(?:\s+(?:[A-Z][A-Za-z_]+(?:/[A-Za-z0-9_+\-]+)+|UTC|GMT))?"
_WHEN = (
    r"(?:(?:"
    rf"in\s+{_DURATION}(?:\s+from\s+now)?"
    rf"|every\s+{_DAYS}(?:\s+at)?\s+{_CLOCK}"
    rf"|every\s+(?:{_DURATION}|hour|minute|day|week|{_DAYS})"
    rf"|(?:tomorrow|today|tonight)(?:\s+at)?\s+{_CLOCK}"
    rf"|(?:(?:on|next|this)\s+)?{_DAY}(?:\s+at)?\s+{_CLOCK}"
    rf"|at\s+{_CLOCK}(?:\s+(?:(?:on|next|this)\s+)?(?:{_DAY}|tomorrow|today|tonight))?"
    rf")(?!\w){_ZONE})"
)
# In the when-first forms the time phrase is taken whole (an atomic group): without that,
# "remind me every day at 7:30 Europe/Berlin" backtracks into when="every day at 7:30" and
# task="Europe/Berlin".
_WHEN_FIRST = rf"(?>{_WHEN})"
_TASK_LEAD = r"(?:\s*[,:\-]\s*|\s+)(?:(?:to|that|about|and)\s+)?"

_FLAGS = re.IGNORECASE
_REMIND_WHEN_FIRST = re.compile(
    rf"^remind\s+me\s+(?P<when>{_WHEN_FIRST}){_TASK_LEAD}(?P<task>.+)$", _FLAGS
)
_REMIND_TASK_FIRST = re.compile(
    rf"^remind\s+me\s+(?:to|that|about)\s+(?P<task>.+?)\s+(?P<when>{_WHEN})$", _FLAGS
)
_BARE_WHEN_FIRST = re.compile(
    rf"^(?P<when>{_WHEN_FIRST})(?:\s*[,:\-]\s*|\s+)(?:remind\s+me\s+)?(?:to\s+)?(?P<task>.+)$",
    _FLAGS,
)
_RECALL_LEAD = r"(?:follow\s+up|check\s+back|check\s+in|get\s+back\s+to\s+me)(?:\s+with\s+me)?"
_RECALL_WHEN_FIRST = re.compile(
    rf"^{_RECALL_LEAD}\s+(?P<when>{_WHEN_FIRST})\s*,?\s+(?:and|to)\s+(?P<task>.+)$", _FLAGS
)
_RECALL_TASK_FIRST = re.compile(
    rf"^{_RECALL_LEAD}\s+(?:and|to)\s+(?P<task>.+?)\s+(?P<when>{_WHEN})$", _FLAGS
)
_LIST_AUTOMATIONS = re.compile(
    r"^(?:(?:list|show)(?:\s+me)?(?:\s+all)?(?:\s+of)?(?:\s+(?:my|the))?"
    r"\s+(?:automations?|reminders|(?:scheduled\s+|cron\s+)?jobs|schedules?|crons?)"
    r"|what(?:'s|\s+is|\s+are)(?:\s+my)?"
    r"\s+(?:scheduled|(?:my\s+|the\s+)?(?:automations|reminders))(?:\s+for\s+me)?(?:\s+(?:right\s+)?now)?)$",
    _FLAGS,
)
_LIST_RECALLS = re.compile(
    r"^(?:list|show)(?:\s+me)?(?:\s+all)?(?:\s+(?:my|the))?\s+(?:recalls?|follow[\s-]?ups)$", _FLAGS
)
_CANCEL_RECALL = re.compile(
    r"^(?:cancel|delete|remove|stop)(?:\s+(?:my|the))?(?:\s+pending)?\s+(?:recall|follow[\s-]?up)$",
    _FLAGS,
)
_MANAGE_AUTOMATION = re.compile(
    r"^(?P<verb>pause|resume|unpause|cancel|delete|remove|stop)(?:\s+(?:my|the))?"
    r"\s+(?:automation|reminder|cron\s+job|job)\s+(?:(?:called|named)\s+)?(?P<name>.+)$",
    _FLAGS,
)
_HISTORY_QUESTION = re.compile(
    r"^what\s+(?:did\s+i\s+(?:just\s+)?(?:say|write|ask|tell\s+you)"
    r"(?:\s+(?:before|earlier|previously|last|just\s+now))?"
    r"|was\s+my\s+(?:last|previous)\s+message)$",
    _FLAGS,
)
_POLITE_LEAD = re.compile(
    r"^(?:please|pls|hey|ok(?:ay)?|can\s+you|could\s+you|would\s+you)\b[\s,]*", _FLAGS
)
_POLITE_TAIL = re.compile(r"[\s,]+please$", _FLAGS)
_MERIDIEM_END = re.compile(r"\b[ap]\.m$", _FLAGS)  # "9 a.m." lost its last dot to _clean
_VERBS = {"pause": "pause", "resume": "resume", "unpause": "resume"}  # the rest remove
# Words a short name should not end on ("call mom about the" -> "call mom").
_DANGLING = {"a", "an", "the", "to", "and", "or", "of", "for", "with", "at", "in", "on", "about"}
_NAME_WORDS = 6
_NAME_CHARS = 48
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _clean(text: str) -> str:
    """One sentence, as the patterns expect: single spaces, no politeness, no end punctuation."""
    text = " ".join(text.replace("\u2019", "'").split())
    while (stripped := _POLITE_LEAD.sub("", text, count=1)) != text:
        text = stripped
    while (stripped := _POLITE_TAIL.sub("", _strip_end(text))) != text:
        text = stripped
    return text


def _strip_end(text: str) -> str:
    """Without end punctuation, except the dot of a closing "a.m." / "p.m." (part of the time)."""
    stripped = text.rstrip(".!? ")
    if _MERIDIEM_END.search(stripped) and text[len(stripped) :].startswith("."):
        return stripped + "."
    return stripped


def _task(text: str) -> str:
    task = text.strip().strip("\"'\u201c\u201d").rstrip(".!,;: ").strip()
    # "remind me in 10 minutes to" names no task: filler words alone are none.
    return "" if all(word.lower() in _DANGLING for word in task.split()) else task


def short_name(task: str) -> str:
    """A short title for an automation: the task's first few words, not ending on a filler word.

    Filler words are dropped only where the task was cut ("call mom about the ..." -> "call mom");
    a task that fits keeps its last word ("check in", "turn the lights on").
    """
    all_words = task.split()
    words = all_words[:_NAME_WORDS]
    while len(" ".join(words)) > _NAME_CHARS and len(words) > 1:
        words.pop()
    if len(words) < len(all_words):
        while len(words) > 1 and words[-1].lower() in _DANGLING:
            words.pop()
    return " ".join(words)[:_NAME_CHARS].rstrip()


def _interval_seconds(when: str) -> int | None:
    """Seconds of an 'every <duration>' phrase (a recurring recall needs the number)."""
    body = when.lower().removeprefix("every").strip()
    if body in ("hour", "minute", "day", "week"):
        body = "1 " + body
    if not re.fullmatch(_DURATION, body):
        return None
    parts = re.findall(rf"(?:(\d+(?:\.\d+)?)\s*|\ban?\s+)({_UNIT})\b", body)
    return round(sum(float(number or 1) * _UNIT_SECONDS[unit[0]] for number, unit in parts))


def parse_request(text: str) -> ToolIntent | None:
    """The scheduling tool call a plain sentence asks for, or None. Time phrases stay verbatim."""
    sentence = _clean(text)
    if not sentence:
        return None
    if _LIST_AUTOMATIONS.match(sentence):
        return ToolIntent("cron", {"action": "list"})
    if _LIST_RECALLS.match(sentence):
        return ToolIntent("manage_recall", {"action": "list"})
    if _CANCEL_RECALL.match(sentence):
        return ToolIntent("manage_recall", {"action": "cancel"})
    if match := _MANAGE_AUTOMATION.match(sentence):
        name = _task(match["name"])
        if name:
            action = _VERBS.get(match["verb"].lower(), "remove")
            return ToolIntent("cron", {"action": action, "name": name})
    for pattern in (_RECALL_WHEN_FIRST, _RECALL_TASK_FIRST):
        if (match := pattern.match(sentence)) and (task := _task(match["task"])):
            return _recall_intent(match["when"], task)
    for pattern in (_REMIND_WHEN_FIRST, _REMIND_TASK_FIRST, _BARE_WHEN_FIRST):
        if (match := pattern.match(sentence)) and (task := _task(match["task"])):
            when = match["when"].strip()
            return ToolIntent(
                "cron", {"action": "add", "name": short_name(task), "when": when, "message": task}
            )
    return None


def _recall_intent(when: str, task: str) -> ToolIntent | None:
    when = when.strip()
    args: dict[str, Any] = {"additional_context_message": task}
    if when.lower().startswith("every "):
        seconds = _interval_seconds(when)
        if seconds is None:  # "every weekday at 9" is an automation's job, not a recall's
            return None
        args.update(call_type="recurring", interval_seconds=seconds)
    else:
        args.update(call_type="once", when=when)
    args["internal_comment"] = f"follow up: {task}"
    return ToolIntent("schedule_recall", args)


def is_history_question(text: str) -> bool:
    return bool(_HISTORY_QUESTION.match(_clean(text)))


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


def _tool_summary(parts: Sequence[ToolReturnPart]) -> str:
    lines = []
    for part in parts:
        result = part.model_response_str(wrap_if_error=False).strip() or "(no result)"
        failed = part.outcome != "success" or result.lower().startswith(("error", "failed"))
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
        # Never call tools here: a reminder must not schedule more reminders when it fires.
        kind, task = scheduled
        return Reply(f"{PREFIX} {kind}: {_sentence(task)}" if task else "")
    if is_history_question(prompt):
        earlier = [text for text in _user_texts(messages[:-1]) if text.strip()]
        if not earlier:
            return Reply(f"{PREFIX} You have not said anything before this in this session.")
        return Reply(f'{PREFIX} Before this you said: "{earlier[-1].strip()}"')
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
        env = os.environ.get(WPS_ENV)
        self.words_per_second = parse_wps(env if words_per_second is None else words_per_second)
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
