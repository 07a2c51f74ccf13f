"""Bearer tokens: one for the API and WebSocket, one for the inbound hook; kept in the data dir."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request, status
from starlette.requests import HTTPConnection

# The tokens themselves live in the data dir (`agentcron.tokens`): the CLI reads them too.
from agentcron.tokens import (
    HOOK_TOKEN_ENV,
    HOOK_TOKEN_FILE,
    TOKEN_ENV,
    TOKEN_FILE,
    load_or_create_token,
    read_token,
)

__all__ = [
    "HOOK_TOKEN_ENV",
    "HOOK_TOKEN_FILE",
    "TOKEN_ENV",
    "TOKEN_FILE",
    "bearer",
    "load_or_create_token",
    "read_token",
    "require_hook_token",
    "require_token",
    "token_matches",
]


def token_matches(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def bearer(request: HTTPConnection) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _unauthorized(what: str) -> HTTPException:
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED,
        detail=f"{what}: send the header 'Authorization: Bearer <token>' "
        "(the token is printed at start-up; `agentcron token` prints it again)",
        headers={"WWW-Authenticate": "Bearer"},
    )


async def require_token(request: Request) -> None:
    """FastAPI dependency for /api routes."""
    expected: str = request.app.state.token
    given = bearer(request)
    if given is None:
        raise _unauthorized("missing token")
    if not token_matches(given, expected):
        raise _unauthorized("wrong token")


async def require_hook_token(request: Request) -> None:
    """FastAPI dependency for the inbound hook: its own token, not the API's."""
    expected: str | None = request.app.state.hook_token
    if expected is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            detail="the inbound hook is off: set AGENTCRON_HOOK_TOKEN or start with --hook",
        )
    given = bearer(request)
    if given is None:
        raise _unauthorized("missing hook token")
    if not token_matches(given, expected):
        raise _unauthorized("wrong hook token")
