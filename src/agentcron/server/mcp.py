"""`/mcp`: the scheduling tools over MCP (streamable HTTP), each request bound to one session.

A request names its session by its bearer token: an MCP session token (`agentcron token --mcp
--session KEY`, `tokens.mcp_token`), or the API token with the session in the header
`X-Agentcron-Session` (or the query `?session=`). Without a token: 401; a token that binds no
session: 401; a session that does not exist: 404; a header naming another session than the
token's: 403. The transport is stateless (no MCP session id): any replica answers any request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from agentcron.agent.tool_deps import ToolDeps
from agentcron.app import AgentCron
from agentcron.errors import AgentcronError, InvalidInputError
from agentcron.server.auth import bearer, token_matches
from agentcron.server.errors import error_body
from agentcron.session_keys import check_session_key
from agentcron.store.errors import SessionNotFoundError, StoreUnavailableError
from agentcron.tokens import mcp_session_of

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

__all__ = ["SESSION_HEADER", "McpEndpoint"]

SESSION_HEADER = "X-Agentcron-Session"
_BOUND = "agentcron_session"  # the request state's key: the session the request is bound to


class _Refused(AgentcronError):
    """A request `/mcp` answers itself, before the MCP transport: its JSON `{error, detail}`."""

    def __init__(self, status: int, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.response = JSONResponse(
            error_body(kind, detail),
            status,
            headers={"WWW-Authenticate": "Bearer"} if status == 401 else None,
        )


class McpEndpoint:
    """The ASGI app of `/mcp`; `running()` belongs in the app's lifespan.

    The MCP transport starts on the first request that passes the token check, not with the
    server: the SDK takes a second or two to import, and a server nobody calls over MCP need
    not pay for it at every start.
    """

    def __init__(self, cron: AgentCron, token: str) -> None:
        self._cron = cron
        self._token = token
        self._live = False  # inside the app's lifespan
        self._manager: StreamableHTTPSessionManager | None = None
        self._transport: asyncio.Task[None] | None = None  # holds the manager's `run()`
        self._starting = asyncio.Lock()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        # A manager runs once: each lifespan (a test client may enter it again) gets its own.
        self._live = True
        try:
            yield
        finally:
            self._live = False
            transport, self._transport, self._manager = self._transport, None, None
            if transport is not None:
                transport.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await transport

    async def _started(self) -> StreamableHTTPSessionManager:
        """The lifespan's MCP transport, started by the first request that needs it."""
        async with self._starting:
            if self._manager is not None:
                return self._manager
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

            from agentcron.agent.mcp_server import scheduling_server

            manager = StreamableHTTPSessionManager(
                app=scheduling_server(self._deps), stateless=True
            )
            ready = asyncio.Event()

            async def run() -> None:
                async with manager.run():
                    ready.set()
                    await asyncio.Event().wait()  # until the lifespan ends (cancelled)

            transport = asyncio.create_task(run(), name="mcp-transport")
            waiting = asyncio.create_task(ready.wait())
            await asyncio.wait({transport, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if not ready.is_set():  # the transport failed to start: its error
                waiting.cancel()
                await transport
                raise AgentcronError("the MCP transport stopped as it started")
            self._transport, self._manager = transport, manager
            return manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._live:  # the app runs without its lifespan (the caller owns AgentCron)
            detail = "the MCP endpoint runs only while the server's lifespan does"
            await JSONResponse(error_body("unavailable", detail), 503)(scope, receive, send)
            return
        try:
            key = await self._bind(Request(scope, receive))
        except _Refused as refused:
            await refused.response(scope, receive, send)
            return
        scope.setdefault("state", {})[_BOUND] = key
        manager = await self._started()
        await manager.handle_request(scope, receive, send)

    async def _bind(self, request: Request) -> str:
        """The session the request is bound to (checked to exist), else _Refused."""
        given = bearer(request)
        if given is None:
            raise _Refused(401, "unauthorized", _missing_token())
        named = request.headers.get(SESSION_HEADER) or request.query_params.get("session")
        if token_matches(given, self._token):
            if not named:
                raise _Refused(
                    400,
                    "bad_request",
                    f"with the API token, name the session: the header {SESSION_HEADER}: KEY "
                    "(or ?session=KEY), or use a session's own token (agentcron token --mcp "
                    "--session KEY)",
                )
            key = named
        else:
            bound = mcp_session_of(self._token, given)
            if bound is None:
                raise _Refused(401, "unauthorized", "wrong token: " + _missing_token())
            if named and named != bound:
                raise _Refused(
                    403, "forbidden", f"this token is bound to the session {bound!r}, not {named!r}"
                )
            key = bound
        try:
            key = check_session_key(key)
            await self._cron.sessions.get(key)
        except InvalidInputError as exc:
            raise _Refused(404, "not_found", f"no session {key!r}: {exc}") from None
        except SessionNotFoundError:
            raise _Refused(404, "not_found", f"no session {key!r}") from None
        except StoreUnavailableError as exc:
            raise _Refused(503, "unavailable", str(exc)) from None
        return key

    async def _deps(self, ctx: ServerRequestContext[Any, Any]) -> ToolDeps:
        request = ctx.request
        if not isinstance(request, Request):  # only this endpoint serves this server
            raise InvalidInputError("an MCP call without its HTTP request")
        key: str = request.scope["state"][_BOUND]
        return await self._cron.session_tool_deps(key)


def _missing_token() -> str:
    return (
        "send 'Authorization: Bearer <token>' with a session's MCP token (agentcron token "
        f"--mcp --session KEY), or the API token and the header {SESSION_HEADER}: KEY"
    )
