"""A turn's memory read from the store: the window of entries, the budget, compaction by the
runner (sessions/memory.py plans it; this module reads and asks).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from agentcron.agent.runner import HistoryEntry, Runner
from agentcron.config import EngineSettings
from agentcron.domain.budgets import ContextMode
from agentcron.domain.sessions import Entry, MemoryScope, Message
from agentcron.store.interface import Transcripts
from agentcron.turns.memory import (
    SUMMARY_ROLE,
    estimate_tokens,
    history_entry,
    plan_memory,
    summary_entry,
)

log = logging.getLogger(__name__)

AFTER_ALL = 2**31 - 1  # a seq above every entry's (seqs are 32-bit integers in the store)


class TurnMemory:
    """What a runner gets as history: bounded by its window and its token budget; past the
    budget a runner that can `summarize` folds the older part into a summary entry.
    """

    def __init__(
        self,
        transcripts: Transcripts,
        runner: Runner,
        settings: EngineSettings,
        scope: Callable[[str], MemoryScope | None] | None = None,
    ) -> None:
        self.transcripts = transcripts
        self.runner = runner
        self.settings = settings
        self.scope = scope

    async def _window(self, key: str, seq: int) -> tuple[list[Message], bool]:
        """The newest entries before `seq` (of the session's memory scope), bounded by the
        runner's (or the setting's) window, and whether the read hit that bound; read
        outside any write transaction. A runner that wants no history pays nothing.
        """
        window = self._window_size()
        if window == 0:
            return [], False
        scope = None if self.scope is None else self.scope(key)
        if scope is None:
            found = await self.transcripts.history(key, before=seq, limit=window)
        else:
            found = await self.transcripts.history_across(scope, key, before=seq, limit=window)
        return found, len(found) >= window

    def _budget(self) -> int | None:
        budget = getattr(self.runner, "history_budget", None)
        if isinstance(budget, int) and budget > 0:
            return budget
        return self.settings.history_budget

    async def for_turn(
        self,
        key: str,
        seq: int,
        turn_id: str,
        written: list[Entry],
        *,
        context: ContextMode = ContextMode.CONTINUE,
        budget: int | None = None,
    ) -> list[HistoryEntry]:
        """A turn's history within the token budget (`budget`: a job's own, else the
        runner's or the setting's). Past it, a runner that can summarize folds the older part
        into a `summary` entry (appended to `written`, saved with the turn's end) and gets
        summary + the recent entries; any other gets the recent entries.

        A job's `context` narrows it: `fresh` gets nothing (the transcript is not read),
        `summary` only the session's latest summary entry, if it fits the budget.
        """
        if context is ContextMode.FRESH:
            return []
        window, full = await self._window(key, seq)
        if not window:
            return []
        budget = budget or self._budget()
        if context is ContextMode.SUMMARY:
            return _latest_summary(window, budget)
        if budget is None:
            return [history_entry(m) for m in window if m.role != SUMMARY_ROLE]
        plan = plan_memory(window, budget, window_full=full)
        if not plan.fold:
            return [history_entry(m) for m in plan.history]
        summarize = getattr(self.runner, "summarize", None)
        if summarize is None:
            return [history_entry(m) for m in plan.history]
        previous = None if plan.previous is None else plan.previous.content
        try:
            text = await summarize(
                [history_entry(m) for m in plan.compact],
                previous=previous,
                max_tokens=max(budget // 4, 1),
            )
        except Exception as exc:  # a failed summary costs the older part, not the turn
            log.warning(
                "could not summarize the older conversation: %s",
                exc,
                extra={"session_key": key, "turn_id": turn_id},
            )
            return [history_entry(m) for m in plan.history]
        before = 0 if plan.previous is None else plan.previous.meta.get("entries", 0)
        covered = len(plan.compact) + (before if isinstance(before, int) else 0)
        entry = summary_entry(
            str(text), through_id=plan.through_id, covered=covered, turn_id=turn_id, budget=budget
        )
        written.append(entry)
        return [
            HistoryEntry(entry.role, entry.content, entry.meta),
            *(history_entry(m) for m in plan.history),
        ]

    @property
    def keeps_history(self) -> bool:
        """The runner gets history (its window, or the setting's, is above 0)."""
        return self._window_size() > 0

    def _window_size(self) -> int:
        """Entries the runner gets at most: its own `history_window`, else the setting's;
        0 = none (and the transcript is not read).
        """
        window = getattr(self.runner, "history_window", self.settings.history_window)
        return window if isinstance(window, int) and window > 0 else 0

    async def history_of(self, key: str) -> list[HistoryEntry]:
        """A session's newest history outside any turn: what a delivery job's isolated run
        gets from its own session (`cron:{job_id}`) before it runs.
        """
        window, full = await self._window(key, AFTER_ALL)
        budget = self._budget()
        if budget is None:
            return [history_entry(m) for m in window if m.role != SUMMARY_ROLE]
        # No compaction here (an isolated run is not a turn of the session): the newest
        # entries that fit the budget, after the last summary when it fits too.
        plan = plan_memory(window, budget, window_full=full)
        kept = list(plan.history)
        if plan.fold and plan.previous is not None:
            kept.insert(0, plan.previous)
            if sum(estimate_tokens(m.role, m.content, m.meta) for m in kept) > budget:
                kept.pop(0)
        return [history_entry(m) for m in kept]


def _latest_summary(window: list[Message], budget: int | None) -> list[HistoryEntry]:
    """The newest summary entry of `window` as the whole history, when it fits `budget`."""
    for message in reversed(window):
        if message.role != SUMMARY_ROLE:
            continue
        cost = estimate_tokens(message.role, message.content, message.meta)
        return [] if budget is not None and cost > budget else [history_entry(message)]
    return []
