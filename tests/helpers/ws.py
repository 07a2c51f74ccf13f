"""The API on a real localhost socket, and a WebSocket client of it, for the tests."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI
from websockets.asyncio.client import ClientConnection, connect

TOKEN = "ws-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_for(condition: Callable[[], object], limit: float = 5.0) -> None:
    """Poll `condition` until it holds (a TimeoutError after `limit` seconds)."""
    async with asyncio.timeout(limit):
        while not condition():  # noqa: ASYNC110 (no event marks these instants)
            await asyncio.sleep(0.01)


@asynccontextmanager
async def listening(
    app: FastAPI, *, lifespan: Literal["on", "off"] = "off", port: int | None = None
) -> AsyncIterator[int]:
    """`app` served on a localhost port (`port`, else a free one) in this event loop; yields
    the port.
    """
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan)
    )
    task = asyncio.create_task(server.serve())
    try:
        await wait_for(lambda: server.started)
        yield port
    finally:
        server.should_exit = True
        await task


async def login(url: str) -> ClientConnection:
    """A WebSocket connection to `url`, authenticated with TOKEN."""
    ws = await connect(url)
    await ws.send(json.dumps({"type": "auth", "token": TOKEN}))
    answer = json.loads(await ws.recv())
    if answer != {"type": "ready"}:
        raise AssertionError(f"the token was answered with {answer}, not ready")
    return ws


async def until(
    ws: ClientConnection, stop: Callable[[dict[str, Any]], bool], limit: float = 5
) -> list[dict[str, Any]]:
    """Frames up to and including the first for which `stop` holds."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(limit):
        while True:
            frame = json.loads(await ws.recv())
            seen.append(frame)
            if stop(frame):
                return seen
