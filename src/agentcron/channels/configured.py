"""The channels the settings configure (`[webhook]`, `[telegram]`), made from `ChannelSettings`."""

from __future__ import annotations

from collections.abc import Mapping

from agentcron.channels.manager import Channel
from agentcron.channels.outbox import RetryPolicy
from agentcron.channels.telegram import TelegramChannel
from agentcron.channels.webhook import WebhookChannel, check_headers, signing_key
from agentcron.config.channels import (
    WEBHOOK_HEADERS_ENV,
    WEBHOOK_SECRET_ENV,
    ChannelConfigError,
    ChannelSettings,
    channel_settings_from_env,
)

__all__ = ["channels_from_env", "channels_from_settings"]


def channels_from_settings(settings: ChannelSettings) -> list[Channel]:
    """The webhook and the Telegram bot `settings` configure (none is fine); ChannelConfigError
    for extra webhook headers the webhook may not send.
    """
    found: list[Channel] = []
    retry = RetryPolicy(deadline=settings.delivery_deadline)
    hook = settings.webhook
    if hook is not None:
        try:
            headers = check_headers(hook.headers)
        except ValueError as exc:
            raise ChannelConfigError(f"{WEBHOOK_HEADERS_ENV}: {exc}") from None
        try:
            signing_key(hook.secret)
        except ValueError as exc:
            raise ChannelConfigError(f"{WEBHOOK_SECRET_ENV}: {exc}") from None
        found.append(
            WebhookChannel(
                hook.url, hook.secret, channels=hook.channels, headers=headers, retry=retry
            )
        )
    bot = settings.telegram
    if bot is not None:
        found.append(
            TelegramChannel(bot.token, bot.allowed_chats, api_base=bot.api_base, retry=retry)
        )
    return found


def channels_from_env(env: Mapping[str, str] | None = None) -> list[Channel]:
    """The channels the environment configures (`agentcron.config.channels` says how)."""
    return channels_from_settings(channel_settings_from_env(env))
