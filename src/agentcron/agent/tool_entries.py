"""A tool call as a transcript entry and as its run keeps it, arguments and result truncated."""

from __future__ import annotations

import json
from typing import Any

from agentcron.agent.runner import ToolRecord
from agentcron.domain.sessions import Entry, Role

__all__ = ["MAX_TOOL_ARGS_CHARS", "MAX_TOOL_RESULT_CHARS", "run_tool_call", "tool_entry"]

MAX_TOOL_ARGS_CHARS = 2_000
MAX_TOOL_RESULT_CHARS = 4_000


def _clip(text: str, limit: int) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[: limit - 1] + "…", True


def tool_entry(record: ToolRecord, turn_id: str) -> Entry:
    """A tool call and its result as a transcript entry, arguments and result truncated."""
    args: Any = record.args
    args_text = json.dumps(args, default=str)
    clipped_args = len(args_text) > MAX_TOOL_ARGS_CHARS
    if clipped_args:
        args = {"_truncated": _clip(args_text, MAX_TOOL_ARGS_CHARS)[0]}
    result, clipped_result = _clip(record.result, MAX_TOOL_RESULT_CHARS)
    meta: dict[str, Any] = {
        "turn_id": turn_id,
        "call_id": record.call_id,
        "name": record.name,
        "args": args,
        "ok": record.ok,
    }
    if record.duration_ms is not None:
        meta["duration_ms"] = record.duration_ms
    if clipped_args or clipped_result:
        meta["truncated"] = True
    return Entry(Role.TOOL, result, meta)


def run_tool_call(entry: Entry) -> dict[str, Any]:
    """A tool entry (`tool_entry`: arguments and result already truncated) as a run record
    keeps it: name, args, result (the error text when `ok` is False), ok, duration_ms.
    """
    meta = entry.meta
    call: dict[str, Any] = {
        "call_id": meta["call_id"],
        "name": meta["name"],
        "args": meta["args"],
        "result": entry.content,
        "ok": meta["ok"],
        "duration_ms": meta.get("duration_ms"),
    }
    if meta.get("truncated"):
        call["truncated"] = True
    return call
