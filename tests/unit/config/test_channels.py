"""Channel configuration from the environment, text splitting, backoff and signatures (pure)."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime

import pytest

from agentcron.channels import (
    ChannelConfigError,
    OutboundMessage,
    RetryPolicy,
    TelegramChannel,
    WebhookChannel,
    channels_from_env,
    sign,
    split_text,
    verify_signature,
)

TOKEN = "123456:AAE-token_x"


def test_no_settings_no_channels() -> None:
    assert channels_from_env({}) == []


def test_a_webhook_with_its_secret_and_channel_list() -> None:
    (hook,) = channels_from_env({"AGENTCRON_WEBHOOK_URL": "https://example.com/hook",
                                 "AGENTCRON_WEBHOOK_SECRET": "abc",
                                 "AGENTCRON_WEBHOOK_CHANNELS": " telegram, websocket ,"})  # fmt: skip
    assert isinstance(hook, WebhookChannel)
    assert (hook.name, hook.url, hook.channels) == (
        "webhook", "https://example.com/hook", frozenset({"telegram", "websocket"}),
    )  # fmt: skip
    (every,) = channels_from_env({"AGENTCRON_WEBHOOK_URL": "http://127.0.0.1:9/x",
                                  "AGENTCRON_WEBHOOK_SECRET": "abc",
                                  "AGENTCRON_WEBHOOK_CHANNELS": "*"})  # fmt: skip
    assert isinstance(every, WebhookChannel)
    assert every.channels is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AGENTCRON_WEBHOOK_URL": "https://example.com/hook"},
         "AGENTCRON_WEBHOOK_URL needs AGENTCRON_WEBHOOK_SECRET"),
        ({"AGENTCRON_WEBHOOK_URL": "example.com/hook", "AGENTCRON_WEBHOOK_SECRET": "s"},
         "must be an http:// or https:// URL with a host, got 'example.com/hook'"),
        ({"AGENTCRON_WEBHOOK_SECRET": "s"},
         "AGENTCRON_WEBHOOK_SECRET is set but AGENTCRON_WEBHOOK_URL is not"),
        ({"AGENTCRON_WEBHOOK_URL": "https://e.com", "AGENTCRON_WEBHOOK_SECRET": "s",
          "AGENTCRON_WEBHOOK_CHANNELS": "tele gram"},
         "comma-separated list of channel names"),
        ({"AGENTCRON_WEBHOOK_URL": "https://e.com", "AGENTCRON_WEBHOOK_SECRET": "whsec_no!"},
         "AGENTCRON_WEBHOOK_SECRET: a secret starting with whsec_ is a Standard Webhooks secret"),
        ({"AGENTCRON_TELEGRAM_TOKEN": "not-a-token"},
         "must be a bot token as @BotFather gives it"),
        ({"AGENTCRON_TELEGRAM_TOKEN": TOKEN, "AGENTCRON_TELEGRAM_ALLOWED_CHATS": "42,@bob"},
         "numeric chat ids (e.g. '12345,-100987'); not ids: '@bob'"),
        ({"AGENTCRON_TELEGRAM_ALLOWED_CHATS": "42"},
         "AGENTCRON_TELEGRAM_ALLOWED_CHATS is set but AGENTCRON_TELEGRAM_TOKEN is not"),
        ({"AGENTCRON_TELEGRAM_TOKEN": TOKEN, "AGENTCRON_TELEGRAM_API_BASE": "ftp://x"},
         "AGENTCRON_TELEGRAM_API_BASE must be an http:// or https:// URL"),
    ],
)  # fmt: skip
def test_bad_settings_say_what_is_accepted(env: dict[str, str], message: str) -> None:
    with pytest.raises(ChannelConfigError) as info:
        channels_from_env(env)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


def test_a_bad_token_is_never_echoed() -> None:
    with pytest.raises(ChannelConfigError) as info:
        channels_from_env({"AGENTCRON_TELEGRAM_TOKEN": "secret stuff"})
    assert "secret stuff" not in str(info.value)


def test_a_telegram_bot_from_the_environment() -> None:
    (bot,) = channels_from_env({"AGENTCRON_TELEGRAM_TOKEN": TOKEN,
                                "AGENTCRON_TELEGRAM_ALLOWED_CHATS": "42, -100123",
                                "AGENTCRON_TELEGRAM_API_BASE": "http://localhost:8081/"})  # fmt: skip
    assert isinstance(bot, TelegramChannel)
    assert (bot.name, bot.allowed_chats, bot.api_base) == (
        "telegram", frozenset({"42", "-100123"}), "http://localhost:8081",
    )  # fmt: skip
    (nobody,) = channels_from_env({"AGENTCRON_TELEGRAM_TOKEN": TOKEN})
    assert isinstance(nobody, TelegramChannel)
    assert nobody.allowed_chats == frozenset()
    assert nobody.api_base == "https://api.telegram.org"


def test_split_text_prefers_line_breaks_then_spaces() -> None:
    assert split_text("short") == ["short"]
    assert split_text("") == []
    assert split_text("aaaa\nbbbb cc", limit=8) == ["aaaa", "bbbb cc"]
    assert split_text("aaa bbbb cccc", limit=8) == ["aaa bbbb", "cccc"]
    assert split_text("x" * 20, limit=8) == ["x" * 8, "x" * 8, "x" * 4]
    assert split_text("a" * 4096) == ["a" * 4096]
    assert [len(p) for p in split_text("a" * 4097)] == [4096, 1]


def test_split_text_counts_utf16_units_like_telegram() -> None:
    emoji = "\U0001f600"  # two UTF-16 units
    parts = split_text(emoji * 5, limit=4)
    assert parts == [emoji * 2, emoji * 2, emoji]
    assert all(len(p.encode("utf-16-le")) // 2 <= 4 for p in parts)


def test_retry_policy_backs_off_exponentially_and_honours_retry_after() -> None:
    policy = RetryPolicy(initial_delay=1, factor=2, max_delay=10)
    assert [policy.delay(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]
    assert policy.delay(1, retry_after=5) == 5
    assert policy.delay(3, retry_after=1) == 4
    assert policy.delay(1, retry_after=60) == 10
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)


def test_the_signature_scheme() -> None:
    body = b'{"text":"hi"}'
    expected = hmac.new(b"k", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert sign("k", "1700000000", body) == f"sha256={expected}"
    assert verify_signature("k", body, "1700000000", f"sha256={expected}", now=1700000100)
    assert not verify_signature("k", body, "1700000000", f"sha256={expected}", now=1700000301)
    assert not verify_signature("k", body, "nope", f"sha256={expected}", now=1700000000)
    assert not verify_signature("k", body, None, None)


def test_outbound_messages_survive_their_json_payload() -> None:
    message = OutboundMessage(
        session_key="telegram:1", channel="telegram", chat_id="1", text="hi", message_id="m",
        status="failed", kind="message", source="automation", turn_id="t", run_id="r",
        meta={"a": [1]}, channel_meta={"username": "u"},
        created_at=datetime(2026, 11, 22, 12, tzinfo=UTC),
    )  # fmt: skip
    assert OutboundMessage.from_payload(message.to_payload()) == message


def test_the_delivery_deadline_is_a_day_unless_set() -> None:
    from agentcron.config.channels import channel_settings_from_env, describe_seconds

    assert RetryPolicy().deadline == 86_400
    assert RetryPolicy().max_attempts is None  # the deadline decides, not a count
    env = {"AGENTCRON_WEBHOOK_URL": "https://example.com/h", "AGENTCRON_WEBHOOK_SECRET": "s"}
    assert channel_settings_from_env(env).delivery_deadline == 86_400
    env["AGENTCRON_TELEGRAM_TOKEN"] = TOKEN
    env["AGENTCRON_DELIVERY_DEADLINE"] = "3600"
    assert channel_settings_from_env(env).delivery_deadline == 3600
    hook, bot = channels_from_env(env)
    assert isinstance(hook, WebhookChannel)
    assert isinstance(bot, TelegramChannel)
    assert hook.outbox.retry.deadline == bot.outbox.retry.deadline == 3600
    for bad in ("0", "-5", "soon", str(31 * 86_400)):
        with pytest.raises(ChannelConfigError, match="AGENTCRON_DELIVERY_DEADLINE is seconds"):
            channel_settings_from_env({"AGENTCRON_DELIVERY_DEADLINE": bad})
    with pytest.raises(ValueError, match="deadline must be positive"):
        RetryPolicy(deadline=0)
    assert [describe_seconds(s) for s in (86_400, 7200, 600, 90, 1.5)] == [
        "1d", "2h", "10m", "90s", "1.5s",
    ]  # fmt: skip
