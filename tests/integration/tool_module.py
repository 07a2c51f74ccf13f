"""Tools named by entry points in the tests' configuration (`tests.integration.tool_module:...`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic_ai import Tool

from agentcron.agent.gate import UserTool

calls: list[dict[str, Any]] = []


def lookup(q: str) -> str:
    """Look a word up."""
    calls.append({"lookup": q})
    return f"found {q}"


def forecast(city: str) -> str:
    """Tomorrow's weather in a city."""
    calls.append({"forecast": city})
    return f"sunny in {city}"


def wipe(path: str) -> str:
    """Delete a path."""
    calls.append({"wipe": path})
    return f"wiped {path}"


WEATHER = [
    forecast,
    UserTool(Tool(wipe), requires_approval=True, approval_timeout=timedelta(minutes=2)),
]
NOT_A_TOOL = 42
EMPTY: list[Any] = []


def calc_add(a: int, b: int) -> int:
    """Shares its name with the `calc` MCP server's `add` (a collision)."""
    return a + b
