"""The fake LLM server's script and wire encodings (the servers run in the integration tests)."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers.fake_llm import (
    Reply,
    Turn,
    anthropic_events,
    anthropic_turn,
    default_script,
    openai_chunks,
    openai_turn,
)

REMINDER = Reply(thinking="think it", text="On it.", tool=("cron", {"action": "add"}))


def test_the_script_schedules_a_reminder_reports_a_tool_result_and_handles_the_rest() -> None:
    scheduled = default_script(Turn("remind me in 5 seconds to stretch.", None))
    assert scheduled.tool == (
        "cron",
        {"action": "add", "name": "stretch", "when": "in 5 seconds", "message": "stretch"},
    )
    assert scheduled.thinking
    assert default_script(Turn("x", "Scheduled it\nmore")) == Reply(text="Done: Scheduled it")
    assert default_script(Turn("[scheduled] run\nTask: y", None)) == Reply(
        text="Handled: [scheduled] run"
    )


def test_requests_are_read_in_each_api_s_shape() -> None:
    openai = {"messages": [{"role": "user", "content": "hi"},
                           {"role": "assistant", "tool_calls": []},
                           {"role": "tool", "content": "ok"}]}  # fmt: skip
    assert openai_turn(openai) == Turn("hi", "ok")
    anthropic: dict[str, Any] = {"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use"}]},
        {"role": "user", "content": [{"type": "tool_result", "content": [{"type": "text", "text": "ok"}]}]},
    ]}  # fmt: skip
    assert anthropic_turn(anthropic) == Turn("hi", "ok")
    assert anthropic_turn({"messages": [{"role": "user", "content": "again"}]}) == Turn(
        "again", None
    )


def _data(lines: list[str]) -> list[Any]:
    found = []
    for event in lines:
        (data,) = [line[6:] for line in event.splitlines() if line.startswith("data: ")]
        found.append(data if data == "[DONE]" else json.loads(data))
    return found


def test_openai_chunks_carry_reasoning_text_a_split_tool_call_and_usage_last() -> None:
    chunks = _data(list(openai_chunks(REMINDER, "m")))
    assert chunks[-1] == "[DONE]"
    assert chunks[-2]["choices"] == []
    assert chunks[-2]["usage"]["prompt_tokens"] > 0
    deltas = [c["choices"][0]["delta"] for c in chunks[:-2] if c["choices"]]
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "think it"
    assert "".join(d.get("content", "") for d in deltas) == "On it."
    calls = [d["tool_calls"][0] for d in deltas if "tool_calls" in d]
    assert len(calls) == 2
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == {"action": "add"}
    assert chunks[-3]["choices"][0]["finish_reason"] == "tool_calls"


def test_anthropic_events_come_in_the_messages_api_order() -> None:
    events = list(anthropic_events(REMINDER, "m"))
    names = [e.split("\n", 1)[0].removeprefix("event: ") for e in events]
    assert names[0] == "message_start"
    assert names[-2:] == ["message_delta", "message_stop"]
    data = _data(events)
    starts = [d["content_block"]["type"] for d in data if d["type"] == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use"]
    pieces = [d["delta"] for d in data if d["type"] == "content_block_delta"]
    assert {p["type"] for p in pieces} == {
        "thinking_delta", "signature_delta", "text_delta", "input_json_delta"}  # fmt: skip
    raw = "".join(p["partial_json"] for p in pieces if p["type"] == "input_json_delta")
    assert json.loads(raw) == {"action": "add"}
    assert data[-2]["delta"]["stop_reason"] == "tool_use"
