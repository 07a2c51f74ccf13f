"""Delivery records: what the channels did with the sessions' messages; re-sending a failed one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from agentcron.domain.deliveries import Delivery, DeliveryCursor, DeliveryState, split_delivery_id
from agentcron.domain.events import DeliveryFailed, Event
from agentcron.runtime.clock import Clock
from agentcron.store.errors import DeliveryNotFoundError
from agentcron.store.interface import DeliveryRecords

Publish = Callable[[Event], Awaitable[None]]


class Deliveries:
    """Read delivery records (the channels' outbox writes them), re-send a failed one, and
    record a reply no channel can carry as a failed delivery.
    """

    def __init__(self, records: DeliveryRecords, clock: Clock, publish: Publish) -> None:
        self._records = records
        self._clock = clock
        self._publish = publish

    async def page(
        self,
        *,
        session_key: str | None = None,
        state: DeliveryState | None = None,
        channel: str | None = None,
        limit: int = 50,
        before: DeliveryCursor | None = None,
    ) -> list[Delivery]:
        """Newest first, `limit` at most, after the cursor `before` (see `DeliveryStore.page`)."""
        return await self._records.page(
            session_key=session_key, state=state, channel=channel, limit=limit, before=before
        )

    async def unanswered(
        self, channel: str, *, prefix: str, answer_prefix: str, since: datetime
    ) -> list[Delivery]:
        """The channel's records since `since` with ids `prefix` + rest, not failed, that have
        no record `answer_prefix` + rest (requests whose answer nobody recorded), oldest first.
        """
        return await self._records.unanswered(
            channel, prefix=prefix, answer_prefix=answer_prefix, since=since
        )

    async def get(self, delivery_id: str) -> Delivery:
        """One record by its id, `channel:message_id`; DeliveryNotFoundError (404): none."""
        channel, message_id = _split(delivery_id)
        return await self._records.get(channel, message_id)

    async def retry(self, delivery_id: str) -> Delivery:
        """Re-send a failed delivery (`channel:message_id`) without running the agent again:
        it is pending once more, due now, with a fresh deadline; the channel's outbox sends
        it (`ChannelManager.redeliver` hands it over at once; else the outbox of a process
        with that channel takes it up when it looks for records left behind).
        DeliveryNotFoundError (404): no such delivery; DeliveryNotFailedError (409): it is
        delivered or still pending.
        """
        channel, message_id = _split(delivery_id)
        return await self._records.retry(channel, message_id, now=self._clock.now())

    async def unroutable(
        self,
        channel: str,
        message_id: str,
        session_key: str,
        payload: dict[str, Any],
        reason: str,
    ) -> Delivery | None:
        """Record a reply no channel can carry (no channel of that name is configured, or it
        may not serve the chat) as a failed delivery with the reason, and announce it
        (`delivery_failed`, 0 attempts); None when the message already has a record there.
        """
        record, created = await self._records.record_failed(
            channel, message_id, session_key, payload, error=reason, now=self._clock.now()
        )
        if not created:
            return None
        await self._publish(
            DeliveryFailed(
                session_key=session_key,
                channel=channel,
                message_id=message_id,
                attempts=0,
                error=reason,
                retryable=False,
            )
        )
        return record


def _split(delivery_id: str) -> tuple[str, str]:
    parts = split_delivery_id(delivery_id)
    if parts is None:  # not `channel:message_id`: no record has that id
        raise DeliveryNotFoundError("?", delivery_id)
    return parts
