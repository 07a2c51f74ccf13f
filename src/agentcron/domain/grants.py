"""Standing approvals: a person's decision, made once for a job, that a tool call of one of
its scheduled runs may go ahead without waiting (pure: no I/O, no clock read).

A grant names one tool, exactly, and an argument pattern: a JSON object of argument name ->
what the call's argument must be. A string is a glob (`fnmatch.fnmatchcase`: `*` any run of
characters, `/` included; `?` one character; `[abc]` one of them; case-sensitive) that only a
string argument can match; a number, `true`, `false` or `null` must be equal, of the same
kind (`1` is not `true`). An argument the pattern does not name may be anything; one it names
must be in the call. `{}` matches every call of the tool. A grant matches only before its
`expires_at`. The first grant that matches (oldest first) decides the call: approved,
recorded with the grant's id; a call no grant matches waits for a person as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any

from agentcron.errors import AgentcronError, InvalidInputError

__all__ = [
    "MAX_GRANTED_BY_CHARS",
    "MAX_GRANTS_PER_JOB",
    "MAX_GRANT_AHEAD",
    "MAX_PATTERN_ARGS",
    "MAX_PATTERN_CHARS",
    "MAX_TOOL_CHARS",
    "Grant",
    "GrantNotFoundError",
    "PatternValue",
    "check_pattern",
    "grant_decider",
    "grant_matches",
    "matching_grant",
    "new_grant",
]

MAX_GRANTS_PER_JOB = 50
MAX_PATTERN_ARGS = 16  # argument names one pattern may name
MAX_PATTERN_CHARS = 500  # one glob (or an argument name: 128)
MAX_ARG_NAME_CHARS = 128
MAX_TOOL_CHARS = 200
MAX_GRANTED_BY_CHARS = 200
MAX_GRANT_AHEAD = timedelta(days=366)  # a standing approval is reviewed at least yearly

PatternValue = str | int | float | bool | None


class GrantNotFoundError(AgentcronError, LookupError):
    """No grant of this id on this job (never made, or revoked)."""


@dataclass(frozen=True, slots=True)
class Grant:
    """A standing approval of `tool` calls whose arguments match `args`, for the scheduled
    runs of job `job_id`, until `expires_at`; made by `granted_by` at `created_at`.
    """

    id: str
    job_id: str
    tool: str
    args: dict[str, PatternValue]
    expires_at: datetime
    granted_by: str
    created_at: datetime

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at


def _check_value(name: str, value: Any) -> PatternValue:
    if isinstance(value, str):
        if len(value) > MAX_PATTERN_CHARS:
            raise InvalidInputError(
                f"the pattern of argument {name!r} is longer than {MAX_PATTERN_CHARS} characters"
            )
        return value
    if value is None or isinstance(value, bool | int | float):
        return value
    raise InvalidInputError(
        f"the pattern of argument {name!r} must be a glob (a string), a number, true, false "
        f"or null, not {type(value).__name__}"
    )


def check_pattern(args: Mapping[str, Any] | None) -> dict[str, PatternValue]:
    """An argument pattern as given, checked: at most MAX_PATTERN_ARGS names, each a
    non-empty string, each value a glob or a plain JSON scalar (no objects or lists).
    """
    if args is None:
        return {}
    if not isinstance(args, Mapping):
        raise InvalidInputError("the argument pattern must be a JSON object")
    if len(args) > MAX_PATTERN_ARGS:
        raise InvalidInputError(f"an argument pattern names at most {MAX_PATTERN_ARGS} arguments")
    checked: dict[str, PatternValue] = {}
    for name, value in args.items():
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_ARG_NAME_CHARS:
            raise InvalidInputError(
                f"an argument name must be 1 to {MAX_ARG_NAME_CHARS} characters, got {name!r}"
            )
        checked[name] = _check_value(name, value)
    return checked


def new_grant(
    *,
    grant_id: str,
    job_id: str,
    tool: str,
    args: Mapping[str, Any] | None,
    expires_at: datetime,
    granted_by: str,
    now: datetime,
) -> Grant:
    """A grant as a person asked for it, checked: a tool named exactly (no glob: a grant never
    matches a tool it does not name), a pattern (`check_pattern`), an expiry in the future and
    at most MAX_GRANT_AHEAD away, and who made it.
    """
    name = tool.strip()
    if not name or len(name) > MAX_TOOL_CHARS:
        raise InvalidInputError(f"a grant names one tool, 1 to {MAX_TOOL_CHARS} characters")
    if any(c in name for c in "*?["):
        raise InvalidInputError(
            f"a grant names one tool exactly, not a glob: {name!r} (one grant per tool)"
        )
    by = granted_by.strip()
    if not by or len(by) > MAX_GRANTED_BY_CHARS:
        raise InvalidInputError(
            f"a grant needs who made it, 1 to {MAX_GRANTED_BY_CHARS} characters"
        )
    if expires_at.tzinfo is None:
        raise InvalidInputError("a grant's expires_at must name its time zone (or offset)")
    if expires_at <= now:
        raise InvalidInputError("a grant's expires_at must be in the future")
    if expires_at - now > MAX_GRANT_AHEAD:
        raise InvalidInputError(
            f"a grant expires at most {MAX_GRANT_AHEAD.days} days ahead; make a new one then"
        )
    return Grant(
        id=grant_id,
        job_id=job_id,
        tool=name,
        args=check_pattern(args),
        expires_at=expires_at,
        granted_by=by,
        created_at=now,
    )


def _value_matches(pattern: PatternValue, value: Any) -> bool:
    if isinstance(pattern, str):
        return isinstance(value, str) and fnmatchcase(value, pattern)
    if isinstance(pattern, bool) or isinstance(value, bool):
        return type(pattern) is type(value) and pattern == value
    if pattern is None:
        return value is None
    return isinstance(value, int | float) and value == pattern


def grant_matches(grant: Grant, tool: str, args: Mapping[str, Any], now: datetime) -> bool:
    """Does `grant` allow the call `tool(args)` at `now`? Its tool, exactly; every argument
    its pattern names, present and matching; not expired.
    """
    if grant.tool != tool or grant.expired(now):
        return False
    return all(
        name in args and _value_matches(pattern, args[name]) for name, pattern in grant.args.items()
    )


def matching_grant(
    grants: Iterable[Grant], tool: str, args: Mapping[str, Any], now: datetime
) -> Grant | None:
    """The first of `grants` that allows `tool(args)` at `now`, or None."""
    return next((g for g in grants if grant_matches(g, tool, args, now)), None)


def grant_decider(grant: Grant) -> str:
    """Who decided a call a grant allowed, as its approval record says."""
    return f"standing grant {grant.id}"
