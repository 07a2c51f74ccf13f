"""Deliveries: what one outbound channel did with one transcript message."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any


class DeliveryState(enum.StrEnum):
    PENDING = "pending"  # not sent yet, or a retry is due
    DELIVERED = "delivered"  # the channel accepted it: never sent again
    FAILED = "failed"  # gave up (a permanent error, the deadline passed, or unroutable)


@dataclass(frozen=True, slots=True)
class Delivery:
    """What one channel did with one transcript message."""

    channel: str
    message_id: str
    session_key: str
    state: DeliveryState
    payload: dict[str, Any]
    attempts: int
    last_error: str | None
    next_attempt_at: datetime | None
    created_at: datetime
    updated_at: datetime
    delivered_at: datetime | None
    # what the far end answered (a channel's own shape; Telegram: chat and message ids), kept
    # with the record so that a follow-up (an edit, a retry's resume) works in any process
    result: dict[str, Any] | None = None
    # the far end's id of what it delivered (Telegram: the message id; comma-joined for a
    # reply sent in parts), and when a person last asked to re-send it (the deadline restarts)
    external_id: str | None = None
    retried_at: datetime | None = None

    @property
    def id(self) -> str:
        """The record's id on the API and the CLI: `channel:message_id`."""
        return delivery_id(self.channel, self.message_id)


def delivery_id(channel: str, message_id: str) -> str:
    """`channel:message_id` (a channel name has no `:`, so the first one splits it)."""
    return f"{channel}:{message_id}"


def split_delivery_id(text: str) -> tuple[str, str] | None:
    """The channel and message id of a `delivery_id`; None when `text` is not one."""
    channel, colon, message_id = text.partition(":")
    if not colon or not channel or not message_id:
        return None
    return channel, message_id


@dataclass(frozen=True, slots=True)
class DeliveryCursor:
    """A position in the newest-first order of delivery records (a page's last record)."""

    created_at: datetime
    channel: str
    message_id: str

    @classmethod
    def after(cls, record: Delivery) -> DeliveryCursor:
        return cls(record.created_at, record.channel, record.message_id)
