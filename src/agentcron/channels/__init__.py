"""Channels: the edges that carry session messages in and out (webhook, Telegram, ...)."""

from agentcron.channels.configured import channels_from_env, channels_from_settings
from agentcron.channels.manager import (
    Channel,
    ChannelError,
    ChannelManager,
    ChannelStartError,
    Inbound,
    OutboundMessage,
    StoreBound,
)
from agentcron.channels.outbox import DeliveryAttemptError, Outbox, RetryPolicy
from agentcron.channels.telegram import TelegramApiError, TelegramChannel, split_text
from agentcron.channels.webhook import WebhookChannel, sign, verify_signature
from agentcron.config.channels import ChannelConfigError

__all__ = [
    "Channel",
    "ChannelConfigError",
    "ChannelError",
    "ChannelManager",
    "ChannelStartError",
    "DeliveryAttemptError",
    "Inbound",
    "OutboundMessage",
    "Outbox",
    "RetryPolicy",
    "StoreBound",
    "TelegramApiError",
    "TelegramChannel",
    "WebhookChannel",
    "channels_from_env",
    "channels_from_settings",
    "sign",
    "split_text",
    "verify_signature",
]
