"""domain/grants.py: which calls a standing grant allows (tool, argument pattern, expiry), and
what a grant may be made of.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agentcron.domain.approvals import ApprovalState, approve_by_grant, new_approval
from agentcron.domain.grants import (
    MAX_GRANT_AHEAD,
    Grant,
    check_pattern,
    grant_matches,
    matching_grant,
    new_grant,
)
from agentcron.errors import InvalidInputError
from tests.conftest import T0

DAY = timedelta(days=1)


def grant(tool: str = "archive_logs", args: dict[str, Any] | None = None, **kw: Any) -> Grant:
    kw.setdefault("expires_at", T0 + DAY)
    return new_grant(
        grant_id=kw.pop("grant_id", "G1"),
        job_id="J1",
        tool=tool,
        args=args,
        granted_by="ana",
        now=T0,
        **kw,
    )


# (pattern, call's arguments, matches?)
TABLE: list[tuple[dict[str, Any], dict[str, Any], bool]] = [
    ({}, {}, True),  # {} = any call of the tool
    ({}, {"name": "x", "n": 3}, True),
    ({"name": "build.log"}, {"name": "build.log"}, True),
    ({"name": "build.log"}, {"name": "build.log2"}, False),  # exact unless a glob
    ({"name": "*.log"}, {"name": "build.log"}, True),
    ({"name": "*.log"}, {"name": "BUILD.LOG"}, False),  # case-sensitive
    ({"name": "*.log"}, {"name": "a/b/../../etc.log"}, True),  # `*` crosses `/`
    ({"name": "logs/?.log"}, {"name": "logs/a.log"}, True),
    ({"name": "logs/?.log"}, {"name": "logs/ab.log"}, False),
    ({"name": "[ab].log"}, {"name": "b.log"}, True),
    ({"name": "*.log"}, {}, False),  # a named argument must be there
    ({"name": "*"}, {"name": 5}, False),  # a glob matches strings only
    ({"name": "*.log"}, {"name": "x.log", "other": "anything"}, True),  # unnamed: any
    ({"n": 3}, {"n": 3}, True),
    ({"n": 3}, {"n": 3.0}, True),
    ({"n": 3}, {"n": "3"}, False),
    ({"n": 1}, {"n": True}, False),  # true is not 1
    ({"flag": True}, {"flag": True}, True),
    ({"flag": True}, {"flag": 1}, False),
    ({"flag": False}, {"flag": 0}, False),
    ({"v": None}, {"v": None}, True),
    ({"v": None}, {}, False),
    ({"v": None}, {"v": ""}, False),
    ({"a": "x", "b": 2}, {"a": "x", "b": 2}, True),  # every named one must match
    ({"a": "x", "b": 2}, {"a": "x", "b": 3}, False),
]


@pytest.mark.parametrize(("pattern", "args", "expected"), TABLE)
def test_the_argument_pattern(
    pattern: dict[str, Any], args: dict[str, Any], expected: bool
) -> None:
    assert grant_matches(grant(args=pattern), "archive_logs", args, T0) is expected


def test_a_grant_never_matches_a_tool_it_does_not_name() -> None:
    g = grant("archive_logs")
    assert grant_matches(g, "archive_logs", {}, T0)
    assert not grant_matches(g, "archive_log", {}, T0)
    assert not grant_matches(g, "archive_logs2", {}, T0)
    assert not grant_matches(g, "delete_file", {}, T0)


def test_an_expired_grant_never_matches() -> None:
    g = grant(expires_at=T0 + DAY)
    assert grant_matches(g, "archive_logs", {}, T0 + DAY - timedelta(microseconds=1))
    assert not grant_matches(g, "archive_logs", {}, T0 + DAY)
    assert not grant_matches(g, "archive_logs", {}, T0 + 2 * DAY)


def test_the_first_matching_grant_decides() -> None:
    narrow = grant(args={"name": "*.log"}, grant_id="G1")
    wide = grant(args={}, grant_id="G2")
    other = grant("delete_file", grant_id="G3")
    assert matching_grant([narrow, wide], "archive_logs", {"name": "a.log"}, T0) is narrow
    assert matching_grant([narrow, wide], "archive_logs", {"name": "a.txt"}, T0) is wide
    assert matching_grant([other], "archive_logs", {}, T0) is None
    assert matching_grant([], "archive_logs", {}, T0) is None


@pytest.mark.parametrize(
    ("tool", "args", "kw", "message"),
    [
        ("", None, {}, "names one tool"),
        ("archive_*", None, {}, "not a glob"),
        ("x" * 201, None, {}, "names one tool"),
        ("t", {"a": {"nested": 1}}, {}, "must be a glob"),
        ("t", {"a": [1]}, {}, "must be a glob"),
        ("t", {"": "x"}, {}, "argument name"),
        ("t", {f"a{i}": "x" for i in range(17)}, {}, "at most 16"),
        ("t", {"a": "x" * 501}, {}, "longer than 500"),
        ("t", None, {"expires_at": T0}, "in the future"),
        ("t", None, {"expires_at": T0 + MAX_GRANT_AHEAD + DAY}, "days ahead"),
        ("t", None, {"expires_at": (T0 + DAY).replace(tzinfo=None)}, "time zone"),
    ],
)
def test_what_a_grant_may_not_be(
    tool: str, args: dict[str, Any] | None, kw: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        grant(tool, args, **kw)


def test_a_grant_needs_who_made_it() -> None:
    with pytest.raises(InvalidInputError, match="who made it"):
        new_grant(
            grant_id="G",
            job_id="J",
            tool="t",
            args=None,
            expires_at=T0 + DAY,
            granted_by=" ",
            now=T0,
        )
    assert check_pattern(None) == {}


def test_an_approval_by_grant_names_it_and_only_for_its_own_job() -> None:
    g = grant()
    asked = new_approval(
        tool="archive_logs",
        args={},
        session_key="s:1",
        turn_id="T",
        now=T0,
        approval_id="A",
        job_id="J1",
    )
    approved = approve_by_grant(asked, g, at=T0)
    assert (approved.state, approved.decision, approved.decided_by, approved.grant_id) == (
        ApprovalState.APPROVED,
        "approve",
        "standing grant G1",
        "G1",
    )
    other_job = new_approval(
        tool="archive_logs",
        args={},
        session_key="s:1",
        turn_id="T",
        now=T0,
        approval_id="B",
        job_id="J2",
    )
    with pytest.raises(ValueError, match="its own job"):
        approve_by_grant(other_job, g, at=T0)
    message = new_approval(
        tool="archive_logs", args={}, session_key="s:1", turn_id="T", now=T0, approval_id="C"
    )
    with pytest.raises(ValueError, match="its own job"):
        approve_by_grant(message, g, at=T0)
