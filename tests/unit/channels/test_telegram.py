"""The Telegram approval message parts: callback data within 64 bytes, the escaped message."""

from __future__ import annotations

from agentcron.channels.telegram import (
    CALLBACK_DATA_LIMIT,
    InboundFile,
    approval_keyboard,
    approval_text,
    callback_data,
    inbound_files,
    parse_callback,
)

ID = "01M8B4HEYFJJHAVN3H1HBE1HYF"  # a ULID, as approvals have


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


def test_a_message_s_files_are_its_biggest_photo_and_its_document() -> None:
    message = {
        "photo": [
            {"file_id": "small", "width": 90, "height": 60, "file_size": 900},
            {"file_id": "big", "width": 1280, "height": 853, "file_size": 90_000},
            "not a size",
        ],
        "document": {"file_id": "doc", "file_name": "a.pdf", "mime_type": "application/pdf"},
    }
    assert inbound_files(message) == [
        InboundFile("photo", "big", None, "image/jpeg", 90_000),
        InboundFile("document", "doc", "a.pdf", "application/pdf", None),
    ]
    assert inbound_files({"text": "hi"}) == []
    assert inbound_files({"photo": "x", "document": {"file_name": "no id"}}) == []
