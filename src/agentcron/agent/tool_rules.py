"""Which tools a session may use, each tool's policy and approval timeout (pure: no I/O).

Keys are tool names or globs (`fnmatch`: `*`, `?`, `[...]`), session keys or globs. An exact
key wins over a glob; of the globs that match, the longest (the most specific) wins, ties by
the order given. A session that no pattern of `sessions` names may use every tool.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from fnmatch import fnmatchcase
from typing import TypeVar

from agentcron.domain.approvals import Policy

__all__ = ["GlobTable", "Layered", "ToolRules", "is_glob"]

_V = TypeVar("_V")
_GLOB_CHARS = frozenset("*?[")


def is_glob(pattern: str) -> bool:
    return any(c in _GLOB_CHARS for c in pattern)


class GlobTable(Mapping[str, _V]):
    """A mapping whose lookup also matches glob keys: `table.get("files_rm")` finds the value
    of `"files_rm"`, else of the longest matching glob such as `"files_*"`. Iteration and
    `len` are over the keys as given.
    """

    def __init__(self, items: Mapping[str, _V] | None = None) -> None:
        self._items: dict[str, _V] = dict(items or {})
        globs = [k for k in self._items if is_glob(k)]
        # The most specific first: longer patterns, then the order given (sort is stable).
        self._globs = sorted(globs, key=len, reverse=True)

    def match(self, name: str) -> str | None:
        """The key that applies to `name`, or None."""
        if name in self._items:
            return name
        return next((g for g in self._globs if fnmatchcase(name, g)), None)

    def __getitem__(self, name: str) -> _V:
        key = self.match(name)
        if key is None:
            raise KeyError(name)
        return self._items[key]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.match(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class Layered(Mapping[str, _V]):
    """`first`'s value of a key (by its own lookup, globs too), else `then`'s."""

    def __init__(self, first: Mapping[str, _V], then: Mapping[str, _V]) -> None:
        self._first, self._then = first, then

    def __getitem__(self, name: str) -> _V:
        found = self._first.get(name)
        return found if found is not None else self._then[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._first
        yield from (k for k in self._then if k not in self._first)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class ToolRules:
    """Per-tool policy and approval timeout, per-session allow-lists (all by name or glob)."""

    policies: GlobTable[Policy] = field(default_factory=GlobTable)
    approval_timeouts: GlobTable[timedelta] = field(default_factory=GlobTable)
    sessions: GlobTable[tuple[str, ...]] = field(default_factory=GlobTable)

    @classmethod
    def of(
        cls,
        policies: Mapping[str, Policy] | None = None,
        approval_timeouts: Mapping[str, timedelta] | None = None,
        sessions: Mapping[str, Sequence[str]] | None = None,
    ) -> ToolRules:
        return cls(
            GlobTable(policies),
            GlobTable(approval_timeouts),
            GlobTable({k: tuple(v) for k, v in (sessions or {}).items()}),
        )

    def allow_list(self, session_key: str | None) -> tuple[str, ...] | None:
        """The tool names/globs `session_key` may use; None = every tool."""
        if session_key is None or not self.sessions:
            return None
        return self.sessions.get(session_key)

    def allowed(self, session_key: str | None, tool: str) -> bool:
        """May this session's turns use `tool` (is it offered to the model)?"""
        patterns = self.allow_list(session_key)
        return patterns is None or any(fnmatchcase(tool, p) for p in patterns)

    def sessions_of(self, tool: str) -> list[str]:
        """The session patterns whose allow-list names `tool`, then `*others*` when sessions
        that no pattern names (who may use everything) exist: what `tools list` shows.
        """
        if not self.sessions:
            return ["all"]
        found = [
            key for key, tools in self.sessions.items() if any(fnmatchcase(tool, p) for p in tools)
        ]
        if "*" not in self.sessions:
            found.append("others")
        return found
