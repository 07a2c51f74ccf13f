"""The package's error root: every error agentcron raises on purpose is an `AgentcronError`.

The edges map them once: the server to HTTP statuses (`server/errors.py`, one table), the CLI to
one line on stderr. What is not an `AgentcronError` is a bug or a library's error.
"""

from __future__ import annotations

__all__ = ["AgentcronError", "InvalidInputError"]


class AgentcronError(Exception):
    """Base of the errors agentcron raises on purpose (store, schedule, settings, channels,
    prompts, tools, input).
    """


class InvalidInputError(AgentcronError, ValueError):
    """A caller's value is not usable (an empty message, two sources of one thing); the
    message says what is accepted. HTTP 422.
    """
