"""The channels' settings (`[webhook]`, `[telegram]`), checked, with typed configuration errors."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from agentcron.config.env import ConfigError, or_environ

__all__ = [
    "DEFAULT_DELIVERY_DEADLINE",
    "DEFAULT_TELEGRAM_API_BASE",
    "ChannelConfigError",
    "ChannelSettings",
    "TelegramSettings",
    "WebhookSettings",
    "channel_settings_from_env",
    "describe_seconds",
]

WEBHOOK_URL_ENV = "AGENTCRON_WEBHOOK_URL"
WEBHOOK_SECRET_ENV = "AGENTCRON_WEBHOOK_SECRET"
WEBHOOK_CHANNELS_ENV = "AGENTCRON_WEBHOOK_CHANNELS"
WEBHOOK_HEADERS_ENV = "AGENTCRON_WEBHOOK_HEADERS"
TELEGRAM_TOKEN_ENV = "AGENTCRON_TELEGRAM_TOKEN"
TELEGRAM_ALLOWED_CHATS_ENV = "AGENTCRON_TELEGRAM_ALLOWED_CHATS"
TELEGRAM_API_BASE_ENV = "AGENTCRON_TELEGRAM_API_BASE"
DEFAULT_TELEGRAM_API_BASE = "https://api.telegram.org"
DELIVERY_DEADLINE_ENV = "AGENTCRON_DELIVERY_DEADLINE"
DEFAULT_DELIVERY_DEADLINE = 86_400.0  # seconds a channel's delivery is retried: a day
MAX_DELIVERY_DEADLINE = 30 * 86_400.0

_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_TOKEN = re.compile(r"^\d+:[A-Za-z0-9_-]+$")
_CHAT_ID = re.compile(r"^-?\d+$")


class ChannelConfigError(ConfigError):
    """A channel setting is missing or malformed; the message says what is accepted."""


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """The outbound webhook: where it POSTs, the secret that signs, the sessions' channels it
    serves (None = all) and extra request headers (the webhook checks their names and values).
    """

    url: str
    secret: str = field(repr=False)
    channels: list[str] | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class TelegramSettings:
    """A Telegram bot: its token, the chats allowed to use it (none = nobody), its Bot API."""

    token: str = field(repr=False)
    allowed_chats: list[str] = field(default_factory=list)
    api_base: str = DEFAULT_TELEGRAM_API_BASE


@dataclass(frozen=True, slots=True)
class ChannelSettings:
    """The channels configured (none is fine), and how long each of their deliveries is
    retried while its channel is down (`delivery_deadline`, seconds) before it fails.
    """

    webhook: WebhookSettings | None = None
    telegram: TelegramSettings | None = None
    delivery_deadline: float = DEFAULT_DELIVERY_DEADLINE


def describe_seconds(seconds: float) -> str:
    """A duration in its largest whole unit: `24h`, `90m`, `45s` (else seconds)."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _deadline(env: Mapping[str, str]) -> float:
    raw = env.get(DELIVERY_DEADLINE_ENV, "").strip()
    if not raw:
        return DEFAULT_DELIVERY_DEADLINE
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= MAX_DELIVERY_DEADLINE:
        raise ChannelConfigError(
            f"{DELIVERY_DEADLINE_ENV} is seconds from 0 to {MAX_DELIVERY_DEADLINE:g} (30 days) "
            f"that a delivery is retried while its channel is down, got {raw!r}"
        )
    return value


