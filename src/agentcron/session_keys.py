"""The session key grammar, checked on every surface (API, WebSocket, hook, CLI, library).

A session key is `channel:id`:

- `channel`: 1-32 characters, a letter then letters, digits, `_`, `-` or `.`
  (`websocket`, `api`, `telegram`, `unified`, ...);
- `id`: 1-200 printable characters (no control characters such as NUL or newline), not starting
  or ending with whitespace; anything else is allowed, `/` and `:` included (in a URL path,
  percent-encode it: `/api/sessions/api:a%2Fb`).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from agentcron.errors import InvalidInputError

__all__ = ["MAX_SESSION_KEY", "SESSION_KEY_HELP", "SessionKey", "check_session_key"]

MAX_CHANNEL = 32
MAX_CHAT_ID = 200
MAX_SESSION_KEY = MAX_CHANNEL + 1 + MAX_CHAT_ID
SESSION_KEY_HELP = (
    "`channel:id`, e.g. `websocket:abc`: a channel of 1-32 letters, digits, `_`, `-`, `.` "
    "(starting with a letter), `:`, then an id of 1-200 printable characters without leading "
    "or trailing whitespace (percent-encode `/` in a URL path)"
)
_CHANNEL = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,31}")


def check_session_key(key: object) -> str:
    """`key` if it follows the grammar, else InvalidInputError saying what is accepted."""
    if not isinstance(key, str):
        raise InvalidInputError(f"a session key is a string: {SESSION_KEY_HELP}")
    if len(key) > MAX_SESSION_KEY:
        raise InvalidInputError(
            f"session key too long ({len(key)} characters, at most {MAX_SESSION_KEY})"
        )
    channel, colon, chat_id = key.partition(":")
    if not colon or not _CHANNEL.fullmatch(channel):
        raise InvalidInputError(f"invalid session key {_short(key)}: {SESSION_KEY_HELP}")
    if not chat_id or len(chat_id) > MAX_CHAT_ID:
        raise InvalidInputError(
            f"invalid session key {_short(key)}: the id after `:` needs 1-{MAX_CHAT_ID} characters"
        )
    if not chat_id.isprintable() or chat_id != chat_id.strip():
        raise InvalidInputError(
            f"invalid session key {_short(key)}: the id must be printable characters, without "
            "control characters or leading/trailing whitespace"
        )
    return key


def _short(key: str) -> str:
    return repr(key if len(key) <= 60 else key[:57] + "...")


def _validate(key: str) -> str:
    try:
        return check_session_key(key)
    except InvalidInputError as exc:
        raise ValueError(str(exc)) from None


SessionKey = Annotated[
    str,
    Field(min_length=3, max_length=MAX_SESSION_KEY, description=SESSION_KEY_HELP),
    AfterValidator(_validate),
]
"""A request model's session key field: the grammar, as a pydantic type."""
