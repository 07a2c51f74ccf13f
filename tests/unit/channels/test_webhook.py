"""The webhook's secrets: the Standard Webhooks key of a configured secret, its `whsec_` form."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from agentcron.channels.webhook import check_headers, signing_key, standard_webhook_secret


def test_a_plain_secret_is_its_utf8_bytes_and_its_whsec_form_is_their_base64() -> None:
    assert signing_key("pässword") == "pässword".encode()
    whsec = standard_webhook_secret("pässword")
    assert whsec == "whsec_" + base64.b64encode("pässword".encode()).decode()
    # a stock verifier given the whsec form checks what the channel's key signed
    when = datetime.fromtimestamp(1_700_000_000, UTC)
    signed = Webhook(signing_key("pässword")).sign("msg_1", when, '{"a":1}')
    assert Webhook(whsec).sign("msg_1", when, '{"a":1}') == signed


@pytest.mark.parametrize("padding", ["", "=", "=="])
def test_a_whsec_secret_is_its_base64_bytes_padded_or_not(padding: str) -> None:
    key = bytes(range(32))
    encoded = base64.b64encode(key).decode().rstrip("=") + padding
    assert signing_key("whsec_" + encoded) == key
    assert standard_webhook_secret("whsec_" + encoded) == "whsec_" + base64.b64encode(key).decode()


@pytest.mark.parametrize("secret", ["whsec_", "whsec_not base64!", "whsec_a"])
def test_a_whsec_secret_that_is_not_base64_of_a_key_is_refused(secret: str) -> None:
    with pytest.raises(ValueError, match="base64 bytes must follow the prefix"):
        signing_key(secret)


@pytest.mark.parametrize("name", ["webhook-id", "Webhook-Signature", "webhook-timestamp"])
def test_the_standard_webhooks_headers_cannot_be_configured(name: str) -> None:
    with pytest.raises(ValueError, match=r"sets .* itself"):
        check_headers({name: "x"})
