"""A turn's memory within a token budget: which entries the runner gets, which to compact (pure)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentcron.agent.runner import HistoryEntry, ToolRecord
from agentcron.domain.sessions import Entry, Message, Role

__all__ = [
    "MAX_TOOL_ARGS_CHARS",
    "MAX_TOOL_RESULT_CHARS",
    "SUMMARY_ROLE",
    "TOOL_ROLE",
    "MemoryPlan",
    "estimate_tokens",
    "history_entry",
    "plan_memory",
    "run_tool_call",
    "summary_entry",
    "tool_entry",
]

SUMMARY_ROLE = Role.SUMMARY
TOOL_ROLE = Role.TOOL
MAX_TOOL_ARGS_CHARS = 2_000
MAX_TOOL_RESULT_CHARS = 4_000
_CHARS_PER_TOKEN = 4  # the usual rough estimate for English text; no tokenizer per model needed
_ENTRY_OVERHEAD_TOKENS = 4  # role and framing of one message


def estimate_tokens(role: str, content: str, meta: Mapping[str, Any] | None = None) -> int:
    """A rough token count of one entry as the model sees it (chars / 4, plus framing)."""
    chars = len(content)
    if role == TOOL_ROLE and meta:
        chars += len(str(meta.get("name", ""))) + len(json.dumps(meta.get("args", {})))
    return math.ceil(chars / _CHARS_PER_TOKEN) + _ENTRY_OVERHEAD_TOKENS


def _tokens(message: Message) -> int:
    return estimate_tokens(message.role, message.content, message.meta)


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """What a turn's runner gets from the read window.

    `history` is the answer when `fold` is False. When it is True a new summary is due: the
    runner gets a summary of `previous` + `compact` followed by `history` (the recent entries
    kept), and `through_id` is the newest entry that summary covers.
    """

    history: tuple[Message, ...]
    fold: bool = False
    compact: tuple[Message, ...] = ()
    previous: Message | None = None
    through_id: str | None = None


def plan_memory(window: Sequence[Message], budget: int, *, window_full: bool) -> MemoryPlan:
    """Plan a turn's history from `window` (the newest entries before the turn, oldest first).

    The newest `summary` entry stands for everything up to the entry its meta names
    (`through_id`); older summaries and covered entries are left out. A compaction is due
    when the summary and the entries after it exceed `budget` tokens, or when the window
    (`window_full`: the read hit its count limit) no longer reaches back to what the last
    summary covered, so nothing falls out of memory unsummarized. It keeps the newest
    entries that fit half the budget (at most half the window) and folds the rest.
    """
    if budget < 1:
        raise ValueError(f"a history budget must be at least 1 token, got {budget}")
    previous, start = None, 0
    for index in range(len(window) - 1, -1, -1):
        if window[index].role == SUMMARY_ROLE:
            previous = window[index]
            break
    covered = False
    if previous is not None:
        through = previous.meta.get("through_id")
        for index, message in enumerate(window):
            if message.id == through:
                start, covered = index + 1, True
                break
    real = [m for m in window[start:] if m.role != SUMMARY_ROLE]
    head = () if previous is None else (previous,)
    total = sum(map(_tokens, real)) + sum(map(_tokens, head))
    lost = window_full and not covered
    if total <= budget and not lost:
        return MemoryPlan(history=(*head, *real))
    keep_tokens = budget // 2
    keep_count = max(len(window) // 2, 1) if lost else len(real)
    kept, cut = 0, len(real)
    while cut > 0 and len(real) - cut < keep_count:
        cost = _tokens(real[cut - 1])
        if kept + cost > keep_tokens:
            break
        kept += cost
        cut -= 1
    compact, keep = tuple(real[:cut]), tuple(real[cut:])
    through_id = compact[-1].id if compact else None
    if through_id is None and previous is not None:
        through_id = previous.meta.get("through_id")
    fold = bool(compact) or previous is not None
    return MemoryPlan(
        history=keep, fold=fold, compact=compact, previous=previous, through_id=through_id
    )


def history_entry(message: Message) -> HistoryEntry:
    """A stored entry as the runner sees it."""
    return HistoryEntry(message.role, message.content, message.meta)


def summary_entry(
    text: str, *, through_id: str | None, covered: int, turn_id: str, budget: int
) -> Entry:
    """The transcript entry of a compaction: the summary, bounded to a quarter of the budget."""
    limit = max(budget // 4, 1) * _CHARS_PER_TOKEN
    text = text.strip()
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    meta = {"through_id": through_id, "entries": covered, "turn_id": turn_id}
    return Entry(SUMMARY_ROLE, text, meta)


def _clip(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[: limit - 1] + "…", True


def tool_entry(record: ToolRecord, turn_id: str) -> Entry:
    """A tool call and its result as a transcript entry, arguments and result truncated."""
    args: Any = record.args
    args_text = json.dumps(args, default=str)
    clipped_args = len(args_text) > MAX_TOOL_ARGS_CHARS
    if clipped_args:
        args = {"_truncated": _clip(args_text, MAX_TOOL_ARGS_CHARS)[0]}
    result, clipped_result = _clip(record.result, MAX_TOOL_RESULT_CHARS)
    meta: dict[str, Any] = {
        "turn_id": turn_id,
        "call_id": record.call_id,
        "name": record.name,
        "args": args,
        "ok": record.ok,
    }
    if record.duration_ms is not None:
        meta["duration_ms"] = record.duration_ms
    if clipped_args or clipped_result:
        meta["truncated"] = True
    return Entry(TOOL_ROLE, result, meta)


def run_tool_call(entry: Entry) -> dict[str, Any]:
    """A tool entry (`tool_entry`: arguments and result already truncated) as a run record
    keeps it: name, args, result (the error text when `ok` is False), ok, duration_ms.
    """
    meta = entry.meta
    call: dict[str, Any] = {
        "call_id": meta["call_id"],
        "name": meta["name"],
        "args": meta["args"],
        "result": entry.content,
        "ok": meta["ok"],
        "duration_ms": meta.get("duration_ms"),
    }
    if meta.get("truncated"):
        call["truncated"] = True
    return call
