"""Tool policy, the approval state machine and argument bounds (pure; the durable broker is
tested with a real store in tests/integration/test_approval_records.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentcron.domain.approvals import (
    DEFAULT_APPROVAL_TIMEOUT,
    MAX_ARGS_CHARS,
    Approval,
    ApprovalError,
    ApprovalState,
    bounded_args,
    decide,
    denial_text,
    expire,
    new_approval,
    resolve_policy,
)
from agentcron.store.ids import new_id

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def pending(**kw: object) -> Approval:
    args: dict[str, object] = {"tool": "delete_file", "args": {"path": "/tmp/a"}}
    args.update(kw)
    return new_approval(  # type: ignore[arg-type]
        session_key="api:s", turn_id="t1", now=T0, approval_id=new_id(), **args
    )


def test_policy_configured_wins_else_the_tools_rule_else_allow() -> None:
    assert resolve_policy("x", {}) == "allow"
    assert resolve_policy("x", {}, requires_approval=True) == "approve"
    assert resolve_policy("x", {}, policies={"x": "deny"}, requires_approval=True) == "deny"
    assert resolve_policy("x", {}, policies={"x": "allow"}, requires_approval=True) == "allow"
    assert resolve_policy("x", {}, policies={"y": "deny"}) == "allow"


def test_policy_rule_can_decide_per_call_from_the_arguments() -> None:
    def big(args: dict[str, object]) -> bool:
        return int(str(args.get("amount", 0))) > 100

    assert resolve_policy("pay", {"amount": 5}, requires_approval=big) == "allow"
    assert resolve_policy("pay", {"amount": 500}, requires_approval=big) == "approve"


def test_policy_rejects_an_unknown_word() -> None:
    with pytest.raises(ValueError, match="allow, approve or deny"):
        resolve_policy("x", {}, policies={"x": "maybe"})  # type: ignore[dict-item]


def test_new_approval_is_pending_with_a_five_minute_default_expiry() -> None:
    approval = pending()
    assert approval.state is ApprovalState.PENDING
    assert approval.pending
    assert approval.expires_at - approval.requested_at == DEFAULT_APPROVAL_TIMEOUT
    assert (approval.decision, approval.decided_by, approval.decided_at) == (None, None, None)
    assert denial_text(approval) == "Denied: no decision yet."
    with pytest.raises(ValueError, match="positive"):
        pending(timeout=timedelta(0))


def test_approve_and_deny_transitions_record_who_and_when() -> None:
    at = T0 + timedelta(minutes=1)
    approved = decide(pending(), "approve", by="ana", at=at)
    assert (approved.state, approved.decision, approved.decided_by) == (
        ApprovalState.APPROVED,
        "approve",
        "ana",
    )
    assert approved.decided_at == at
    assert denial_text(approved) is None
    denied = decide(pending(), "deny", by="bo", at=at)
    assert denied.state is ApprovalState.DENIED
    assert denial_text(denied) == "Denied by bo."


def test_a_decided_or_expired_approval_takes_no_second_decision() -> None:
    approved = decide(pending(), "approve", by="ana", at=T0)
    with pytest.raises(ApprovalError, match="already approved"):
        decide(approved, "deny", by="bo", at=T0)
    with pytest.raises(ApprovalError, match="expired"):
        decide(pending(), "approve", by="ana", at=T0 + DEFAULT_APPROVAL_TIMEOUT)
    with pytest.raises(ValueError, match="who"):
        decide(pending(), "approve", by=" ", at=T0)
    with pytest.raises(ValueError, match="approve or deny"):
        decide(pending(), "yes", by="ana", at=T0)  # type: ignore[arg-type]


def test_expiry_is_a_denial_by_the_timeout_and_leaves_decided_ones_alone() -> None:
    gone = expire(pending(), at=T0 + DEFAULT_APPROVAL_TIMEOUT)
    assert (gone.state, gone.decision, gone.decided_by) == (
        ApprovalState.EXPIRED,
        "deny",
        "timeout",
    )
    assert denial_text(gone) == "Denied: timed out waiting for a person's approval."
    approved = decide(pending(), "approve", by="ana", at=T0)
    assert expire(approved, at=T0 + timedelta(hours=1)) is approved


def test_arguments_are_kept_as_plain_bounded_json() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    assert bounded_args({"p": "/tmp/a", "when": at, "n": [1, 2]}) == {
        "p": "/tmp/a",
        "when": str(at),
        "n": [1, 2],
    }
    big = bounded_args({"text": "x" * (2 * MAX_ARGS_CHARS)})
    assert list(big) == ["_truncated"]
    assert len(big["_truncated"]) == MAX_ARGS_CHARS + 1
    assert big["_truncated"].startswith('{"text": "xxx')


@pytest.mark.parametrize(
    ("by", "text"),
    [
        ("timeout", "Denied: timed out waiting for a person's approval."),
        ("cancelled", "Denied: the turn was stopped before a person decided."),
        ("restart", "Denied: the service restarted before a person decided."),
        ("session deleted", "Denied: the session was deleted before a person decided."),
    ],
)
def test_an_expiry_tells_the_model_why_no_one_decided(by: str, text: str) -> None:
    gone = expire(pending(), at=T0 + timedelta(minutes=1), by=by)
    assert gone.state is ApprovalState.EXPIRED
    assert denial_text(gone) == text
