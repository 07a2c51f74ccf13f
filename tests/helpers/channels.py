"""A channel of one's own for the tests: it records what it is asked to deliver."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agentcron.channels.manager import Inbound, OutboundMessage
from agentcron.channels.outbox import Outbox, Report
from agentcron.runtime.clock import Clock
from agentcron.store.interface import DeliveryLedger


class RecordingChannel:
    """A channel that knows nothing of approvals (unless `carries_approvals`: then it gets
    their requests, decisions and reminders too): `got` holds every message it was sent; it
    wants every message, or those `wants` accepts (a chat channel: its own sessions).
    """

    def __init__(
        self,
        name: str = "mine",
        wants: Callable[[OutboundMessage], bool] | None = None,
        *,
        carries_approvals: bool = False,
    ) -> None:
        self.name = name
        self.got: list[OutboundMessage] = []
        self._wants = wants
        self.carries_approvals = carries_approvals

    async def start(self, inbound: Inbound) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, message: OutboundMessage) -> None:
        self.got.append(message)

    def wants(self, message: OutboundMessage) -> bool:
        return self._wants is None or self._wants(message)


class OutboxChannel:
    """A channel that keeps delivery records (a real `Outbox`, bound to the store by the
    manager): `sent` holds what its attempts sent, in order; `arrived` is set at each send.
    """

    def __init__(self, name: str = "mine") -> None:
        self.name = name
        self.sent: list[OutboundMessage] = []
        self.arrived = asyncio.Event()
        self.outbox = Outbox(name, self._attempt)

    def bind(self, deliveries: DeliveryLedger, clock: Clock, report: Report | None = None) -> None:
        self.outbox.bind(deliveries, clock, report)

    async def _attempt(self, message: OutboundMessage, attempt: int) -> dict[str, Any] | None:
        self.sent.append(message)
        self.arrived.set()
        return None

    async def start(self, inbound: Inbound) -> None:
        await self.outbox.start()

    async def stop(self) -> None:
        await self.outbox.stop()

    async def send(self, message: OutboundMessage) -> None:
        await self.outbox.submit(message)

    def wants(self, message: OutboundMessage) -> bool:
        return True
