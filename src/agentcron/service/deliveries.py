"""Delivery records: what the channels did with the sessions' messages."""

from __future__ import annotations

from datetime import datetime

from agentcron.domain.deliveries import Delivery, DeliveryCursor, DeliveryState
from agentcron.store.interface import DeliveryRecords


class Deliveries:
    """Read delivery records (the channels' outbox writes them)."""

    def __init__(self, records: DeliveryRecords) -> None:
        self._records = records

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