def _http_url(env_name: str, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ChannelConfigError(
            f"{env_name} must be an http:// or https:// URL with a host, got {value!r}"
        )
    return value


def _list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _webhook(env: Mapping[str, str]) -> WebhookSettings | None:
    url = env.get(WEBHOOK_URL_ENV, "").strip()
    secret = env.get(WEBHOOK_SECRET_ENV, "")
    names = env.get(WEBHOOK_CHANNELS_ENV, "").strip()
    if not url:
        if secret or names:
            set_ = WEBHOOK_SECRET_ENV if secret else WEBHOOK_CHANNELS_ENV
            raise ChannelConfigError(
                f"{set_} is set but {WEBHOOK_URL_ENV} is not: set the URL "
                "to POST turn results to, or unset it"
            )
        return None
    if not secret.strip():
        raise ChannelConfigError(
            f"{WEBHOOK_URL_ENV} needs {WEBHOOK_SECRET_ENV}: a shared secret that signs every "
            "request: a Standard Webhooks secret 'whsec_<base64 of 32 random bytes>' "
            "(recommended), or any other non-empty string"
        )
    channels: list[str] | None = None
    if names and names.lower() not in ("*", "all"):
        channels = _list(names)
        bad = [n for n in channels if not _CHANNEL_NAME.match(n)]
        if bad or not channels:
            raise ChannelConfigError(
                f"{WEBHOOK_CHANNELS_ENV} must be a comma-separated list of channel names "
                f"(letters, digits, _ . -), e.g. 'telegram,websocket', or '*' for all; "
                f"got {names!r}"
            )
    headers = _headers(env.get(WEBHOOK_HEADERS_ENV, "").strip())
    return WebhookSettings(_http_url(WEBHOOK_URL_ENV, url), secret, channels, headers)


def _headers(raw: str) -> dict[str, str]:
    """`AGENTCRON_WEBHOOK_HEADERS`: a JSON object of extra request headers."""
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise ChannelConfigError(
            f'{WEBHOOK_HEADERS_ENV} must be a JSON object, e.g. {{"Authorization": "Bearer x"}}'
        )
    return data


def _telegram(env: Mapping[str, str]) -> TelegramSettings | None:
    token = env.get(TELEGRAM_TOKEN_ENV, "").strip()
    chats = env.get(TELEGRAM_ALLOWED_CHATS_ENV, "").strip()
    api_base = env.get(TELEGRAM_API_BASE_ENV, "").strip()
    if not token:
        if chats or api_base:
            set_ = TELEGRAM_ALLOWED_CHATS_ENV if chats else TELEGRAM_API_BASE_ENV
            raise ChannelConfigError(
                f"{set_} is set but {TELEGRAM_TOKEN_ENV} is not: set the "
                "bot token from @BotFather, or unset it"
            )
        return None
    if not _TOKEN.match(token):
        # never echo the token itself: it is a credential
        raise ChannelConfigError(
            f"{TELEGRAM_TOKEN_ENV} must be a bot token as @BotFather gives it: "
            "'<digits>:<letters, digits, _ ->'"
        )
    allowed = _list(chats)
    bad = [c for c in allowed if not _CHAT_ID.match(c)]
    if bad:
        raise ChannelConfigError(
            f"{TELEGRAM_ALLOWED_CHATS_ENV} must be a comma-separated list of numeric chat ids "
            f"(e.g. '12345,-100987'); not ids: {', '.join(repr(b) for b in bad)}"
        )
    base = _http_url(TELEGRAM_API_BASE_ENV, api_base) if api_base else DEFAULT_TELEGRAM_API_BASE
    return TelegramSettings(token, allowed, base)


def channel_settings_from_env(env: Mapping[str, str] | None = None) -> ChannelSettings:
    """The channels the environment configures; none is fine.

    - `AGENTCRON_WEBHOOK_URL` + `AGENTCRON_WEBHOOK_SECRET` (required with the URL): POST turn
      results there, signed; `AGENTCRON_WEBHOOK_CHANNELS` limits them to the sessions of some
      channels (comma list, default all); `AGENTCRON_WEBHOOK_HEADERS` (a JSON object) adds
      request headers.
    - `AGENTCRON_TELEGRAM_TOKEN`: a Telegram bot; `AGENTCRON_TELEGRAM_ALLOWED_CHATS` (comma list
      of chat ids) says who may use it (empty = nobody): send messages, and press an approval's
      Approve / Deny buttons; `AGENTCRON_TELEGRAM_API_BASE` points it at another Bot API server.
    - `AGENTCRON_DELIVERY_DEADLINE`: seconds a delivery is retried while its channel is down
      (default 86400, a day); then it fails, and can be re-sent.

    Raises ChannelConfigError for a missing or malformed setting.
    """
    env = or_environ(env)
    return ChannelSettings(_webhook(env), _telegram(env), _deadline(env))
