"""Delivery records (what the channels did with the sessions' messages) and the channels' state."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query, Request, status

from agentcron.channels.manager import ChannelNotRunningError
from agentcron.domain.deliveries import DeliveryCursor, DeliveryState
from agentcron.server.deps import Cron
from agentcron.server.errors import answers
from agentcron.views import ChannelOut, ChannelsOut, DeliveriesOut, DeliveryOut

router = APIRouter(prefix="/api", tags=["deliveries"])

_MAX_CURSOR = 2_000


def _encode(cursor: DeliveryCursor) -> str:
    raw = json.dumps([cursor.created_at.isoformat(), cursor.channel, cursor.message_id])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode(text: str) -> DeliveryCursor:
    bad = HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        "cursor is not one this API gave: pass next_cursor as it is",
    )
    if len(text) > _MAX_CURSOR:
        raise bad
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        at, channel, message_id = json.loads(raw)
        created = datetime.fromisoformat(at)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise bad from None
    if created.tzinfo is None or not isinstance(channel, str) or not isinstance(message_id, str):
        raise bad
    return DeliveryCursor(created, channel, message_id)


@router.get("/deliveries")
async def list_deliveries(
    cron: Cron,
    session_key: str | None = Query(default=None, max_length=500),
    state: Annotated[DeliveryState | None, Query(description="pending, delivered, failed")] = None,
    channel: str | None = Query(default=None, max_length=200),
    limit: int = Query(default=50, ge=1, le=200),
    cursor: str | None = Query(default=None, description="next_cursor of the previous page"),
) -> DeliveriesOut:
    """Delivery records newest first (seed 004: `message.delivered` / `message.failed` as
    records): what each channel did with each message, its attempts and last error.
    `next_cursor` is null on the last page.
    """
    before = None if cursor is None else _decode(cursor)
    found = await cron.deliveries.page(
        session_key=session_key, state=state, channel=channel, limit=limit + 1, before=before
    )
    page = found[:limit]
    more = len(found) > limit
    return DeliveriesOut(
        deliveries=[DeliveryOut.of(d) for d in page],
        next_cursor=_encode(DeliveryCursor.after(page[-1])) if more and page else None,
    )


@router.post("/deliveries/{delivery_id}/retry", responses=answers(404, 409))
async def retry_delivery(
    cron: Cron,
    request: Request,
    delivery_id: str = Path(max_length=300, description="the record's `id`: `channel:message_id`"),
) -> DeliveryOut:
    """Re-send a failed delivery without running the agent again: it is pending once more,
    with a fresh deadline, and this server's channel sends it now. 404: no such delivery;
    409: it is delivered or still pending, or this server runs no channel of its name.
    """
    manager = request.app.state.channels
    record = await cron.deliveries.get(delivery_id)
    if manager is None or not manager.carries(record.channel):
        raise ChannelNotRunningError(record.channel)
    record = await cron.deliveries.retry(delivery_id)
    manager.redeliver(record)
    return DeliveryOut.of(record)


@router.get("/channels")
async def list_channels(request: Request) -> ChannelsOut:
    """Each configured channel: running, connected, healthy, its last success and last error."""
    manager = request.app.state.channels
    statuses = [] if manager is None else manager.status()
    return ChannelsOut(channels=[ChannelOut.of(s) for s in statuses])
