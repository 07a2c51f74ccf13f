"""Pages of the lists (sessions, jobs, runs, messages, approvals): a bounded page and an
opaque cursor to the next one.

A list is read in one stable order whose last key is unique (`(sort key, id)`), so a cursor is
the key of the last row shown and the next page starts strictly after it: each row comes
exactly once, whatever the ties on the sort key. A cursor names its list, so one list's cursor
given to another is refused like a damaged one (InvalidInputError: HTTP 422).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from agentcron.errors import InvalidInputError

T = TypeVar("T")

DEFAULT_PAGE = 50
MAX_PAGE = 200
MAX_CURSOR = 2_000  # characters: a cursor this API gives is far shorter

BAD_CURSOR = "cursor is not one this list gave: pass next_cursor as it is"

KeyPart = datetime | str | int
Key = tuple[KeyPart, ...]


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list and the cursor to the next (None on the last page)."""

    items: list[T]
    next_cursor: str | None


def encode_cursor(kind: str, key: Sequence[KeyPart]) -> str:
    """The opaque cursor of list `kind` after the row whose key is `key`."""
    parts = [{"t": p.isoformat()} if isinstance(p, datetime) else p for p in key]
    raw = json.dumps([kind, parts], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(kind: str, text: str, shape: Sequence[type]) -> Key:
    """The key a cursor of list `kind` holds, each part of the type `shape` names; a cursor
    this list did not give is an InvalidInputError.
    """
    bad = InvalidInputError(BAD_CURSOR)
    if len(text) > MAX_CURSOR:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        named, parts = json.loads(raw)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise bad from None
    if named != kind or not isinstance(parts, list) or len(parts) != len(shape):
        raise bad
    key: list[KeyPart] = []
    for part, want in zip(parts, shape, strict=True):
        key.append(_part(part, want, bad))
    return tuple(key)


def decode_time_key(kind: str, text: str) -> tuple[datetime, str]:
    """The `(instant, id)` key a cursor of list `kind` holds (runs, sessions, approvals)."""
    at, ident = decode_cursor(kind, text, (datetime, str))
    if not isinstance(at, datetime) or not isinstance(ident, str):  # as decoded: never
        raise InvalidInputError(BAD_CURSOR)
    return at, ident


def _part(part: object, want: type, bad: InvalidInputError) -> KeyPart:
    if want is datetime:
        if not isinstance(part, dict) or not isinstance(text := part.get("t"), str):
            raise bad
        try:
            at = datetime.fromisoformat(text)
        except ValueError:
            raise bad from None
        if at.tzinfo is None:
            raise bad
        return at
    if want is int and isinstance(part, int) and not isinstance(part, bool):
        return part
    if want is str and isinstance(part, str):
        return part
    raise bad


def page_of(found: list[T], limit: int, kind: str, key_of: Callable[[T], Key]) -> Page[T]:
    """The page of `found` (read with `limit + 1`, to know whether more follow)."""
    items = found[:limit]
    more = len(found) > limit and bool(items)
    return Page(items, encode_cursor(kind, key_of(items[-1])) if more else None)


def check_limit(limit: int) -> int:
    """A page size within 1..MAX_PAGE (the library's callers; the API bounds its own)."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidInputError(f"limit must be 1 to {MAX_PAGE}, not {limit}")
    return limit
