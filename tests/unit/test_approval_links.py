"""Decision links of approvals (capability tokens), the public URL, the redacted access log."""

from __future__ import annotations

import logging

import pytest

from agentcron.approval_links import (
    ApprovalLinks,
    RedactApprovalTokens,
    check_public_url,
    public_url_from_env,
)
from agentcron.config import ConfigError

ID = "01M8B4HEYFJJHAVN3H1HBE1HYF"  # a ULID, as approvals have


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
