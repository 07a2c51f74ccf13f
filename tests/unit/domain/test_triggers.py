"""domain/triggers: the header checks before the signature, the body's bounds, the prompt of an
isolated run, and the secret kept out of a repr.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentcron.domain.triggers import (
    EVENT_TOLERANCE,
    EventRequestError,
    EventTooLargeError,
    TriggerKey,
    check_headers,
    event_text,
    trigger_path,
    with_event,
)
from agentcron.limits import MAX_EVENT_BYTES

NOW = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)


def headers(at: datetime = NOW, event_id: str = "msg_1") -> dict[str, str]:
    return {
        "Webhook-Id": event_id,
        "Webhook-Timestamp": str(int(at.timestamp())),
        "Webhook-Signature": "v1,abc",
    }


def test_the_headers_are_read_whatever_their_case_and_the_timestamp_within_tolerance() -> None:
    checked = check_headers(headers(NOW - EVENT_TOLERANCE), NOW)
    assert (checked.event_id, checked.timestamp) == ("msg_1", NOW - EVENT_TOLERANCE)
    assert set(checked.headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert check_headers(headers(NOW + EVENT_TOLERANCE), NOW).timestamp == NOW + EVENT_TOLERANCE


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({}, "missing header(s) webhook-id, webhook-timestamp, webhook-signature"),
        ({"webhook-id": "a"}, "missing header(s) webhook-timestamp, webhook-signature"),
        (headers(event_id="has space"), "webhook-id: at most 200 printable ASCII"),
        (headers(event_id="x" * 201), "webhook-id: at most 200 printable ASCII"),
        (headers(event_id="é"), "webhook-id: at most 200 printable ASCII"),
        (headers() | {"Webhook-Timestamp": "-5"}, "whole seconds"),
        (headers() | {"Webhook-Timestamp": "1e9"}, "whole seconds"),
        (headers() | {"Webhook-Timestamp": "9" * 13}, "whole seconds"),
        (headers(NOW - EVENT_TOLERANCE - timedelta(seconds=1)), "too old"),
        (headers(NOW + EVENT_TOLERANCE + timedelta(seconds=1)), "too new"),
    ],
)
def test_a_bad_header_is_refused_saying_what(given: dict[str, str], says: str) -> None:
    with pytest.raises(EventRequestError) as refused:
        check_headers(given, NOW)
    assert says in str(refused.value)


def test_the_body_is_strict_json_and_bounded() -> None:
    assert event_text(b'{"a": [1, "\xc3\xa9"]}') == '{"a": [1, "é"]}'
    assert event_text(b"null") == "null"
    for bad in (b"", b"{", b'{"n": NaN}', b"[Infinity]", b"\xff"):
        with pytest.raises(EventRequestError):
            event_text(bad)
    assert event_text(b" " * (MAX_EVENT_BYTES - 1) + b"1").endswith("1")
    with pytest.raises(EventTooLargeError):
        event_text(b" " * MAX_EVENT_BYTES + b"1")


def test_an_isolated_runs_prompt_has_the_event_after_the_message() -> None:
    assert with_event("report", None, None) == "report"
    prompt = with_event("report", "msg_1", '{"a": 1}')
    assert prompt.startswith("report\n\n")
    assert "(id msg_1)" in prompt
    assert prompt.endswith('{"a": 1}')


def test_a_key_keeps_its_secret_out_of_its_repr() -> None:
    key = TriggerKey("J1", "whsec_c2VjcmV0")
    assert key.path == trigger_path("J1") == "/hooks/jobs/J1"
    assert "whsec_" not in repr(key)
