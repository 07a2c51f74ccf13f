"""Upper bounds on what a caller may send, one place for every surface (docs/server.md, "Limits").

Every bound has a clear 4xx: a body over `MAX_BODY_BYTES` is 413, the rest 422.
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field

from agentcron.errors import InvalidInputError

__all__ = [
    "MAX_ATTACHMENTS",
    "MAX_ATTACHMENT_BYTES",
    "MAX_ATTACHMENT_URL_CHARS",
    "MAX_BODY_BYTES",
    "MAX_BUDGET_TOKENS",
    "MAX_BUDGET_USD",
    "MAX_EVENT_BYTES",
    "MAX_EVENT_ID_CHARS",
    "MAX_HISTORY_TOKENS",
    "MAX_JOB_TOOLS",
    "MAX_MESSAGE_CHARS",
    "MAX_META_BYTES",
    "MAX_NAME_CHARS",
    "MAX_RUNNER_URL_CHARS",
    "MAX_RUNS",
    "MAX_SHORT_CHARS",
    "MessageText",
    "MetaObject",
    "NameText",
    "RunnerUrl",
    "ShortText",
    "ZoneText",
    "check_job_tools",
    "check_meta",
    "check_runner_url",
    "check_text",
]

MAX_BODY_BYTES = 1024 * 1024  # a request body (HTTP) or a WebSocket frame
MAX_MESSAGE_CHARS = 100_000  # a message, a note, a job's message
MAX_NAME_CHARS = 200  # a job's name, a session's title
MAX_SHORT_CHARS = 200  # `when`, `tz`, `model`, an idempotency key
MAX_RUNS = 1_000_000  # a job's max_runs
MAX_BUDGET_USD = 1_000_000.0  # a budget's cap in dollars (per run, day or month)
MAX_BUDGET_TOKENS = 10**12  # a budget's cap in tokens
MAX_HISTORY_TOKENS = 1_000_000  # a job's own history budget
MAX_JOB_TOOLS = 64  # names in a job's tool allow-list (each at most MAX_SHORT_CHARS)
MAX_META_BYTES = 16 * 1024  # a session's channel_meta, as JSON
MAX_META_DEPTH = 16
MAX_ATTACHMENTS = 4  # files carried with one message (in or out)
# An attachment's bytes (inline, or fetched from Telegram): kept in memory for a turn and in
# an outbound delivery record until sent, so small; a bigger file goes by URL.
MAX_ATTACHMENT_BYTES = 512 * 1024
MAX_ATTACHMENT_URL_CHARS = 2048
MAX_RUNNER_URL_CHARS = 2048  # a session's or a job's own runner URL
MAX_EVENT_BYTES = 64 * 1024  # an event posted to a job's trigger (its JSON body, 413 past it)
MAX_EVENT_ID_CHARS = 200  # an event's `webhook-id` (printable ASCII)


def check_text(text: str, what: str = "text") -> str:
    """`text` if a database can store it: no NUL character, no lone surrogate (PostgreSQL
    refuses the first, every encoder the second); InvalidInputError otherwise.
    """
    if "\x00" in text:
        raise InvalidInputError(f"{what} contains a NUL character (\\u0000): it cannot be stored")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError(
            f"{what} contains a lone surrogate (an unpaired \\ud800-\\udfff escape): not valid text"
        ) from None
    return text


def _valid(text: str) -> str:
    try:
        return check_text(text, "the text")
    except InvalidInputError as exc:
        raise ValueError(str(exc)) from None


_Text = AfterValidator(_valid)
MessageText = Annotated[str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS), _Text]
"""A message's text in a request model."""
NameText = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS), _Text]
"""A name or a title in a request model."""
ShortText = Annotated[str, Field(min_length=1, max_length=MAX_SHORT_CHARS), _Text]
"""A short value (a schedule phrase, a model name, a key) in a request model."""
ZoneText = Annotated[str, Field(max_length=64), _Text]
"""An IANA zone name in a request model (checked against the zone database by the service)."""


def check_runner_url(url: str | None) -> str | None:
    """A session's or a job's own runner URL (None: none): http(s) with a host, no spaces, at
    most `MAX_RUNNER_URL_CHARS`; InvalidInputError otherwise.
    """
    if url is None:
        return None
    check_text(url, "runner_url")
    if len(url) > MAX_RUNNER_URL_CHARS:
        raise InvalidInputError(
            f"runner_url has at most {MAX_RUNNER_URL_CHARS} characters (this one has {len(url)})"
        )
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed [IPv6] host
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in url):
        raise InvalidInputError(
            f"runner_url must be an http:// or https:// URL with a host, got {url[:80]!r}"
        )
    return url


def _valid_runner_url(url: str) -> str:
    try:
        return check_runner_url(url) or url
    except InvalidInputError as exc:
        raise ValueError(str(exc)) from None


RunnerUrl = Annotated[str, AfterValidator(_valid_runner_url)]
"""A session's or a job's own runner URL in a request model."""


def _check_json(value: Any, depth: int = 0) -> None:
    if depth > MAX_META_DEPTH:
        raise ValueError(f"nested deeper than {MAX_META_DEPTH} levels")
    if isinstance(value, str):
        _valid(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _valid(str(key))
            _check_json(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_json(item, depth + 1)


def _valid_meta(value: dict[str, Any]) -> dict[str, Any]:
    _check_json(value)
    size = len(json.dumps(value, ensure_ascii=False).encode())
    if size > MAX_META_BYTES:
        raise ValueError(f"at most {MAX_META_BYTES} bytes as JSON (this is {size})")
    return value


def check_meta(value: dict[str, Any]) -> dict[str, Any]:
    """`value` if it is a small JSON object of clean text; InvalidInputError otherwise."""
    try:
        return _valid_meta(value)
    except ValueError as exc:
        raise InvalidInputError(f"channel_meta: {exc}") from None


MetaObject = Annotated[dict[str, Any], AfterValidator(_valid_meta)]
"""A small JSON object of the caller's (a session's channel_meta) in a request model."""


_TOOL_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:")


def check_job_tools(tools: Any) -> tuple[str, ...] | None:
    """A job's tool allow-list (None: every tool): at most `MAX_JOB_TOOLS` tool names, each
    1 to `MAX_SHORT_CHARS` letters, digits, `_`, `-`, `.` or `:`; repeats dropped, order
    kept. InvalidInputError otherwise.
    """
    if tools is None:
        return None
    if isinstance(tools, str) or not isinstance(tools, list | tuple):
        raise InvalidInputError("tools must be a list of tool names")
    if len(tools) > MAX_JOB_TOOLS:
        raise InvalidInputError(f"tools: at most {MAX_JOB_TOOLS} names (got {len(tools)})")
    names: list[str] = []
    for name in tools:
        if (
            not isinstance(name, str)
            or not 1 <= len(name) <= MAX_SHORT_CHARS
            or not set(name) <= _TOOL_NAME_CHARS
        ):
            shown = repr(name)[:80]
            raise InvalidInputError(f"tools: {shown} is not a tool name (letters, digits, _ - . :)")
        if name not in names:
            names.append(name)
    return tuple(names)
