"""The offline model's reading of a plain sentence: the scheduling tool call it asks for (pure)."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolIntent", "is_history_question", "parse_request", "parse_tool_call", "short_name"]


@dataclass(frozen=True, slots=True)
class ToolIntent:
    """A tool call read from a sentence: the tool's name and its arguments."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)


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
_CALL_TOOL = re.compile(
    r"^(?:use|call|run)\s+(?:the\s+)?(?P<name>[A-Za-z_][\w.-]*)(?:\s+tool)?"
    r"(?:\s+with\s+(?P<args>.+))?$",
    re.IGNORECASE | re.DOTALL,
)
_KEY_VALUE = re.compile(r"([A-Za-z_]\w*)\s*=\s*(\"[^\"]*\"|[^,\s]+)")
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


def parse_tool_call(text: str, tool_names: Collection[str]) -> ToolIntent | None:
    """A direct call of one of `tool_names`: "use NAME", "call NAME with {json}" or
    "run the NAME tool with key=value, key2=value2" (a value is read as JSON when it parses,
    else kept as text). None when no such tool is named or the arguments do not parse.
    """
    match = _CALL_TOOL.match(_clean(text))
    if match is None or match["name"] not in tool_names:
        return None
    raw = (match["args"] or "").strip()
    if not raw:
        return ToolIntent(match["name"])
    if raw.startswith("{"):
        try:
            args = json.loads(raw)
        except ValueError:
            return None
        return ToolIntent(match["name"], args) if isinstance(args, dict) else None
    pairs = _KEY_VALUE.findall(raw)
    if not pairs:
        return None
    return ToolIntent(match["name"], {key: _value(value) for key, value in pairs})


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


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
