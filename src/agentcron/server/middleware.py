"""ASGI middleware: the request body limit (413) and session keys with `/` in URL paths.

Both are plain ASGI (no BaseHTTPMiddleware): they must not buffer responses or break streams.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentcron.limits import MAX_BODY_BYTES, MAX_MESSAGE_CHARS

SESSIONS_PREFIX = "/api/sessions/"
# In the path a router sees, a key keeps only these two escaped (see SessionKeyPath).
_KEEP_ESCAPED = {"%": "%25", "/": "%2F"}


def _too_large(limit: int) -> bytes:
    return json.dumps(
        {
            "error": "too_large",
            "detail": f"the request body is over {limit} bytes; send less (a message has at "
            f"most {MAX_MESSAGE_CHARS} characters)",
        }
    ).encode()


class BodyLimit:
    """Answer 413 to a request whose body is over `limit` bytes, before the app reads it
    (by its Content-Length, or counting the chunks of a streamed body).
    """

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await self._refuse(send, 400 if not length.isdigit() else 413)
            return
        # Read the body first (it is small: at most `limit`), then hand it on as one message.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # a disconnect: let the app see it
                await self.app(scope, _replay([message], receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(send, 413)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        await self.app(scope, _replay([body], receive), send)

    async def _refuse(self, send: Send, status: int) -> None:
        if status == 413:
            payload = _too_large(self.limit)
        else:
            payload = json.dumps(
                {"error": "bad_request", "detail": "Content-Length is not a number"}
            ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


class SessionKeyPath:
    """Make every session key reachable under `/api/sessions/{key}/...`, `/` included.

    The server decodes `%2F` before routing, so `api:a%2Fb/messages` would look like three
    segments. This middleware reads the key segment from the raw path and hands the router a
    path where only `%` and `/` of the key stay escaped; the routes decode them back
    (`server.routes.sessions.key_param`).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            rewritten = _rewrite(scope)
            if rewritten is not None:
                scope = {**scope, "path": rewritten}
        await self.app(scope, receive, send)


def _rewrite(scope: Scope) -> str | None:
    raw: Any = scope.get("raw_path")
    if not isinstance(raw, bytes | bytearray):
        return None
    raw_path = bytes(raw).split(b"?", 1)[0].decode("latin-1")
    root = scope.get("root_path", "")
    if root and raw_path.startswith(root):
        raw_path = raw_path[len(root) :]
    if not raw_path.startswith(SESSIONS_PREFIX):
        return None
    segment, slash, rest = raw_path[len(SESSIONS_PREFIX) :].partition("/")
    key = unquote(segment, errors="surrogateescape")
    kept = "".join(_KEEP_ESCAPED.get(ch, ch) for ch in key)
    return f"{root}{SESSIONS_PREFIX}{kept}{slash}{unquote(rest)}"


def key_from_path(value: str) -> str:
    """A key as the router saw it (only `%` and `/` escaped) back to the key itself."""
    return unquote(value, errors="surrogateescape")


__all__ = ["BodyLimit", "SessionKeyPath", "key_from_path"]
