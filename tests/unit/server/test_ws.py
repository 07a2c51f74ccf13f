"""A WebSocket the sender found closed reads as a client that went away, not a server error."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import WebSocketDisconnect
from starlette.websockets import WebSocketDisconnected

from agentcron.server.ws import _receive_json


class _Gone:
    """A socket starlette already marked disconnected (the soak's race: the send task hit the
    closed transport before the receive loop read the disconnect).
    """

    async def receive(self) -> dict[str, Any]:
        raise WebSocketDisconnected(
            'Cannot call "receive" once a disconnect message has been received.'
        )


class _Frames:
    def __init__(self, *messages: dict[str, Any]) -> None:
        self.messages = list(messages)

    async def receive(self) -> dict[str, Any]:
        return self.messages.pop(0)


async def test_a_socket_marked_disconnected_is_a_disconnect() -> None:
    with pytest.raises(WebSocketDisconnect) as caught:
        await _receive_json(_Gone())  # type: ignore[arg-type]
    assert caught.value.code == 1006


async def test_a_disconnect_message_keeps_its_code_and_text_frames_are_json() -> None:
    socket = _Frames(
        {"type": "websocket.receive", "text": '{"type": "ping"}'},
        {"type": "websocket.disconnect", "code": 1000},
    )
    assert await _receive_json(socket) == {"type": "ping"}  # type: ignore[arg-type]
    with pytest.raises(WebSocketDisconnect) as caught:
        await _receive_json(socket)  # type: ignore[arg-type]
    assert caught.value.code == 1000
