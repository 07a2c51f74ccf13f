"""Pages and cursors: a cursor holds its list's name and the last key shown, and only a cursor
this list gave is taken back.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from agentcron.errors import InvalidInputError
from agentcron.service.paging import (
    MAX_CURSOR,
    MAX_PAGE,
    Page,
    check_limit,
    decode_cursor,
    decode_time_key,
    encode_cursor,
    page_of,
)

AT = datetime(2026, 11, 26, 9, 30, 0, 123456, tzinfo=UTC)


def raw(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("shape", "key"),
    [
        ((datetime, str), (AT, "01ABC")),
        ((datetime, str), (AT.astimezone(timezone(timedelta(hours=-5))), "x")),
        ((str,), ("01JOB",)),
        ((str, int), ("back", 42)),
    ],
)
def test_a_cursor_gives_back_the_key_it_holds(shape: tuple[type, ...], key: tuple[object]) -> None:
    cursor = encode_cursor("runs", key)  # type: ignore[arg-type]
    assert "=" not in cursor
    assert len(cursor) < MAX_CURSOR
    assert decode_cursor("runs", cursor, shape) == key


@pytest.mark.parametrize(
    "cursor",
    [
        "not-ours",
        "",
        "e30",  # {}
        raw(["sessions", [{"t": AT.isoformat()}, "k"]]),  # another list's
        raw(["runs", [{"t": AT.isoformat()}]]),  # too short
        raw(["runs", [{"t": "2026-11-26T09:30:00"}, "k"]]),  # no zone
        raw(["runs", [{"t": "yesterday"}, "k"]]),
        raw(["runs", ["2026-11-26T09:30:00Z", "k"]]),  # an instant as a plain string
        raw(["runs", [{"t": AT.isoformat()}, 7]]),  # an id that is not text
        raw(["runs", [{"t": AT.isoformat()}, "k", "extra"]]),
        raw("runs"),
        "A" * (MAX_CURSOR + 1),
    ],
)
def test_a_cursor_this_list_did_not_give_is_refused(cursor: str) -> None:
    with pytest.raises(InvalidInputError, match="pass next_cursor as it is"):
        decode_time_key("runs", cursor)


def test_an_int_part_is_an_int_not_a_bool() -> None:
    with pytest.raises(InvalidInputError):
        decode_cursor("messages", raw(["messages", ["on", True]]), (str, int))


def test_a_page_has_a_cursor_only_when_more_follow() -> None:
    rows = [(AT, "a"), (AT, "b"), (AT, "c")]
    more = page_of(rows, 2, "runs", lambda r: r)
    assert more.items == rows[:2]
    assert more.next_cursor is not None
    assert decode_time_key("runs", more.next_cursor) == (AT, "b")
    assert page_of(rows, 3, "runs", lambda r: r) == Page(rows, None)
    assert page_of([], 3, "runs", lambda r: r) == Page([], None)


@pytest.mark.parametrize(("limit", "allowed"), [(0, False), (1, True), (MAX_PAGE, True), (MAX_PAGE + 1, False)])  # fmt: skip
def test_a_page_size_is_bounded(limit: int, allowed: bool) -> None:
    if allowed:
        assert check_limit(limit) == limit
    else:
        with pytest.raises(InvalidInputError, match=f"limit must be 1 to {MAX_PAGE}"):
            check_limit(limit)
