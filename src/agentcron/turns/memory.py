"""A turn's memory within a token budget: which entries the runner gets, which to compact (pure)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentcron.agent.runner import HistoryEntry
from agentcron.domain.sessions import Entry, Message, Role

__all__ = [
    "SUMMARY_ROLE",
    "MemoryPlan",
    "estimate_tokens",
    "history_entry",
    "plan_memory",
    "summary_entry",
]

SUMMARY_ROLE = Role.SUMMARY
_CHARS_PER_TOKEN = 4  # the usual rough estimate for English text; no tokenizer per model needed
_ENTRY_OVERHEAD_TOKENS = 4  # role and framing of one message


def estimate_tokens(role: str, content: str, meta: Mapping[str, Any] | None = None) -> int:
    """A rough token count of one entry as the model sees it (chars / 4, plus framing)."""
    chars = len(content)
    if role == Role.TOOL and meta:
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
    return HistoryEntry(message.role, message.content, message.meta, message.created_at)


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
