"""The secrets in the data dir: the API and WebSocket's token, the inbound hook's, the one your
agent over HTTP checks the requests' signatures with (the runner secret); and the MCP session
tokens made from the API token.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from base64 import b64encode
from collections.abc import Callable
from pathlib import Path

from agentcron.config.agent import RUNNER_SECRET_ENV
from agentcron.config.env import environ
from agentcron.config.server import HOOK_TOKEN_ENV, TOKEN_ENV

TOKEN_FILE = "token"
HOOK_TOKEN_FILE = "hook_token"
RUNNER_SECRET_FILE = "runner_secret"
__all__ = [
    "HOOK_TOKEN_ENV",
    "HOOK_TOKEN_FILE",
    "RUNNER_SECRET_ENV",
    "RUNNER_SECRET_FILE",
    "TOKEN_ENV",
    "TOKEN_FILE",
    "load_or_create_token",
    "mcp_session_of",
    "mcp_token",
    "new_runner_secret",
    "read_token",
]

MCP_AUDIENCE = "agentcron-mcp"


def _given(given: str | None, env: str) -> str:
    """The settings' token (`given`), else `$env`; empty when neither is set."""
    return (environ().get(env, "") if given is None else given).strip()


def new_runner_secret() -> str:
    """A fresh Standard Webhooks secret: `whsec_` and 24 random bytes in base64."""
    return "whsec_" + b64encode(secrets.token_bytes(24)).decode()


def _new_token() -> str:
    return secrets.token_urlsafe(32)


def load_or_create_token(
    data_dir: Path,
    name: str = TOKEN_FILE,
    env: str = TOKEN_ENV,
    *,
    given: str | None = None,
    make: Callable[[], str] = _new_token,
) -> str:
    """`given` (the settings' token; None: $env) if set; else the token stored in
    `data_dir/name`, created (mode 0600, by `make`) on first use.
    """
    given = _given(given, env)
    if given:
        return given
    path = data_dir / name
    if path.exists():
        token = path.read_text("utf-8").strip()
        if token:
            return token
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # a new data dir: owner only
    token = make()
    # Created with owner-only permissions from the start: the token is a password.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def read_token(
    data_dir: Path, name: str = TOKEN_FILE, env: str = TOKEN_ENV, *, given: str | None = None
) -> str | None:
    """The token a running server uses (`given`, else $env, else the file), without creating
    one.
    """
    given = _given(given, env)
    if given:
        return given
    path = data_dir / name
    return path.read_text("utf-8").strip() or None if path.exists() else None


def _mcp_key(api_token: str) -> bytes:
    """The key MCP session tokens are signed with: derived from the API token (so a new API
    token revokes them all), never the API token itself.
    """
    return hmac.new(api_token.encode(), MCP_AUDIENCE.encode(), hashlib.sha256).digest()


def mcp_token(api_token: str, session_key: str) -> str:
    """A bearer token for `/mcp` bound to one session: a JWT (HS256) naming the session."""
    import jwt  # PyJWT: loaded only where a token is made or read

    return jwt.encode({"aud": MCP_AUDIENCE, "sub": session_key}, _mcp_key(api_token), "HS256")


def mcp_session_of(api_token: str, token: str) -> str | None:
    """The session an MCP token (`mcp_token`) is bound to; None when it is not one signed
    with this API token.
    """
    import jwt

    try:
        claims = jwt.decode(
            token,
            _mcp_key(api_token),
            algorithms=["HS256"],
            audience=MCP_AUDIENCE,
            options={"require": ["aud", "sub"]},
        )
    except jwt.InvalidTokenError:
        return None
    session = claims.get("sub")
    return session if isinstance(session, str) and session else None
