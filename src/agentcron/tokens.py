"""The bearer tokens in the data dir: one for the API and WebSocket, one for the inbound hook."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

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
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # a new data dir: owner only
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
