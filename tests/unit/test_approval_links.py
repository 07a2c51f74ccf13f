"""Decision links of approvals (capability tokens) and the Telegram approval message parts."""

from __future__ import annotations

import logging

import pytest

from agentcron.approval_links import (
    ApprovalLinks,
    RedactApprovalTokens,
    check_public_url,
    public_url_from_env,
)
from agentcron.channels.manager import OutboundMessage, approval_delivery_id
from agentcron.channels.telegram import (
    CALLBACK_DATA_LIMIT,
    approval_keyboard,
    approval_text,
    callback_data,
    parse_callback,
)
from agentcron.config import ConfigError

ID = "0b9d7c7e-3f0e-4a53-9a55-2f4a1c1e8f00"  # a uuid4, as approvals have


def test_a_token_decides_only_its_own_approval_under_its_own_secret() -> None:
    links = ApprovalLinks("server-secret")
    token = links.token(ID)
    assert len(token) == 43  # 256 bits, base64url without padding
    assert links.verify(ID, token)
    assert not links.verify("another-id", token)
    assert not links.verify(ID, token[:-1] + ("A" if token[-1] != "A" else "B"))
    assert not links.verify(ID, None)
    assert not links.verify(ID, "")
    assert not links.verify("\ud800", "\udfff")  # never an encoding error (a 500)
    assert not ApprovalLinks("rotated-secret").verify(ID, token)
    assert ApprovalLinks("server-secret").token(ID) == token  # no state: any process agrees
    assert "server-secret" not in repr(links)
    with pytest.raises(ValueError, match="non-empty"):
        ApprovalLinks("")


def test_the_decision_url_needs_a_public_url() -> None:
    assert ApprovalLinks("s").decision_url(ID) is None
    links = ApprovalLinks("s", public_url="https://cron.example.org/base/")
    assert links.decision_url(ID) == (
        f"https://cron.example.org/base/api/approvals/{ID}/decide?token={links.token(ID)}"
    )
    assert ApprovalLinks("s", "http://h").decision_url("a/b") == (
        f"http://h/api/approvals/a%2Fb/decide?token={ApprovalLinks('s').token('a/b')}"
    )


@pytest.mark.parametrize(
    "bad", ["cron.example.org", "ftp://h", "http://", "http://h/?x=1", "https://h/#f"]
)
def test_a_public_url_is_an_http_base_url(bad: str) -> None:
    with pytest.raises(ConfigError, match="AGENTCRON_PUBLIC_URL must be"):
        check_public_url(bad)
    with pytest.raises(ConfigError):
        public_url_from_env({"AGENTCRON_PUBLIC_URL": bad})
    assert public_url_from_env({}) is None
    assert public_url_from_env({"AGENTCRON_PUBLIC_URL": " https://h/ "}) == "https://h"


def test_the_access_log_never_shows_a_decision_token() -> None:
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "POST", f"/api/approvals/{ID}/decide?token=SECRETVALUE&x=1", "1.1", 200),
        None,
    )  # fmt: skip
    assert RedactApprovalTokens().filter(record)
    line = record.getMessage()
    assert "SECRETVALUE" not in line
    assert f"/api/approvals/{ID}/decide?token=<redacted>&x=1" in line


def test_callback_data_carries_the_id_and_decision_within_64_bytes() -> None:
    for decision in ("approve", "deny"):
        data = callback_data(ID, decision)
        assert data is not None
        assert len(data.encode()) <= CALLBACK_DATA_LIMIT
        assert parse_callback(data) == (ID, decision)
    assert callback_data("x" * 60, "approve") is None
    assert approval_keyboard("x" * 60) is None
    for foreign in (None, 5, "", "ap:", "ap:x:z", "zz:x:a", "ap::a", "hello"):
        assert parse_callback(foreign) is None


def test_the_approval_message_escapes_and_cuts_the_arguments() -> None:
    approval = {"id": ID, "tool": "run<sh>", "args": {"cmd": "rm -rf </b> & " + "x" * 5000},
                "state": "pending", "expires_at": "2026-11-22T12:05:00Z"}  # fmt: skip
    text = approval_text(approval)
    assert "<code>run&lt;sh&gt;</code>" in text
    assert "rm -rf &lt;/b&gt; &amp; " in text
    assert "</b> &" not in text
    assert "…</pre>" in text
    assert len(text) < 2500
    assert "Expires 2026-11-22 12:05 UTC." in text
    decided = approval_text({**approval, "state": "denied", "decided_by": "telegram:<b>"})
    assert "❌ Denied by telegram:&lt;b&gt;" in decided
    assert "Expires" not in decided
    expired = approval_text({**approval, "state": "expired", "decided_by": "timeout"})
    assert "Expired: nobody decided in time" in expired


def test_approval_messages_fit_the_delivery_records_and_survive_a_restart() -> None:
    assert approval_delivery_id("01JABCDEFGHJKMNPQRSTVWXYZ0", requested=True) == (
        "apr.01JABCDEFGHJKMNPQRSTVWXYZ0"
    )
    long_ids = {approval_delivery_id(ID, requested=r) for r in (True, False)}
    assert len(long_ids) == 2
    assert all(len(i) == 32 for i in long_ids)
    message = OutboundMessage(session_key="telegram:1", channel="telegram", chat_id="1",
                              text="t", message_id="apr.x", status="pending",
                              kind="approval_requested", approval={"id": "x", "tool": "t"})  # fmt: skip
    again = OutboundMessage.from_payload(message.to_payload())
    assert again == message
    assert (
        "approval"
        not in OutboundMessage.from_payload(
            {**message.to_payload(), "kind": "turn", "approval": None}
        ).to_payload()
    )
