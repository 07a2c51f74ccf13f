"""Bearer tokens: one for the API and WebSocket, one for the inbound hook; kept in the data dir."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from fastapi import HTTPException, Request, status
from starlette.requests import HTTPConnection

TOKEN_FILE = "token"
HOOK_TOKEN_FILE = "hook_token"
TOKEN_ENV = "AGENTCRON_TOKEN"
HOOK_TOKEN_ENV = "AGENTCRON_HOOK_TOKEN"


def load_or_create_token(data_dir: Path, name: str = TOKEN_FILE, env: str = TOKEN_ENV) -> str:
    """$env if set; else the token stored in `data_dir/name`, created (mode 0600) on first use."""
    given = os.environ.get(env, "").strip()
    if given:
        return given
    path = data_dir / name
    if path.exists():
        token = path.read_text("utf-8").strip()
        if token:
            return token
    data_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    # Created with owner-only permissions from the start: the token is a password.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def read_token(data_dir: Path, name: str = TOKEN_FILE, env: str = TOKEN_ENV) -> str | None:
    """The token a running server uses, without creating one."""
    given = os.environ.get(env, "").strip()
    if given:
        return given
    path = data_dir / name
    return path.read_text("utf-8").strip() or None if path.exists() else None


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
