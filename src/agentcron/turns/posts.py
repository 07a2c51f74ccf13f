"""Transcript entries written outside any turn (a delivery job's result, notes, operator sends)."""

from __future__ import annotations

from typing import Any

from agentcron.domain.events import ChatContext, EventBus, MessagePosted, SessionSync
from agentcron.domain.sessions import Message, Role, Session
from agentcron.runtime.clock import Clock
from agentcron.store.interface import Transcripts


def chat_of(session: Session) -> ChatContext:
    """Where a session's messages go out (its channel and chat)."""
    return ChatContext(
        channel=session.channel, chat_id=session.chat_id, channel_meta=session.channel_meta
    )


class Posts:
    """Writes an entry to a session outside a turn and announces it: channels send an
    assistant one, clients re-read the session.
    """

    def __init__(self, transcripts: Transcripts, bus: EventBus, clock: Clock) -> None:
        self._transcripts, self._bus, self._clock = transcripts, bus, clock

    async def deliver(
        self,
        session_key: str,
        text: str,
        meta: dict[str, Any],
        *,
        channel: str | None = None,
        chat_id: str | None = None,
        channel_meta: dict[str, Any] | None = None,
    ) -> Message:
        """Post an outbound assistant message that is not a turn (a delivery job's result),
        creating its session if needed.
        """
        now = self._clock.now()
        session = await self._transcripts.ensure_session(
            session_key, now, channel=channel, chat_id=chat_id, channel_meta=channel_meta
        )
        message = await self._transcripts.append_message(
            session_key, Role.ASSISTANT, text, now, meta
        )
        await self.announce(message, chat_of(session))
        return message

    async def post(self, key: str, role: Role, text: str, meta: dict[str, Any]) -> Message:
        """Write an entry to an existing session. SessionNotFoundError when it does not exist."""
        session = await self._transcripts.get_session(key)
        message = await self._transcripts.append_message(key, role, text, self._clock.now(), meta)
        await self.announce(message, chat_of(session))
        return message

    async def announce(self, message: Message, chat: ChatContext | None) -> None:
        """A transcript entry written outside a turn: channels send it, clients re-read."""
        key = message.session_key
        await self._bus.publish(MessagePosted(session_key=key, message=message, chat=chat))
        await self._bus.publish(SessionSync(session_key=key))
