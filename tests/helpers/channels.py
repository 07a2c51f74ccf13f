"""A channel of one's own for the tests: it records what it is asked to deliver."""

from __future__ import annotations

from collections.abc import Callable

from agentcron.channels.manager import Inbound, OutboundMessage


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
