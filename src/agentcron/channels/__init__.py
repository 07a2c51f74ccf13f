"""Internal: the channels: the manager that joins them to sessions, the durable outbox, the
webhook and Telegram channels, and their configuration from the environment.

Public names: `agentcron.Channel`, `agentcron.ChannelManager`, `agentcron.Outbox`,
`agentcron.WebhookChannel`, `agentcron.TelegramChannel` (see `agentcron.interfaces`), and
`agentcron.standard_webhook_secret` and `agentcron.verify_signature` for a webhook's
receiver.
"""

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
from agentcron.channels.webhook import (
    WebhookChannel,
    sign,
    standard_webhook_secret,
    verify_signature,
)
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
    "standard_webhook_secret",
    "verify_signature",
]
